"""The App Manifest flow, standing in for github.com: form POST, confirm page, redirect, code conversion."""

from __future__ import annotations

import html
import json
import secrets
import time
from urllib.parse import urlencode, urlsplit

from flask import Blueprint, Response, request

from sandbox.github.routes.common import github, json_response
from sandbox.github.state import StateError, utcnow

blueprint = Blueprint("manifest", __name__)

CODE_TTL = 3600.0  # GitHub: the whole flow must finish within one hour.

CONFIRM_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Create GitHub App (sandbox)</title></head>
<body>
<h1>Create GitHub App <span id="app-name">{name}</span></h1>
<p>The local GitHub sandbox will register this App and send you back to <code>{redirect}</code>.</p>
<form method="post" action="/settings/apps/new/confirm">
<input type="hidden" name="manifest" value="{manifest}">
<input type="hidden" name="state" value="{state}">
<button type="submit" id="create-app">Create GitHub App for {name}</button>
</form>
</body></html>
"""


def _manifest_from_form() -> dict[str, object]:
    raw = request.form.get("manifest") or request.args.get("manifest")
    if not raw:
        raise StateError(422, "Invalid GitHub App configuration", ["manifest is required"])
    try:
        manifest = json.loads(raw)
    except ValueError as exc:
        raise StateError(422, "Invalid GitHub App configuration", ["manifest is not valid JSON"]) from exc
    if (
        not isinstance(manifest, dict)
        or not manifest.get("url")
        or not isinstance(manifest.get("hook_attributes"), dict)
    ):
        raise StateError(
            422, "Invalid GitHub App configuration", ["url and hook_attributes.url are required"]
        )
    redirect_url = str(manifest.get("redirect_url") or "")
    if urlsplit(redirect_url).scheme not in ("http", "https"):
        raise StateError(422, "Invalid GitHub App configuration", ["redirect_url must be an http(s) URL"])
    return manifest


@blueprint.route("/settings/apps/new", methods=["GET", "POST"])
@blueprint.route("/organizations/<org>/settings/apps/new", methods=["GET", "POST"])
def new_app(org: str | None = None) -> Response:
    """The form GitHub shows before registering an App from its manifest."""
    wanted = _manifest_from_form()
    page = CONFIRM_PAGE.format(
        name=html.escape(str(wanted.get("name") or "app")),
        redirect=html.escape(str(wanted["redirect_url"])),
        manifest=html.escape(json.dumps(wanted), quote=True),
        state=html.escape(request.values.get("state", ""), quote=True),
    )
    return Response(page, mimetype="text/html")


@blueprint.post("/settings/apps/new/confirm")
def confirm_app() -> Response:
    """Register the App: a one-time code, sent back to the manifest's redirect URL."""
    wanted = _manifest_from_form()
    code = secrets.token_hex(10)
    github().state.manifest_codes[code] = (time.time() + CODE_TTL, wanted)
    query = {"code": code}
    if request.form.get("state"):
        query["state"] = request.form["state"]
    target = str(wanted["redirect_url"])
    response = Response(status=302)
    response.headers["Location"] = target + ("&" if "?" in target else "?") + urlencode(query)
    return response


@blueprint.post("/app-manifests/<code>/conversions")
def convert(code: str) -> Response:
    """Trade the code (once, within the hour) for the App's id, key and webhook secret."""
    gh = github()
    expires_manifest = gh.state.manifest_codes.pop(code, None)  # single use
    if expires_manifest is None or expires_manifest[0] < time.time():
        raise StateError(404, "Not Found")
    wanted = expires_manifest[1]
    hook = wanted.get("hook_attributes")
    if isinstance(hook, dict) and hook.get("url") and gh.hookshot.url is None:
        gh.hookshot.url = str(hook["url"])
    events = wanted.get("default_events")
    if isinstance(events, list):
        # The App is subscribed to exactly the manifest's events; GitHub sends it nothing else.
        gh.shapes.events = tuple(str(e) for e in events)
    slug = gh.shapes.app_slug
    data = {
        **gh.shapes.app(gh.auth.app_id),
        "name": wanted.get("name") or slug,
        "description": wanted.get("description") or "",
        "external_url": wanted.get("url"),
        "created_at": utcnow(),
        "client_id": f"Iv1.{secrets.token_hex(8)}",
        "client_secret": secrets.token_hex(20),
        "webhook_secret": gh.hookshot.secret,
        "pem": gh.auth.private_key_pem,
    }
    return json_response(data, 201)
