"""The local GitHub's HTTP face: one threaded server per sandbox, faults, authentication and rate limits.

The routes themselves are blueprints in ``sandbox.github.routes``, one per area of GitHub's API; every
request passes the hooks here first (latency, injected faults, auth, the primary and content-creation limits)
and last (rate-limit headers, the request log).
"""

from __future__ import annotations

import io
import re
import secrets
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson
from flask import Flask, Response, g, request
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from sandbox.github.ratelimits import SECONDARY_MESSAGE
from sandbox.github.routes import BLUEPRINTS
from sandbox.github.routes.common import DOCS, SERVICE_KEY, error_response, json_response
from sandbox.github.service import GitHub
from sandbox.github.state import StateError

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

SECONDARY_DOCS = (
    "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits"
)
SERVER_KEY = "spark.sandbox.server"
LISTEN_BACKLOG = 128  # werkzeug's own
JWT_PATHS = re.compile(r"^/app(/|$)|^/repos/[^/]+/[^/]+/installation$|^/orgs/[^/]+/installation$")
# The archive download (codeload on GitHub) is authorised by its link's token, not a header; the blob store a
# job log's URL points to checks its own signature. Pages a person opens in a browser (a pull request, a
# commit, a file) need no credentials, as on github.com.
PUBLIC_PATHS = re.compile(
    r"^/app-manifests/|^/settings/apps/|^/favicon|^/_codeload/|^/_blobs/"
    r"|^/(?!repos/)[^/]+/[^/]+/(pull|commit|blob)/"
)


@dataclass(frozen=True)
class LoggedRequest:
    """One served request, for tests and benchmarks (count calls, see what a flow did)."""

    method: str
    path: str
    status: int
    duration: float
    started: float


class _KeepAliveInput:
    """A connection reader whose ``read`` is empty (unless ``passthrough``) while ``readline`` reads on.

    ``http.server`` reads request lines and headers with ``readline``; werkzeug's drain after a response
    uses ``read`` and, on a kept-alive connection, would swallow the client's next request.
    """

    def __init__(self, raw: io.BufferedReader) -> None:
        self.raw = raw
        self.passthrough = False

    def read(self, size: int = -1) -> bytes:
        """Return nothing: the body was already read into the environ (or pass through for chunked)."""
        return self.raw.read(size) if self.passthrough else b""

    def readline(self, size: int = -1) -> bytes:
        """Read the next request or header line."""
        return self.raw.readline(size)

    def close(self) -> None:
        """Close the underlying reader."""
        self.raw.close()

    def __getattr__(self, name: str) -> object:
        return getattr(self.raw, name)


class QuietHandler(WSGIRequestHandler):
    """Werkzeug's handler without one access-log line per request (the request log records them)."""

    # TCP_NODELAY on every accepted socket: werkzeug writes a response's headers and body separately, and
    # Nagle's algorithm could hold the body until the client's delayed ACK (~40 ms).
    disable_nagle_algorithm = True
    rfile: _KeepAliveInput  # type: ignore[assignment]

    def setup(self) -> None:
        """Wrap the connection's reader so werkzeug's after-response drain cannot eat the next request."""
        super().setup()
        self.rfile = _KeepAliveInput(self.rfile)  # type: ignore[arg-type]

    def make_environ(self) -> WSGIEnvironment:
        """Read a sized request body up front, so the connection is ready for the client's next request."""
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        self.rfile.passthrough = chunked  # a chunked body keeps werkzeug's own reading (and its close)
        environ = super().make_environ()
        if not chunked:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            environ["wsgi.input"] = io.BytesIO(self.rfile.raw.read(length) if length > 0 else b"")
        return environ

    def send_header(self, keyword: str, value: str) -> None:
        """Keep connections alive as GitHub does: drop werkzeug's blanket ``Connection: close``.

        Werkzeug closes every connection because it cannot tell whether the app read the whole body (and
        drains the socket after each response); ``make_environ`` read it, so the next request line starts
        where this body ends.
        """
        if not self.rfile.passthrough and keyword.lower() == "connection" and value.lower() == "close":
            return
        super().send_header(keyword, value)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Skip the access log."""


class Server:
    """Builds the Flask app over a GitHub service and runs it on a threaded werkzeug server."""

    def __init__(self, github: GitHub) -> None:
        self.github = github
        self.request_log: list[LoggedRequest] = []
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle ----------------------------------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Serve in a background thread; return the bound port (OSError when it cannot be bound)."""
        shared_app()
        # Bound here, not by werkzeug: on a taken port it prints to stderr and exits the process.
        with socket.create_server((host, port), backlog=LISTEN_BACKLOG) as listener:
            bound = int(listener.getsockname()[1])
            self._server = make_server(
                host,
                bound,
                self.wsgi,
                threaded=True,
                request_handler=QuietHandler,
                fd=listener.fileno(),  # werkzeug serves a duplicate of it
            )
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="sandbox-github",
            daemon=True,
        )
        self._thread.start()
        return bound

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # ---- request plumbing ---------------------------------------------------------------------------------

    def wsgi(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Serve one request with the process-wide Flask app, pointed at this sandbox."""
        environ[SERVER_KEY] = self
        environ[SERVICE_KEY] = self.github
        method, path = str(environ.get("REQUEST_METHOD", "")), str(environ.get("PATH_INFO", ""))
        if not self.github.faults.take_lost(method, path):
            return shared_app()(environ, start_response)
        # A lost answer: the request is served (its writes happen), then the connection drops unanswered.
        answer = shared_app()(environ, lambda status, headers, exc_info=None: lambda data: None)
        b"".join(answer)
        socket_ = environ.get("werkzeug.socket")
        if socket_ is not None:
            socket_.shutdown(socket.SHUT_RDWR)
        start_response("500 Lost", [("Content-Length", "0")])
        return []

    def before(self) -> Response | None:
        """Apply latency, triggers, injected faults, then GitHub's authentication and primary rate limit."""
        g.started = time.perf_counter()
        faults = self.github.faults
        if faults.latency:
            time.sleep(faults.latency)
        path = request.path
        for trigger in faults.due_triggers(request.method, path):
            trigger.action()
        rule = faults.take_injection(request.method, path)
        if rule is not None:
            if isinstance(rule.body, (dict, list)):
                return json_response(rule.body, rule.status, rule.headers)
            message = str(rule.body) if rule.body else _reason(rule.status)
            return json_response({"message": message, "documentation_url": DOCS}, rule.status, rule.headers)
        if PUBLIC_PATHS.search(path):
            return None
        scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
        if not credential:
            return error_response(401, "Requires authentication")
        auth = self.github.auth
        if JWT_PATHS.search(path):
            if scheme.lower() != "bearer":
                return error_response(401, "A JSON web token could not be decoded")
            auth.verify_jwt(credential)
            g.token = "app"
            return None
        if scheme.lower() not in ("token", "bearer"):
            return error_response(401, "Bad credentials")
        g.installation_id = auth.installation_for(credential)
        g.token = f"installation:{g.installation_id}"
        if faults.primary.used(g.token) >= faults.rate_limit:
            message = f"API rate limit exceeded for installation ID {g.installation_id}."
            if path == "/graphql":
                # GraphQL answers its primary limit with 200 and a RATE_LIMITED error (remaining is 0).
                return json_response({"errors": [{"type": "RATE_LIMITED", "message": message}]})
            return error_response(403, message)
        if self.creates_content() and not faults.content.admit(g.installation_id):
            refusal = {"message": SECONDARY_MESSAGE, "documentation_url": SECONDARY_DOCS}
            return json_response(refusal, faults.content.status, faults.content.headers())
        return None

    def creates_content(self) -> bool:
        """Return whether this request creates content (a REST POST or a GraphQL mutation)."""
        if request.method != "POST":
            return False
        if request.path != "/graphql":
            return True
        try:
            query = orjson.loads(request.get_data() or b"{}").get("query")
        except (orjson.JSONDecodeError, AttributeError):
            return False
        return isinstance(query, str) and query.lstrip().startswith("mutation")

    def after(self, response: Response) -> Response:
        """Add rate-limit and request-id headers, and log the request."""
        started = g.get("started", time.perf_counter())
        duration = time.perf_counter() - started
        token = g.get("token")
        if token is not None:
            primary, limit = self.github.faults.primary, self.github.faults.rate_limit
            # A request the limit refused is not counted again: the use stays at the limit.
            spent = primary.used(token)
            if response.status_code != 403 or spent < limit:
                spent = primary.count(token)
            used = min(spent, limit)
            response.headers["x-ratelimit-limit"] = str(limit)
            response.headers["x-ratelimit-remaining"] = str(limit - used)
            response.headers["x-ratelimit-used"] = str(used)
            response.headers["x-ratelimit-reset"] = str(primary.reset)
            response.headers["x-ratelimit-resource"] = "graphql" if request.path == "/graphql" else "core"
        response.headers["x-github-request-id"] = secrets.token_hex(8).upper()
        response.headers["x-github-api-version-selected"] = "2022-11-28"
        self.request_log.append(
            LoggedRequest(
                request.method, request.full_path.rstrip("?"), response.status_code, duration, started
            )
        )
        return response


def _reason(status: int) -> str:
    return {
        500: "Server Error",
        502: "Bad Gateway",
        503: "Service Unavailable",
        404: "Not Found",
        429: "Too Many Requests",
        403: "Forbidden",
        401: "Bad credentials",
    }.get(status, "Error")


def _current() -> Server:
    """Return the server this request came in through (one Flask app serves every sandbox of the process)."""
    server: Server = request.environ[SERVER_KEY]
    return server


_APP_LOCK = threading.Lock()
_APP: list[Flask] = []


def shared_app() -> Flask:
    """Return the process's Flask app, built once under a lock (compiling its routes costs more than a test).

    ``Server.start`` calls it before serving, so no request ever waits on (or races) the build.
    """
    with _APP_LOCK:
        if not _APP:
            _APP.append(_build_app())
        return _APP[0]


def _build_app() -> Flask:
    app = Flask("spark-sandbox-github")
    app.url_map.strict_slashes = False
    app.before_request(lambda: _current().before())
    app.after_request(lambda response: _current().after(response))
    app.register_error_handler(StateError, lambda e: error_response(e.status, e.message, e.errors))
    app.register_error_handler(404, lambda e: error_response(404, "Not Found"))
    app.register_error_handler(405, lambda e: error_response(404, "Not Found"))
    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint)
    # Sort the rules now: werkzeug otherwise does it at the first request, from whichever thread comes first.
    app.url_map.update()
    return app
