"""The web pages a person uses: a pull request's page with its comment box, a commit, a file at a commit.

No sign-in: whoever opens the local GitHub picks who they act as (``as``), and each action fires the webhooks
GitHub would. ``POST …/pull/{n}/comments`` serves the page's form (answered with a redirect to the new
comment) and ``spark sandbox comment`` (``Accept: application/json``: the comment's REST shape, or the error).
Comments go in the conversation, in a review thread or on a line of the diff; 👍 and 👎 react to a comment;
the page's buttons commit a suggestion and press a check run's requested action or "Re-run", for people with
write access, as on GitHub.
"""

from __future__ import annotations

import secrets
import urllib.parse
from collections.abc import Callable, Mapping

from flask import Blueprint, Response, request

from sandbox.github.pages import Pages, check_login
from sandbox.github.routes.common import github, json_response
from sandbox.github.service import CommentSpec
from sandbox.github.shapes import Json
from sandbox.github.state import PullRequest, Side, StateError

blueprint = Blueprint("web", __name__)
RERUN = "rerequest"


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


@blueprint.get("/<owner>/<name>/pull/<int:number>/comments")
def conversation(owner: str, name: str, number: int) -> Response:
    """What ``spark sandbox comment --wait`` watches: the pull request's comments and reviews after ``since``.

    Not an API of GitHub's (the real clients read through the REST API, with a token): the page's own view of
    the conversation as JSON, oldest first, each item ``kind`` (comment, review, review_comment) and its REST
    shape.
    """
    gh = github()
    pr = gh.state.pull(f"{owner}/{name}", number)
    since = int(request.args["since"]) if request.args.get("since", "").isdigit() else 0
    mine = (pr.repo, pr.number)
    state, shapes = gh.state, gh.shapes
    items: list[tuple[int, str, Json]] = [
        (c.id, "comment", shapes.issue_comment(c))
        for c in state.issue_comments.values()
        if (c.repo, c.number) == mine
    ]
    items += [
        (r.id, "review", shapes.review(r))
        for r in state.reviews.values()
        if (r.repo, r.number) == mine and r.event != "PENDING" and r.body
    ]
    pending = {r.id for r in state.reviews.values() if r.event == "PENDING"}
    items += [
        (c.id, "review_comment", shapes.review_comment(c))
        for c in state.review_comments.values()
        if (c.repo, c.number) == mine and c.review_id not in pending
    ]
    items.sort(key=lambda item: item[0])
    return json_response([{"kind": kind, **shape} for id_, kind, shape in items if id_ > since])


@blueprint.post("/<owner>/<name>/pull/<int:number>/comments")
def comment(owner: str, name: str, number: int) -> Response:
    """Comment (or reply in a review thread, with ``in_reply_to``) as the user the form names."""
    pr = person_acting(owner, name, number)
    wants_json = "application/json" in request.headers.get("Accept", "")
    login, text = request.form.get("as") or pr.author, request.form.get("body", "")
    try:
        made, anchor = post_comment(pr, login, text, request.form)
    except StateError as exc:
        if wants_json:
            raise
        return refused(pr, login, exc, draft=text)
    if wants_json:
        return json_response(made, 201)
    return back_to(pr, made["user"]["login"], anchor)


@blueprint.post("/<owner>/<name>/pull/<int:number>/suggestions/<int:comment_id>")
def commit_suggestion(owner: str, name: str, number: int, comment_id: int) -> Response:
    """Press "Commit suggestion" on a review comment: one commit on the head branch, pushed as the user."""
    pr = person_acting(owner, name, number)
    gh = github()
    login = request.form.get("as") or pr.author
    try:
        login = may_push(pr, check_login(login, gh.bot_login))
        comment = gh.state.review_comments.get(comment_id)
        if comment is None or (comment.repo, comment.number) != (pr.repo, pr.number):
            raise StateError(404, "Not Found")
        commit = gh.apply_suggestion(comment_id, login)
    except StateError as exc:
        return refused(pr, login, exc)
    return back_to(pr, login, f"commit-{commit.sha[:7]}")


@blueprint.post("/<owner>/<name>/pull/<int:number>/checks/<int:run_id>")
def check_run_action(owner: str, name: str, number: int, run_id: int) -> Response:
    """Press a check run's requested action (``action`` is its identifier) or "Re-run" (``rerequest``)."""
    pr = person_acting(owner, name, number)
    gh = github()
    login, action = request.form.get("as") or pr.author, request.form.get("action", "")
    try:
        login = may_push(pr, check_login(login, gh.bot_login))
        run = gh.state.check_runs.get(run_id)
        if run is None or run.repo != pr.repo:
            raise StateError(404, "Not Found")
        if action == RERUN:
            gh.check_run_event(run, "rerequested", login)
        elif action in {str(a.get("identifier")) for a in run.actions}:
            gh.check_run_event(run, "requested_action", login, action)
        else:
            raise StateError(422, f"The check run {run.name!r} offers no action {action!r}")
    except StateError as exc:
        return refused(pr, login, exc)
    return back_to(pr, login, "checks")


def person_acting(owner: str, name: str, number: int) -> PullRequest:
    """Return the pull request a person acts on; refuse what another site's page made a browser post."""
    pr = github().state.pull(f"{owner}/{name}", number)
    origin = request.headers.get("Origin")
    if origin is not None and origin != f"{request.scheme}://{request.host}":
        raise StateError(403, "Actions come from this sandbox's own page or `spark sandbox comment`")
    return pr


def may_push(pr: PullRequest, login: str) -> str:
    """Return ``login`` if they may push to the pull request's branch (write access, or the fork's owner)."""
    state = github().state
    head = state.repo(pr.head_repo)
    if login == head.owner or state.permission(state.repo(pr.repo), login) in ("write", "maintain", "admin"):
        return login
    raise StateError(
        403, f"{login} has no write access to {pr.repo}: only people with write access may do this"
    )


def refused(pr: PullRequest, login: str, exc: StateError, draft: str = "") -> Response:
    """Show the pull request's page again with GitHub's reason, keeping what the person wrote."""
    pages, reason = Pages(github()), exc.message
    return html_response(
        lambda nonce: pages.pull_request(pr, nonce=nonce, error=reason, draft=draft, as_user=login),
        exc.status,
    )


def back_to(pr: PullRequest, login: str, anchor: str) -> Response:
    """Send the browser back to the page, at what the action made, still acting as ``login``."""
    moved = Response(status=303)
    query = urllib.parse.urlencode({"as": login})
    moved.headers["Location"] = f"{Pages(github()).pull_path(pr)}?{query}#{anchor}"
    return moved


def post_comment(pr: PullRequest, login: str, text: str, form: Mapping[str, str]) -> tuple[Json, str]:
    """Post a comment as ``login``: in the conversation, as a reply in a review thread (``in_reply_to``) or
    on a line of the diff (``path`` and ``line``, GitHub's placement rules apply); return its REST shape and
    its anchor on the page."""
    gh = github()
    login = check_login(login, gh.bot_login)
    if not text.strip():
        raise StateError(422, "A comment needs some text")
    if form.get("in_reply_to"):
        reply = gh.reply(pr, number_in(form, "in_reply_to"), text, login)
        return gh.shapes.review_comment(reply), f"discussion_r{reply.id}"
    if form.get("path"):
        side: Side = "LEFT" if form.get("side") == "LEFT" else "RIGHT"
        spec = CommentSpec(form["path"], text, number_in(form, "line"), side)
        inline = gh.create_review_comment(pr, spec, None, login)
        return gh.shapes.review_comment(inline), f"discussion_r{inline.id}"
    made = gh.add_issue_comment(pr, text, login)
    return gh.shapes.issue_comment(made), f"issuecomment-{made.id}"


def number_in(form: Mapping[str, str], name: str) -> int:
    """Return a form field that must be a positive number, or 422 naming it."""
    value = form.get(name, "").strip()
    if not value.isdigit() or int(value) < 1:
        raise StateError(422, f"{name} must be a positive number, got {value!r}")
    return int(value)


@blueprint.post("/<owner>/<name>/pull/<int:number>/reactions/<int:comment_id>")
def react(owner: str, name: str, number: int, comment_id: int) -> Response:
    """React to a comment of the conversation or of a review thread (GitHub fires no webhook for it)."""
    pr = person_acting(owner, name, number)
    gh = github()
    login, content = request.form.get("as") or pr.author, request.form.get("content", "")
    state = gh.state
    try:
        login = check_login(login, gh.bot_login)
        if (comment := state.issue_comments.get(comment_id)) is not None:
            subject, anchor = "issue_comment", f"issuecomment-{comment_id}"
            mine = (comment.repo, comment.number) == (pr.repo, pr.number)
        elif (inline := state.review_comments.get(comment_id)) is not None:
            subject, anchor = "review_comment", f"discussion_r{comment_id}"
            mine = (inline.repo, inline.number) == (pr.repo, pr.number)
        else:
            mine = False
        if not mine:
            raise StateError(404, "Not Found")
        gh.react(subject, comment_id, content, login)
    except StateError as exc:
        return refused(pr, login, exc)
    return back_to(pr, login, anchor)


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
