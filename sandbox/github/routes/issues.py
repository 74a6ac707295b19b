"""A pull request's conversation: issue comments (the App edits only its own) and reactions to comments."""

from __future__ import annotations

from flask import Blueprint, Response, request

from sandbox.github.routes.common import body, github, json_response, page, pull_for, repo_for
from sandbox.github.state import IssueComment, StateError

blueprint = Blueprint("issues", __name__)


@blueprint.get("/repos/<owner>/<name>/issues/<int:number>/comments")
def list_issue_comments(owner: str, name: str, number: int) -> Response:
    pr = pull_for(owner, name, number)
    gh = github()
    comments = [c for c in gh.state.issue_comments.values() if (c.repo, c.number) == (pr.repo, pr.number)]
    return page(comments, gh.shapes.issue_comment)


@blueprint.post("/repos/<owner>/<name>/issues/<int:number>/comments")
def create_issue_comment(owner: str, name: str, number: int) -> Response:
    pr = pull_for(owner, name, number)
    repo_for(owner, name, write=True)
    gh = github()
    comment = gh.add_issue_comment(pr, str(body().get("body") or ""), gh.bot_login)
    return json_response(gh.shapes.issue_comment(comment), 201)


@blueprint.route("/repos/<owner>/<name>/issues/comments/<int:comment_id>", methods=["GET", "PATCH"])
def issue_comment(owner: str, name: str, comment_id: int) -> Response:
    comment = issue_comment_for(owner, name, comment_id)
    gh = github()
    if request.method == "PATCH":
        repo_for(owner, name, write=True)
        if comment.author != gh.bot_login:
            raise StateError(403, "Resource not accessible by integration")
        gh.edit_issue_comment(comment, str(body().get("body") or ""), gh.bot_login)
    return json_response(gh.shapes.issue_comment(comment))


@blueprint.post("/repos/<owner>/<name>/issues/comments/<int:comment_id>/reactions")
def issue_comment_reactions(owner: str, name: str, comment_id: int) -> Response:
    issue_comment_for(owner, name, comment_id)
    return reactions("issue_comment", owner, name, comment_id)


@blueprint.post("/repos/<owner>/<name>/pulls/comments/<int:comment_id>/reactions")
def review_comment_reactions(owner: str, name: str, comment_id: int) -> Response:
    if comment_id not in github().state.review_comments:
        raise StateError(404, "Not Found")
    return reactions("review_comment", owner, name, comment_id)


def reactions(subject: str, owner: str, name: str, comment_id: int) -> Response:
    """Add the App's reaction to a comment (200 when it already reacted so, as GitHub answers)."""
    repo_for(owner, name, write=True)
    gh = github()
    reaction, created = gh.react(subject, comment_id, str(body().get("content", "")), gh.bot_login)
    return json_response(gh.shapes.reaction(reaction), 201 if created else 200)


def issue_comment_for(owner: str, name: str, comment_id: int) -> IssueComment:
    """Return an issue comment of a readable repository."""
    repo = repo_for(owner, name)
    comment = github().state.issue_comments.get(comment_id)
    if comment is None or comment.repo != repo.full_name:
        raise StateError(404, "Not Found")
    return comment
