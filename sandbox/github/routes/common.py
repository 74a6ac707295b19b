"""What every route of the local GitHub shares: the service behind a request, JSON answers, paging, access."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import orjson
from flask import Response, g, request

from sandbox.github.service import GitHub
from sandbox.github.shapes import Json
from sandbox.github.state import PullRequest, Repo, StateError

# One Flask app serves every sandbox of the process; each request carries its own sandbox's service here.
SERVICE_KEY = "spark.sandbox.github"
DOCS = "https://docs.github.com/rest"


def github() -> GitHub:
    """Return the GitHub service of the sandbox serving this request."""
    service: GitHub = request.environ[SERVICE_KEY]
    return service


def installation_id() -> int:
    """Return the installation whose token authenticated this request."""
    installation: int = g.installation_id
    return installation


def json_response(data: object, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """Serialize with orjson (fast) into a GitHub-like JSON response."""
    response = Response(orjson.dumps(data), status=status, mimetype="application/json")
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def error_response(status: int, message: str, errors: list[object] | None = None) -> Response:
    """GitHub's error body: message, optional errors, documentation_url."""
    data: Json = {"message": message}
    if errors:
        data["errors"] = errors
    data["documentation_url"] = DOCS
    data["status"] = str(status)
    return json_response(data, status)


def media_type() -> str:
    """Return the media type the client asked for in ``Accept`` (without parameters)."""
    return request.headers.get("Accept", "").split(";")[0].strip()


def body() -> Json:
    """Parse the JSON body, or GitHub's 400 "Problems parsing JSON"."""
    try:
        data = orjson.loads(request.get_data() or b"{}")
    except orjson.JSONDecodeError as exc:
        raise StateError(400, "Problems parsing JSON") from exc
    if not isinstance(data, dict):
        raise StateError(400, "Problems parsing JSON")
    return data


def page(items: list[Any], render: Callable[[Any], object]) -> Response:
    """Paginate a list with `page`/`per_page` and a GitHub `Link` header."""
    per_page = max(1, min(int(request.args.get("per_page", 30)), 100))
    number = max(1, int(request.args.get("page", 1)))
    chunk = items[(number - 1) * per_page : number * per_page]
    response = json_response([render(item) for item in chunk])
    last = max(1, -(-len(items) // per_page))
    links = []
    base = github().shapes.api + request.path
    args = {k: v for k, v in request.args.items() if k != "page"}
    if number < last:
        links.append(f'<{base}?{urlencode({**args, "page": number + 1})}>; rel="next"')
        links.append(f'<{base}?{urlencode({**args, "page": last})}>; rel="last"')
    if number > 1:
        links.append(f'<{base}?{urlencode({**args, "page": number - 1})}>; rel="prev"')
        links.append(f'<{base}?{urlencode({**args, "page": 1})}>; rel="first"')
    if links:
        response.headers["Link"] = ", ".join(links)
    return response


def repo_for(owner: str, name: str, write: bool = False) -> Repo:
    """Return a repository the calling installation may read (or write), else GitHub's 404/403."""
    gh = github()
    repo = gh.state.repo(f"{owner}/{name}")
    if not gh.can_read(installation_id(), repo):
        raise StateError(404, "Not Found")
    if write and not gh.can_write_branch(installation_id(), repo, None):
        raise StateError(403, "Resource not accessible by integration")
    return repo


def pull_for(owner: str, name: str, number: int) -> PullRequest:
    """Return a pull request of a readable repository."""
    return github().state.pull(repo_for(owner, name).full_name, number)
