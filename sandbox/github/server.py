"""The sandbox's HTTP face: GitHub's REST routes, auth, rate-limit headers and faults, threaded."""

from __future__ import annotations

import base64
import binascii
import io
import posixpath
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote, urlencode

import orjson
from flask import Flask, Response, g, request
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from sandbox.github.graphql import GraphQLApi
from sandbox.github.manifest import register_manifest_routes
from sandbox.github.ratelimits import SECONDARY_MESSAGE
from sandbox.github.service import CommentSpec, GitHub
from sandbox.github.shapes import APP_PERMISSIONS, Json, Shapes
from sandbox.github.state import (
    EXECUTABLE_MODE,
    FILE_MODE,
    SUBMODULE_MODE,
    SYMLINK_MODE,
    TREE_MODE,
    Entry,
    IssueComment,
    PullRequest,
    Repo,
    State,
    StateError,
    utcnow,
)

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

DOCS = "https://docs.github.com/rest"
SECONDARY_DOCS = (
    "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits"
)
SERVER_KEY = "spark.sandbox.server"
DIFF_MEDIA = ("application/vnd.github.diff", "application/vnd.github.v3.diff")
RAW_MEDIA = ("application/vnd.github.raw", "application/vnd.github.raw+json", "application/vnd.github.v3.raw")
# https://docs.github.com/rest/repos/contents#get-repository-content: content inline up to 1 MB, the raw media
# type up to 100 MB, nothing above.
CONTENTS_INLINE_MAX = 1024 * 1024
CONTENTS_MAX = 100 * 1024 * 1024
TOO_LARGE_MESSAGE = "The requested blob is too large to fetch via the API (the limit is 100 MB)."
TOO_LARGE_ERROR = {"resource": "Blob", "field": "data", "code": "too_large"}
# A pull request's whole diff: at most 300 files, 20,000 lines, 1 MB, else 406 (repository-limits page,
# https://docs.github.com/repositories/creating-and-managing-repositories/repository-limits); the per-file
# listing (`GET …/pulls/{n}/files`) stops at 3,000 files (https://docs.github.com/rest/pulls/pulls).
MAX_DIFF_FILES = 300
MAX_DIFF_LINES = 20_000
MAX_DIFF_BYTES = 1024 * 1024
MAX_LISTED_FILES = 3000
JWT_PATHS = re.compile(r"^/app(/|$)|^/repos/[^/]+/[^/]+/installation$|^/orgs/[^/]+/installation$")
PUBLIC_PATHS = re.compile(r"^/app-manifests/|^/settings/apps/|^/favicon")


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


def json_response(data: object, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """Serialize with orjson (fast) into a GitHub-like JSON response."""
    response = Response(orjson.dumps(data), status=status, mimetype="application/json")
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def error_response(status: int, message: str, errors: list[object] | None = None) -> Response:
    """GitHub's error body: message, optional errors, documentation_url."""
    body: Json = {"message": message}
    if errors:
        body["errors"] = errors
    body["documentation_url"] = DOCS
    body["status"] = str(status)
    return json_response(body, status)


class Server:
    """Builds the Flask app over a GitHub service and runs it on a threaded werkzeug server."""

    def __init__(self, github: GitHub) -> None:
        self.github = github
        self.graphql = GraphQLApi(github)
        self.request_log: list[LoggedRequest] = []
        self.manifest_codes: dict[str, tuple[float, Json]] = {}
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._used: dict[str, int] = {}  # primary rate limit use per installation (or the App) this hour
        self._reset = int(time.time()) + 3600

    # ---- lifecycle ----------------------------------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Serve in a background thread; return the bound port."""
        shared_app()
        self._server = make_server(host, port, self.wsgi, threaded=True, request_handler=QuietHandler)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="sandbox-github",
            daemon=True,
        )
        self._thread.start()
        return int(self._server.server_port)

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
            body = {
                "message": str(rule.body) if rule.body else _reason(rule.status),
                "documentation_url": DOCS,
            }
            return json_response(body, rule.status, rule.headers)
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
        if self._used.get(g.token, 0) >= faults.rate_limit:
            message = f"API rate limit exceeded for installation ID {g.installation_id}."
            if path == "/graphql":
                # GraphQL answers its primary limit with 200 and a RATE_LIMITED error (remaining is 0).
                return json_response({"errors": [{"type": "RATE_LIMITED", "message": message}]})
            return error_response(403, message)
        if self.creates_content() and not faults.content.admit(g.installation_id):
            body = {"message": SECONDARY_MESSAGE, "documentation_url": SECONDARY_DOCS}
            return json_response(body, faults.content.status, faults.content.headers())
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
            limit = self.github.faults.rate_limit
            if response.status_code != 403 or self._used.get(token, 0) < limit:
                self._used[token] = self._used.get(token, 0) + 1
            used = min(self._used[token], limit)
            response.headers["x-ratelimit-limit"] = str(limit)
            response.headers["x-ratelimit-remaining"] = str(limit - used)
            response.headers["x-ratelimit-used"] = str(used)
            response.headers["x-ratelimit-reset"] = str(self._reset)
            response.headers["x-ratelimit-resource"] = "graphql" if request.path == "/graphql" else "core"
        response.headers["x-github-request-id"] = secrets.token_hex(8).upper()
        response.headers["x-github-api-version-selected"] = "2022-11-28"
        self.request_log.append(
            LoggedRequest(
                request.method, request.full_path.rstrip("?"), response.status_code, duration, started
            )
        )
        return response

    def repo_for(self, owner: str, name: str, write: bool = False) -> Repo:
        """Return a repository the calling installation may read (or write), else GitHub's 404/403."""
        repo = self.github.state.repo(f"{owner}/{name}")
        installation = g.installation_id
        if not self.github.can_read(installation, repo):
            raise StateError(404, "Not Found")
        if write and not self.github.can_write_branch(installation, repo, None):
            raise StateError(403, "Resource not accessible by integration")
        return repo

    def pull_for(self, owner: str, name: str, number: int) -> PullRequest:
        """Return a readable PR."""
        repo = self.repo_for(owner, name)
        return self.github.state.pull(repo.full_name, number)

    def body(self) -> Json:
        """Parse the JSON body, or GitHub's 400 "Problems parsing JSON"."""
        try:
            data = orjson.loads(request.get_data() or b"{}")
        except orjson.JSONDecodeError as exc:
            raise StateError(400, "Problems parsing JSON") from exc
        if not isinstance(data, dict):
            raise StateError(400, "Problems parsing JSON")
        return data

    def page(self, items: list[Any], render: Callable[[Any], object]) -> Response:
        """Paginate a list with `page`/`per_page` and a GitHub `Link` header."""
        per_page = max(1, min(int(request.args.get("per_page", 30)), 100))
        page = max(1, int(request.args.get("page", 1)))
        chunk = items[(page - 1) * per_page : page * per_page]
        response = json_response([render(item) for item in chunk])
        last = max(1, -(-len(items) // per_page))
        links = []
        base = self.github.shapes.api + request.path
        args = {k: v for k, v in request.args.items() if k != "page"}
        if page < last:
            links.append(f'<{base}?{urlencode({**args, "page": page + 1})}>; rel="next"')
            links.append(f'<{base}?{urlencode({**args, "page": last})}>; rel="last"')
        if page > 1:
            links.append(f'<{base}?{urlencode({**args, "page": page - 1})}>; rel="prev"')
            links.append(f'<{base}?{urlencode({**args, "page": 1})}>; rel="first"')
        if links:
            response.headers["Link"] = ", ".join(links)
        return response

    # ---- routes -------------------------------------------------------------------------------------------

    # ---- renderers that need the request context ----------------------------------------------------------

    def issue_comment_for(self, owner: str, name: str, comment_id: int) -> IssueComment:
        """Return an issue comment of a readable repository."""
        repo = self.repo_for(owner, name)
        comment = self.github.state.issue_comments.get(comment_id)
        if comment is None or comment.repo != repo.full_name:
            raise StateError(404, "Not Found")
        return comment

    def check_runs_for(self, repo: Repo, ref: str) -> Response:
        """`GET …/commits/{ref}/check-runs`, newest first, optionally filtered by `check_name`."""
        sha = self.github.state.resolve_ref(repo, ref)
        name = request.args.get("check_name")
        runs = [
            r
            for r in self.github.state.check_runs.values()
            if r.repo == repo.full_name and r.head_sha == sha and (name is None or r.name == name)
        ]
        runs.sort(key=lambda r: -r.id)
        return json_response(
            {"total_count": len(runs), "check_runs": [self.github.shapes.check_run(r) for r in runs]}
        )

    def content_json(
        self, repo: Repo, path: str, entry: Entry, ref: str, with_content: bool = True, kind: str = ""
    ) -> Json:
        """A `contents` entry: a file (base64 content up to 1 MB), a symlink or a submodule.

        https://docs.github.com/rest/repos/contents#get-repository-content: files of 1-100 MB come with an
        empty ``content`` and ``encoding: "none"`` (only the raw media type carries them); a submodule has
        ``type: "submodule"`` and its ``submodule_git_url``; a symlink ``type: "symlink"`` and its ``target``.
        """
        mode, sha = entry
        git = self.github.state.git
        api, html = self.github.shapes.api, self.github.shapes.html
        where = quote(path)
        submodule = mode == SUBMODULE_MODE
        data = b"" if submodule else git.blobs[sha]
        out: Json = {
            "type": kind or ("submodule" if submodule else "symlink" if mode == SYMLINK_MODE else "file"),
            "size": len(data),
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "sha": sha,
            "url": f"{api}/repos/{repo.full_name}/contents/{where}?ref={ref}",
            "git_url": None if submodule else f"{api}/repos/{repo.full_name}/git/blobs/{sha}",
            "html_url": f"{html}/{repo.full_name}/{'tree' if submodule else 'blob'}/{ref}/{where}",
            "download_url": None if submodule else f"{html}/{repo.full_name}/raw/{ref}/{where}",
        }
        out["_links"] = {"self": out["url"], "git": out["git_url"], "html": out["html_url"]}
        out["submodule_git_url"] = self.github.state.submodule_urls.get(sha, "") if submodule else None
        if out["type"] == "symlink":
            out["target"] = data.decode("utf-8", "replace")
        elif out["type"] == "file" and with_content:
            inline = len(data) <= CONTENTS_INLINE_MAX
            out["encoding"] = "base64" if inline else "none"
            out["content"] = base64.encodebytes(data).decode() if inline else ""
        return out

    def contents(self, repo: Repo, path: str, ref: str) -> Response:
        """`GET …/contents/{path}`: a file, symlink, submodule or directory, as GitHub answers each."""
        git = self.github.state.git
        entries = git.entries_at(self.github.state.resolve_ref(repo, ref))
        raw = request.headers.get("Accept", "").split(";")[0].strip() in RAW_MEDIA
        entry = entries.get(path)
        if entry is not None:
            shown, target = entry, None
            if entry[0] == SYMLINK_MODE:
                target = git.blobs[entry[1]].decode("utf-8", "replace")
                resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
                found = entries.get(resolved)
                if found is not None and found[0] in (FILE_MODE, EXECUTABLE_MODE):
                    # A symlink to a normal file answers with that file's content (and the link's target).
                    shown = found
                else:
                    target = None
            if shown[0] != SUBMODULE_MODE and len(git.blobs[shown[1]]) > CONTENTS_MAX:
                raise StateError(403, TOO_LARGE_MESSAGE, [TOO_LARGE_ERROR])
            if raw and shown[0] != SUBMODULE_MODE:
                return Response(git.blobs[shown[1]], status=200, mimetype="application/vnd.github.raw")
            out = self.content_json(repo, path, shown, ref, kind="file" if target else "")
            if target is not None:
                out["target"] = target
            return json_response(out)
        prefix = f"{path}/" if path else ""
        names = sorted({p[len(prefix) :].split("/")[0] for p in entries if p.startswith(prefix)})
        if not names:
            raise StateError(404, "Not Found")
        api = self.github.shapes.api
        listing = []
        for name in names:
            full = prefix + name
            if full in entries:
                # In a directory listing a submodule is a "file", for backwards compatibility (same page).
                kind = "file" if entries[full][0] == SUBMODULE_MODE else ""
                listing.append(
                    self.content_json(repo, full, entries[full], ref, with_content=False, kind=kind)
                )
            else:
                listing.append(
                    {
                        "type": "dir",
                        "name": name,
                        "path": full,
                        "sha": None,
                        "size": 0,
                        "url": f"{api}/repos/{repo.full_name}/contents/{quote(full)}?ref={ref}",
                    }
                )
        return json_response(listing)

    def tree_json(self, repo: Repo, sha: str, recursive: bool) -> Json:
        """A git tree, optionally recursive (paths joined with /)."""
        git = self.github.state.git
        api = self.github.shapes.api

        def walk(tree_sha: str, prefix: str) -> Iterable[Json]:
            for mode, name, child in git.trees[tree_sha]:
                is_tree, is_commit = mode == TREE_MODE, mode == SUBMODULE_MODE
                yield {
                    "path": prefix + name,
                    "mode": "040000" if is_tree else mode,
                    "type": "tree" if is_tree else "commit" if is_commit else "blob",
                    "sha": child,
                    "size": None if is_tree or is_commit else len(git.blobs[child]),
                    "url": f"{api}/repos/{repo.full_name}/git/{'trees' if is_tree else 'blobs'}/{child}",
                }
                if is_tree and recursive:
                    yield from walk(child, prefix + name + "/")

        return {
            "sha": sha,
            "url": f"{api}/repos/{repo.full_name}/git/trees/{sha}",
            "tree": list(walk(sha, "")),
            "truncated": False,
        }

    def ref_json(self, repo: Repo, branch: str) -> Json:
        """A git ref object."""
        api = self.github.shapes.api
        sha = repo.refs[branch]
        return {
            "ref": f"refs/heads/{branch}",
            "node_id": None,
            "url": f"{api}/repos/{repo.full_name}/git/refs/heads/{branch}",
            "object": {
                "type": "commit",
                "sha": sha,
                "url": f"{api}/repos/{repo.full_name}/git/commits/{sha}",
            },
        }

    def raw_diff(self, pr: PullRequest) -> Response:
        """The PR as `git diff` text, or GitHub's 406 when it is too large to render."""
        files = self.github.state.pr_diff(pr)
        too_large = {"resource": "PullRequest", "field": "diff", "code": "too_large"}
        if len(files) > MAX_DIFF_FILES:
            raise StateError(
                406,
                f"Sorry, the diff exceeded the maximum number of files ({MAX_DIFF_FILES}). Consider "
                "using 'List pull requests files' API or locally cloning the repository instead.",
                [too_large],
            )
        chunks: list[str] = []
        for f in files:
            old = f"a/{f.path}" if f.old_sha else "/dev/null"
            new = f"b/{f.path}" if f.new_sha else "/dev/null"
            head = [f"diff --git a/{f.path} b/{f.path}"]
            same_mode = f.status == "modified" and f.old_mode == f.new_mode
            if f.status == "added":
                head.append(f"new file mode {f.new_mode or FILE_MODE}")
            elif f.status == "removed":
                head.append(f"deleted file mode {f.old_mode or FILE_MODE}")
            elif not same_mode:
                head += [f"old mode {f.old_mode}", f"new mode {f.new_mode}"]
            head.append(
                f"index {(f.old_sha or '0' * 40)[:7]}..{(f.new_sha or '0' * 40)[:7]}"
                + (f" {f.old_mode or FILE_MODE}" if same_mode else "")
            )
            if f.binary:
                head.append(f"Binary files {old} and {new} differ")
            else:
                head += [f"--- {old}", f"+++ {new}", f.hunks_text]
            chunks.append("\n".join(head))
        text = "\n".join(chunks) + ("\n" if chunks else "")
        if text.count("\n") > MAX_DIFF_LINES or len(text.encode()) > MAX_DIFF_BYTES:
            raise StateError(
                406,
                f"Sorry, the diff exceeded the maximum number of lines ({MAX_DIFF_LINES}). Consider "
                "using 'List pull requests files' API or locally cloning the repository instead.",
                [too_large],
            )
        return Response(
            text, status=200, mimetype="application/vnd.github.diff", content_type="text/plain; charset=utf-8"
        )

    def app_json(self) -> Json:
        """`GET /app`."""
        return self.github.shapes.app(self.github.auth.app_id)

    def installation_json(self, installation_id: int) -> Json:
        """An installation object."""
        account = self.github.state.installations[installation_id]
        api = self.github.shapes.api
        return {
            "id": installation_id,
            "account": self.github.shapes.user(account),
            "repository_selection": "selected",
            "access_tokens_url": f"{api}/app/installations/{installation_id}/access_tokens",
            "repositories_url": f"{api}/installation/repositories",
            "html_url": f"{self.github.shapes.html}/settings/installations/{installation_id}",
            "app_id": self.github.auth.app_id,
            "app_slug": self.github.shapes.app_slug,
            "target_id": self.github.state.user_id(account),
            "target_type": "Organization",
            "permissions": self.permissions(),
            "events": self.app_json()["events"],
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": utcnow(),
            "single_file_name": None,
            "suspended_at": None,
            "suspended_by": None,
        }

    @staticmethod
    def permissions() -> dict[str, str]:
        """The App's permissions (what bot/web/app.yml asks for)."""
        return dict(APP_PERMISSIONS)


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


class _Current:
    """A stand-in that forwards attribute access to the object ``resolve`` returns for this request."""

    def __init__(self, resolve: Callable[[], object]) -> None:
        self._resolve = resolve

    def __getattr__(self, name: str) -> Any:
        return getattr(self._resolve(), name)


def _current() -> Server:
    server: Server = request.environ[SERVER_KEY]
    return server


_APP_LOCK = threading.Lock()
_APP: list[Flask] = []


def shared_app() -> Flask:
    """Return the process's Flask app, built once under a lock (compiling ~50 routes costs more than a test).

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
    _add_routes(app)
    register_manifest_routes(app, cast(Server, _Current(_current)))
    # Sort the rules now: werkzeug otherwise does it at the first request, from whichever thread comes first.
    app.url_map.update()
    return app


def _add_routes(app: Flask) -> None:
    """GitHub's REST routes; each finds its sandbox in the request (one Flask app per process)."""
    srv = cast(Server, _Current(lambda: request.environ[SERVER_KEY]))
    gh = cast(GitHub, _Current(lambda: srv.github))
    state = cast(State, _Current(lambda: srv.github.state))
    shapes = cast(Shapes, _Current(lambda: srv.github.shapes))
    route = app.route

    @route("/app")
    def get_app() -> Response:
        return json_response(srv.app_json())

    @route("/app/installations")
    def list_installations() -> Response:
        return srv.page(sorted(state.installations), srv.installation_json)

    @route("/app/installations/<int:installation_id>")
    def get_installation(installation_id: int) -> Response:
        if installation_id not in state.installations:
            raise StateError(404, "Not Found")
        return json_response(srv.installation_json(installation_id))

    @route("/app/installations/<int:installation_id>/access_tokens", methods=["POST"])
    def create_token(installation_id: int) -> Response:
        if installation_id not in state.installations:
            raise StateError(404, "Not Found")
        issued = gh.auth.mint(installation_id)
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(issued.expires_at))
        return json_response(
            {
                "token": issued.token,
                "expires_at": expires,
                "permissions": srv.permissions(),
                "repository_selection": "selected",
            },
            201,
        )

    @route("/repos/<owner>/<name>/installation")
    def repo_installation(owner: str, name: str) -> Response:
        repo = state.repo(f"{owner}/{name}")
        if repo.installation_id is None:
            raise StateError(404, "Not Found")
        return json_response(srv.installation_json(repo.installation_id))

    @route("/app/hook/deliveries")
    def list_deliveries() -> Response:
        newest_first = list(reversed(gh.hookshot.deliveries))
        return srv.page(newest_first, lambda d: d.summary())

    @route("/app/hook/deliveries/<int:delivery_id>")
    def get_delivery(delivery_id: int) -> Response:
        try:
            delivery = gh.hookshot.find(delivery_id)
        except KeyError as exc:
            raise StateError(404, "Not Found") from exc
        data = delivery.summary()
        data["url"] = gh.hookshot.url
        data["request"] = {
            "headers": {"X-GitHub-Event": delivery.event, "X-GitHub-Delivery": delivery.guid},
            "payload": orjson.loads(delivery.body),
        }
        data["response"] = {"headers": {}, "payload": None}
        return json_response(data)

    @route("/app/hook/deliveries/<int:delivery_id>/attempts", methods=["POST"])
    def redeliver(delivery_id: int) -> Response:
        try:
            gh.hookshot.redeliver(delivery_id)
        except KeyError as exc:
            raise StateError(404, "Not Found") from exc
        return json_response({}, 202)

    @route("/installation/repositories")
    def installation_repositories() -> Response:
        repos = [r for r in state.repos.values() if r.installation_id == g.installation_id]
        return json_response({"total_count": len(repos), "repositories": [shapes.repo(r) for r in repos]})

    @route("/rate_limit")
    def rate_limit() -> Response:
        core = {
            "limit": srv.github.faults.rate_limit,
            "remaining": max(srv.github.faults.rate_limit - srv._used.get(g.token, 0), 0),
            "reset": srv._reset,
        }
        core["used"] = core["limit"] - core["remaining"]
        return json_response({"resources": {"core": core, "graphql": core}, "rate": core})

    @route("/users/<login>")
    def get_user(login: str) -> Response:
        return json_response(shapes.user(login))

    @route("/repos/<owner>/<name>")
    def get_repo(owner: str, name: str) -> Response:
        return json_response(shapes.repo(srv.repo_for(owner, name)))

    @route("/repos/<owner>/<name>/pulls")
    def list_pulls(owner: str, name: str) -> Response:
        repo = srv.repo_for(owner, name)
        wanted = request.args.get("state", "open")
        head = request.args.get("head")
        pulls = sorted((p for p in state.pulls.values() if p.repo == repo.full_name), key=lambda p: -p.number)
        pulls = [p for p in pulls if wanted == "all" or p.state == wanted]
        if head:
            pulls = [p for p in pulls if f"{state.repo(p.head_repo).owner}:{p.head_ref}" == head]
        return srv.page(pulls, shapes.pull)

    @route("/repos/<owner>/<name>/pulls/<int:number>")
    def get_pull(owner: str, name: str, number: int) -> Response:
        pr = srv.pull_for(owner, name, number)
        if request.headers.get("Accept", "").split(";")[0].strip() in DIFF_MEDIA:
            return srv.raw_diff(pr)
        return json_response(shapes.pull(pr))

    @route("/repos/<owner>/<name>/pulls/<int:number>", methods=["PATCH"])
    def edit_pull(owner: str, name: str, number: int) -> Response:
        pr = srv.pull_for(owner, name, number)
        data = srv.body()
        if data.get("state") == "closed" and pr.state == "open":
            gh.close_pull_request(pr, gh.bot_login)
        for key in ("title", "body"):
            if key in data:
                setattr(pr, key, data[key])
        return json_response(shapes.pull(pr))

    @route("/repos/<owner>/<name>/pulls/<int:number>/files")
    def pull_files(owner: str, name: str, number: int) -> Response:
        pr = srv.pull_for(owner, name, number)
        head = state.head_sha(pr)
        return srv.page(state.pr_diff(pr)[:MAX_LISTED_FILES], lambda f: shapes.file(pr.head_repo, head, f))

    @route("/repos/<owner>/<name>/pulls/<int:number>/commits")
    def pull_commits(owner: str, name: str, number: int) -> Response:
        pr = srv.pull_for(owner, name, number)
        return srv.page(shapes.pr_commits(pr), lambda s: shapes.commit(pr.repo, state.git.commits[s], False))

    @route("/repos/<owner>/<name>/pulls/<int:number>/reviews")
    def list_reviews(owner: str, name: str, number: int) -> Response:
        pr = srv.pull_for(owner, name, number)
        reviews = [r for r in state.reviews.values() if (r.repo, r.number) == (pr.repo, pr.number)]
        return srv.page(reviews, shapes.review)

    @route("/repos/<owner>/<name>/pulls/<int:number>/reviews", methods=["POST"])
    def create_review(owner: str, name: str, number: int) -> Response:
        pr = srv.pull_for(owner, name, number)
        srv.repo_for(owner, name, write=True)
        data = srv.body()
        specs = [CommentSpec.from_json(c) for c in data.get("comments") or []]
        review = gh.create_review(
            pr,
            str(data.get("body") or ""),
            str(data.get("event") or "PENDING"),
            data.get("commit_id"),
            specs,
            gh.bot_login,
        )
        return json_response(shapes.review(review))

    @route("/repos/<owner>/<name>/pulls/<int:number>/reviews/<int:review_id>")
    def get_review(owner: str, name: str, number: int, review_id: int) -> Response:
        pr = srv.pull_for(owner, name, number)
        review = state.reviews.get(review_id)
        if review is None or (review.repo, review.number) != (pr.repo, pr.number):
            raise StateError(404, "Not Found")
        return json_response(shapes.review(review))

    @route("/repos/<owner>/<name>/pulls/<int:number>/reviews/<int:review_id>/comments")
    def review_comments_of(owner: str, name: str, number: int, review_id: int) -> Response:
        srv.pull_for(owner, name, number)
        comments = [c for c in state.review_comments.values() if c.review_id == review_id]
        return srv.page(comments, shapes.review_comment)

    @route("/repos/<owner>/<name>/pulls/<int:number>/comments")
    def list_review_comments(owner: str, name: str, number: int) -> Response:
        pr = srv.pull_for(owner, name, number)
        comments = [c for c in state.review_comments.values() if (c.repo, c.number) == (pr.repo, pr.number)]
        return srv.page(comments, shapes.review_comment)

    @route("/repos/<owner>/<name>/pulls/<int:number>/comments", methods=["POST"])
    def create_review_comment(owner: str, name: str, number: int) -> Response:
        pr = srv.pull_for(owner, name, number)
        srv.repo_for(owner, name, write=True)
        data = srv.body()
        if data.get("in_reply_to"):
            comment = gh.reply(pr, int(data["in_reply_to"]), str(data.get("body", "")), gh.bot_login)
        else:
            comment = gh.create_review_comment(
                pr, CommentSpec.from_json(data), data.get("commit_id"), gh.bot_login
            )
        return json_response(shapes.review_comment(comment), 201)

    @route("/repos/<owner>/<name>/pulls/<int:number>/comments/<int:comment_id>/replies", methods=["POST"])
    def reply(owner: str, name: str, number: int, comment_id: int) -> Response:
        pr = srv.pull_for(owner, name, number)
        srv.repo_for(owner, name, write=True)
        comment = gh.reply(pr, comment_id, str(srv.body().get("body", "")), gh.bot_login)
        return json_response(shapes.review_comment(comment), 201)

    @route("/repos/<owner>/<name>/pulls/comments/<int:comment_id>")
    def get_review_comment(owner: str, name: str, comment_id: int) -> Response:
        repo = srv.repo_for(owner, name)
        comment = state.review_comments.get(comment_id)
        if comment is None or comment.repo != repo.full_name:
            raise StateError(404, "Not Found")
        return json_response(shapes.review_comment(comment))

    @route("/repos/<owner>/<name>/issues/<int:number>/comments")
    def list_issue_comments(owner: str, name: str, number: int) -> Response:
        pr = srv.pull_for(owner, name, number)
        comments = [c for c in state.issue_comments.values() if (c.repo, c.number) == (pr.repo, pr.number)]
        return srv.page(comments, shapes.issue_comment)

    @route("/repos/<owner>/<name>/issues/<int:number>/comments", methods=["POST"])
    def create_issue_comment(owner: str, name: str, number: int) -> Response:
        pr = srv.pull_for(owner, name, number)
        srv.repo_for(owner, name, write=True)
        comment = gh.add_issue_comment(pr, str(srv.body().get("body") or ""), gh.bot_login)
        return json_response(shapes.issue_comment(comment), 201)

    @route("/repos/<owner>/<name>/issues/comments/<int:comment_id>", methods=["GET", "PATCH"])
    def issue_comment(owner: str, name: str, comment_id: int) -> Response:
        comment = srv.issue_comment_for(owner, name, comment_id)
        if request.method == "PATCH":
            srv.repo_for(owner, name, write=True)
            if comment.author != gh.bot_login:
                raise StateError(403, "Resource not accessible by integration")
            gh.edit_issue_comment(comment, str(srv.body().get("body") or ""), gh.bot_login)
        return json_response(shapes.issue_comment(comment))

    @route("/repos/<owner>/<name>/issues/<int:number>")
    def get_issue(owner: str, name: str, number: int) -> Response:
        return json_response(gh.issue(srv.pull_for(owner, name, number)))

    def reactions(subject: str, owner: str, name: str, comment_id: int) -> Response:
        if subject == "issue_comment":
            srv.issue_comment_for(owner, name, comment_id)
        elif comment_id not in state.review_comments:
            raise StateError(404, "Not Found")
        if request.method == "POST":
            srv.repo_for(owner, name, write=True)
            content = str(srv.body().get("content", ""))
            reaction, created = gh.react(subject, comment_id, content, gh.bot_login)
            return json_response(shapes.reaction(reaction), 201 if created else 200)
        found = [r for r in state.reactions.values() if (r.subject, r.subject_id) == (subject, comment_id)]
        return srv.page(found, shapes.reaction)

    app.add_url_rule(
        "/repos/<owner>/<name>/issues/comments/<int:comment_id>/reactions",
        "issue_reactions",
        lambda **kw: reactions("issue_comment", **kw),
        methods=["GET", "POST"],
    )
    app.add_url_rule(
        "/repos/<owner>/<name>/pulls/comments/<int:comment_id>/reactions",
        "review_reactions",
        lambda **kw: reactions("review_comment", **kw),
        methods=["GET", "POST"],
    )

    @route("/repos/<owner>/<name>/collaborators/<login>/permission")
    def collaborator_permission(owner: str, name: str, login: str) -> Response:
        return json_response(gh.permission_of(srv.repo_for(owner, name), login))

    @route("/repos/<owner>/<name>/contents/", defaults={"path": ""})
    @route("/repos/<owner>/<name>/contents/<path:path>")
    def contents(owner: str, name: str, path: str) -> Response:
        # Flask hands the path percent-decoded: `%23` is a `#` in a file name, while an unencoded `#` or `?`
        # never reaches here (the client cut the URL there), as on GitHub.
        repo = srv.repo_for(owner, name)
        return srv.contents(repo, path.strip("/"), request.args.get("ref") or repo.default_branch)

    @route("/repos/<owner>/<name>/git/blobs/<sha>")
    def get_blob(owner: str, name: str, sha: str) -> Response:
        repo = srv.repo_for(owner, name)
        if sha not in state.git.blobs:
            raise StateError(404, "Not Found")
        content = state.git.blobs[sha]
        if len(content) > CONTENTS_MAX:
            # https://docs.github.com/rest/git/blobs#get-a-blob: blobs up to 100 MB.
            raise StateError(403, TOO_LARGE_MESSAGE, [TOO_LARGE_ERROR])
        return json_response(
            {
                "sha": sha,
                "node_id": None,
                "size": len(content),
                "encoding": "base64",
                "url": f"{shapes.api}/repos/{repo.full_name}/git/blobs/{sha}",
                "content": base64.encodebytes(content).decode(),
            }
        )

    @route("/repos/<owner>/<name>/git/blobs", methods=["POST"])
    def create_blob(owner: str, name: str) -> Response:
        repo = srv.repo_for(owner, name, write=True)
        data = srv.body()
        raw = str(data.get("content", ""))
        try:
            content = base64.b64decode(raw) if data.get("encoding") == "base64" else raw.encode()
        except binascii.Error as exc:
            raise StateError(422, "Invalid Base64 content") from exc
        sha = state.git.put_blob(content)
        return json_response({"sha": sha, "url": f"{shapes.api}/repos/{repo.full_name}/git/blobs/{sha}"}, 201)

    @route("/repos/<owner>/<name>/git/trees/<sha>")
    def get_tree(owner: str, name: str, sha: str) -> Response:
        repo = srv.repo_for(owner, name)
        if sha not in state.git.trees:
            sha = state.git.commits[state.resolve_ref(repo, sha)].tree
        return json_response(srv.tree_json(repo, sha, recursive=bool(request.args.get("recursive"))))

    @route("/repos/<owner>/<name>/git/trees", methods=["POST"])
    def create_tree(owner: str, name: str) -> Response:
        repo = srv.repo_for(owner, name, write=True)
        data = srv.body()
        files = dict(state.git.flatten(data["base_tree"])) if data.get("base_tree") else {}
        for item in data.get("tree") or []:
            path = item["path"]
            if item.get("sha", "") is None and "content" not in item:
                files.pop(path, None)
            elif "content" in item:
                files[path] = state.git.put_blob(str(item["content"]).encode())
            else:
                if item["sha"] not in state.git.blobs:
                    raise StateError(422, "GitRPC::BadObjectState")
                files[path] = item["sha"]
        sha = state.git.build_tree_from_shas(files)
        return json_response(srv.tree_json(repo, sha, recursive=False), 201)

    @route("/repos/<owner>/<name>/git/commits/<sha>")
    def get_git_commit(owner: str, name: str, sha: str) -> Response:
        repo = srv.repo_for(owner, name)
        if sha not in state.git.commits:
            raise StateError(404, "Not Found")
        return json_response(shapes.git_commit(repo.full_name, state.git.commits[sha]))

    @route("/repos/<owner>/<name>/git/commits", methods=["POST"])
    def create_git_commit(owner: str, name: str) -> Response:
        repo = srv.repo_for(owner, name, write=True)
        data = srv.body()
        tree, parents = data.get("tree"), list(data.get("parents") or [])
        if tree not in state.git.trees or any(p not in state.git.commits for p in parents):
            raise StateError(
                422,
                "Tree SHA does not exist"
                if tree not in state.git.trees
                else "Parent SHA does not exist or is not a commit object",
            )
        author = data.get("author") or {}
        # GitHub signs an App's commit only when no custom author/committer is given.
        custom = bool(data.get("author") or data.get("committer") or data.get("signature"))
        commit = state.git.put_commit(
            str(tree),
            parents,
            str(data.get("message", "")),
            author.get("name", gh.bot_login),
            author.get("email", gh.bot_email),
            verified=not custom,
        )
        return json_response(shapes.git_commit(repo.full_name, commit), 201)

    @route("/repos/<owner>/<name>/git/ref/<path:ref>")
    @route("/repos/<owner>/<name>/git/refs/<path:ref>", methods=["GET"])
    def get_ref(owner: str, name: str, ref: str) -> Response:
        repo = srv.repo_for(owner, name)
        branch = ref.removeprefix("refs/").removeprefix("heads/")
        if branch not in repo.refs:
            raise StateError(404, "Not Found")
        return json_response(srv.ref_json(repo, branch))

    @route("/repos/<owner>/<name>/git/refs", methods=["POST"])
    def create_ref(owner: str, name: str) -> Response:
        repo = srv.repo_for(owner, name, write=True)
        data = srv.body()
        ref, sha = str(data.get("ref", "")), str(data.get("sha", ""))
        if not ref.startswith("refs/heads/") or ref.count("/") < 2:
            raise StateError(422, "Reference name must start with 'refs/' and have at least two slashes.")
        branch = ref.removeprefix("refs/heads/")
        if not srv.github.can_write_branch(g.installation_id, repo, branch):
            raise StateError(403, "Resource not accessible by integration")
        if branch in repo.refs:
            raise StateError(422, "Reference already exists")
        if sha not in state.git.commits:
            raise StateError(422, "Object does not exist")
        repo.refs[branch] = sha
        gh.branch_moved(repo, branch, None, sha, gh.bot_login)
        return json_response(srv.ref_json(repo, branch), 201)

    @route("/repos/<owner>/<name>/git/refs/<path:ref>", methods=["PATCH"])
    def update_ref(owner: str, name: str, ref: str) -> Response:
        repo = srv.repo_for(owner, name)
        data = srv.body()
        branch = ref.removeprefix("refs/").removeprefix("heads/")
        gh.update_ref(g.installation_id, repo, branch, str(data.get("sha", "")), bool(data.get("force")))
        return json_response(srv.ref_json(repo, branch))

    @route("/repos/<owner>/<name>/commits")
    def list_commits(owner: str, name: str) -> Response:
        repo = srv.repo_for(owner, name)
        tip = state.resolve_ref(repo, request.args.get("sha") or repo.default_branch)
        return srv.page(
            state.git.ancestors(tip), lambda s: shapes.commit(repo.full_name, state.git.commits[s], False)
        )

    @route("/repos/<owner>/<name>/commits/<path:ref>")
    def get_commit(owner: str, name: str, ref: str) -> Response:
        repo = srv.repo_for(owner, name)
        if ref.endswith("/check-runs"):
            return srv.check_runs_for(repo, ref.removesuffix("/check-runs"))
        sha = state.resolve_ref(repo, ref)
        return json_response(shapes.commit(repo.full_name, state.git.commits[sha]))

    @route("/repos/<owner>/<name>/compare/<path:basehead>")
    def compare(owner: str, name: str, basehead: str) -> Response:
        repo = srv.repo_for(owner, name)
        base_ref, sep, head_ref = basehead.partition("...")
        if not sep:
            raise StateError(404, "Not Found")
        base, head = state.resolve_ref(repo, base_ref), state.resolve_ref(repo, head_ref.split(":")[-1])
        merge_base = state.git.merge_base(head, base) or base
        ahead = [c for c in state.git.ancestors(head) if c not in set(state.git.ancestors(base))]
        behind = [c for c in state.git.ancestors(base) if c not in set(state.git.ancestors(head))]
        status = (
            "identical" if base == head else "ahead" if not behind else "behind" if not ahead else "diverged"
        )
        files = state.git.diff(merge_base, head)
        return json_response(
            {
                "url": f"{shapes.api}/repos/{repo.full_name}/compare/{basehead}",
                "html_url": f"{shapes.html}/{repo.full_name}/compare/{basehead}",
                "permalink_url": f"{shapes.html}/{repo.full_name}/compare/{base}...{head}",
                "diff_url": f"{shapes.html}/{repo.full_name}/compare/{basehead}.diff",
                "patch_url": f"{shapes.html}/{repo.full_name}/compare/{basehead}.patch",
                "base_commit": shapes.commit(repo.full_name, state.git.commits[base], False),
                "merge_base_commit": shapes.commit(repo.full_name, state.git.commits[merge_base], False),
                "status": status,
                "ahead_by": len(ahead),
                "behind_by": len(behind),
                "total_commits": len(ahead),
                "commits": [
                    shapes.commit(repo.full_name, state.git.commits[c], False) for c in reversed(ahead)
                ],
                "files": [shapes.file(repo.full_name, head, f) for f in files],
            }
        )

    @route("/repos/<owner>/<name>/check-runs", methods=["POST"])
    def create_check_run(owner: str, name: str) -> Response:
        repo = srv.repo_for(owner, name, write=True)
        return json_response(shapes.check_run(gh.create_check_run(repo, srv.body())), 201)

    @route("/repos/<owner>/<name>/check-runs/<int:run_id>", methods=["GET", "PATCH"])
    def check_run(owner: str, name: str, run_id: int) -> Response:
        repo = srv.repo_for(owner, name, write=request.method == "PATCH")
        run = state.check_runs.get(run_id)
        if run is None or run.repo != repo.full_name:
            raise StateError(404, "Not Found")
        if request.method == "PATCH":
            gh.update_check_run(run, srv.body())
        return json_response(shapes.check_run(run))

    @route("/graphql", methods=["POST"])
    def graphql() -> Response:
        data = srv.body()
        query = data.get("query")
        if not isinstance(query, str):
            raise StateError(400, "A query attribute must be specified and must be a string.")
        return json_response(srv.graphql.execute(g.installation_id, query, data.get("variables")))
