"""The App's routes: the App, an installation's token, a repository's installation, webhook deliveries."""

from __future__ import annotations

import time

from flask import Blueprint, Response

from sandbox.github.routes.common import github, json_response, page
from sandbox.github.shapes import APP_PERMISSIONS
from sandbox.github.state import StateError

blueprint = Blueprint("apps", __name__)


@blueprint.get("/app")
def get_app() -> Response:
    gh = github()
    return json_response(gh.shapes.app(gh.auth.app_id))


@blueprint.post("/app/installations/<int:installation>/access_tokens")
def create_token(installation: int) -> Response:
    gh = github()
    if installation not in gh.state.installations:
        raise StateError(404, "Not Found")
    issued = gh.auth.mint(installation)
    expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(issued.expires_at))
    return json_response(
        {
            "token": issued.token,
            "expires_at": expires,
            "permissions": dict(gh.state.permissions.get(installation, APP_PERMISSIONS)),
            "repository_selection": "selected",
        },
        201,
    )


@blueprint.get("/repos/<owner>/<name>/installation")
def repo_installation(owner: str, name: str) -> Response:
    gh = github()
    repo = gh.state.repo(f"{owner}/{name}")
    if repo.installation_id is None:
        raise StateError(404, "Not Found")
    return json_response(gh.shapes.installation(repo.installation_id))


@blueprint.get("/app/hook/deliveries")
def list_deliveries() -> Response:
    return page(list(reversed(github().hookshot.deliveries)), lambda d: d.summary())


@blueprint.post("/app/hook/deliveries/<int:delivery_id>/attempts")
def redeliver(delivery_id: int) -> Response:
    try:
        github().hookshot.redeliver(delivery_id)
    except KeyError as exc:
        raise StateError(404, "Not Found") from exc
    return json_response({}, 202)
