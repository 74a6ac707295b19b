"""The web pages a person uses: a pull request's page with its comment box, a commit, a file at a commit.

No sign-in: whoever opens the local GitHub picks who they comment as (``as``), and each comment fires the
webhook GitHub would. ``POST …/pull/{n}/comments`` serves the page's form (answered with a redirect to the new
comment) and ``spark sandbox comment`` (``Accept: application/json``: the comment's REST shape, or the error).
"""

from __future__ import annotations

import secrets
import urllib.parse
from collections.abc import Callable

from flask import Blueprint, Response, request

from sandbox.github.pages import Pages, check_login
from sandbox.github.routes.common import github, json_response
from sandbox.github.shapes import Json
from sandbox.github.state import PullRequest, StateError

blueprint = Blueprint("web", __name__)


def html_response(render: Callable[[str], str], status: int = 200) -> Response:
    """Serve a page whose only script runs by a fresh nonce: nothing in a comment can run or load anything."""
    nonce = secrets.token_urlsafe(16)
    response = Response(render(nonce), status=status, mimetype="text/html")
    response.headers["Content-Security-Policy"] = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
        "img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )
    response.headers["Cache-Control"] = "no-store"
    return response


@blueprint.get("/<owner>/<name>/pull/<int:number>")
def pull_page(owner: str, name: str, number: int) -> Response:
    gh = github()
    pr = gh.state.pull(f"{owner}/{name}", number)
    pages = Pages(gh)
    # `as` keeps the person who just commented as the one the boxes comment as.
    chosen = request.args.get("as", "")
    if request.args.get("part") == "live":
        return html_response(lambda nonce: pages.live(pr, chosen))
    return html_response(lambda nonce: pages.pull_request(pr, nonce=nonce, as_user=chosen))


@blueprint.post("/<owner>/<name>/pull/<int:number>/comments")
def comment(owner: str, name: str, number: int) -> Response:
    """Comment (or reply in a review thread, with ``in_reply_to``) as the user the form names."""
    gh = github()
    pr = gh.state.pull(f"{owner}/{name}", number)
    origin = request.headers.get("Origin")
    if origin is not None and origin != f"{request.scheme}://{request.host}":
        raise StateError(403, "Comments come from this sandbox's own page or `spark sandbox comment`")
    wants_json = "application/json" in request.headers.get("Accept", "")
    login, text = request.form.get("as") or pr.author, request.form.get("body", "")
    try:
        made, anchor = post_comment(pr, login, text, request.form.get("in_reply_to"))
    except StateError as exc:
        if wants_json:
            raise
        pages, reason = Pages(gh), exc.message
        return html_response(
            lambda nonce: pages.pull_request(pr, nonce=nonce, error=reason, draft=text, as_user=login),
            exc.status,
        )
    if wants_json:
        return json_response(made, 201)
    query = urllib.parse.urlencode({"as": made["user"]["login"]})
    moved = Response(status=303)
    moved.headers["Location"] = f"{Pages(gh).pull_path(pr)}?{query}#{anchor}"
    return moved


def post_comment(pr: PullRequest, login: str, text: str, in_reply_to: str | None) -> tuple[Json, str]:
    """Post a comment as ``login``; return its REST shape and its anchor on the page."""
    gh = github()
    login = check_login(login, gh.bot_login)
    if not text.strip():
        raise StateError(422, "A comment needs some text")
    if in_reply_to:
        if not in_reply_to.isdigit():
            raise StateError(422, f"in_reply_to must be a review comment's id, got {in_reply_to!r}")
        reply = gh.reply(pr, int(in_reply_to), text, login)
        return gh.shapes.review_comment(reply), f"discussion_r{reply.id}"
    made = gh.add_issue_comment(pr, text, login)
    return gh.shapes.issue_comment(made), f"issuecomment-{made.id}"


@blueprint.get("/<owner>/<name>/commit/<sha>")
def commit_page(owner: str, name: str, sha: str) -> Response:
    gh = github()
    repo = gh.state.repo(f"{owner}/{name}")
    full = gh.state.resolve_ref(repo, sha)
    return html_response(lambda nonce: Pages(gh).commit(repo.full_name, full, nonce=nonce))


@blueprint.get("/<owner>/<name>/blob/<ref>/<path:path>")
def blob_page(owner: str, name: str, ref: str, path: str) -> Response:
    gh = github()
    repo = gh.state.repo(f"{owner}/{name}")
    sha = gh.state.resolve_ref(repo, ref)
    return html_response(lambda nonce: Pages(gh).blob(repo.full_name, ref, sha, path, nonce=nonce))
