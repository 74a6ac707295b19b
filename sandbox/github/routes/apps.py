"""The App's routes: the App, its installations and their tokens, its webhook deliveries, the rate limit."""

from __future__ import annotations

import time

import orjson
from flask import Blueprint, Response, g

from sandbox.github.routes.common import github, installation_id, json_response, page
from sandbox.github.shapes import APP_PERMISSIONS
from sandbox.github.state import StateError

blueprint = Blueprint("apps", __name__)


@blueprint.get("/app")
def get_app() -> Response:
    gh = github()
    return json_response(gh.shapes.app(gh.auth.app_id))


@blueprint.get("/app/installations")
def list_installations() -> Response:
    gh = github()
    return page(sorted(gh.state.installations), gh.shapes.installation)


@blueprint.get("/app/installations/<int:installation>")
def get_installation(installation: int) -> Response:
    gh = github()
    if installation not in gh.state.installations:
        raise StateError(404, "Not Found")
    return json_response(gh.shapes.installation(installation))


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
            "permissions": dict(APP_PERMISSIONS),
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


@blueprint.get("/installation/repositories")
def installation_repositories() -> Response:
    gh = github()
    repos = [r for r in gh.state.repos.values() if r.installation_id == installation_id()]
    return json_response({"total_count": len(repos), "repositories": [gh.shapes.repo(r) for r in repos]})


@blueprint.get("/app/hook/deliveries")
def list_deliveries() -> Response:
    return page(list(reversed(github().hookshot.deliveries)), lambda d: d.summary())


@blueprint.get("/app/hook/deliveries/<int:delivery_id>")
def get_delivery(delivery_id: int) -> Response:
    hookshot = github().hookshot
    try:
        delivery = hookshot.find(delivery_id)
    except KeyError as exc:
        raise StateError(404, "Not Found") from exc
    data = delivery.summary()
    data["url"] = hookshot.url
    data["request"] = {
        "headers": {"X-GitHub-Event": delivery.event, "X-GitHub-Delivery": delivery.guid},
        "payload": orjson.loads(delivery.body),
    }
    data["response"] = {"headers": {}, "payload": None}
    return json_response(data)


@blueprint.post("/app/hook/deliveries/<int:delivery_id>/attempts")
def redeliver(delivery_id: int) -> Response:
    try:
        github().hookshot.redeliver(delivery_id)
    except KeyError as exc:
        raise StateError(404, "Not Found") from exc
    return json_response({}, 202)


@blueprint.get("/rate_limit")
def rate_limit() -> Response:
    faults = github().faults
    remaining = max(faults.rate_limit - faults.primary.used(g.token), 0)
    core = {"limit": faults.rate_limit, "remaining": remaining, "reset": faults.primary.reset}
    core["used"] = core["limit"] - core["remaining"]
    return json_response({"resources": {"core": core, "graphql": core}, "rate": core})


@blueprint.get("/users/<login>")
def get_user(login: str) -> Response:
    return json_response(github().shapes.user(login))
