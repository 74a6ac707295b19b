"""Pull requests: the pull, its diff (with GitHub's size limits), files, reviews, review comments, replies."""

from __future__ import annotations

from flask import Blueprint, Response

from sandbox.github.routes.common import body, github, json_response, media_type, page, pull_for, repo_for
from sandbox.github.service import CommentSpec
from sandbox.github.state import FILE_MODE, PullRequest, StateError

blueprint = Blueprint("pulls", __name__)

DIFF_MEDIA = ("application/vnd.github.diff", "application/vnd.github.v3.diff")
# A pull request's whole diff: at most 300 files, 20,000 lines, 1 MB, else 406 (repository-limits page,
# https://docs.github.com/repositories/creating-and-managing-repositories/repository-limits); the per-file
# listing (`GET …/pulls/{n}/files`) stops at 3,000 files (https://docs.github.com/rest/pulls/pulls).
MAX_DIFF_FILES = 300
MAX_DIFF_LINES = 20_000
MAX_DIFF_BYTES = 1024 * 1024
MAX_LISTED_FILES = 3000


@blueprint.get("/repos/<owner>/<name>/pulls/<int:number>")
def get_pull(owner: str, name: str, number: int) -> Response:
    pr = pull_for(owner, name, number)
    if media_type() in DIFF_MEDIA:
        return raw_diff(pr)
    return json_response(github().shapes.pull(pr))


@blueprint.patch("/repos/<owner>/<name>/pulls/<int:number>")
def edit_pull(owner: str, name: str, number: int) -> Response:
    pr = pull_for(owner, name, number)
    gh = github()
    data = body()
    if data.get("state") == "closed" and pr.state == "open":
        gh.close_pull_request(pr, gh.bot_login)
    for key in ("title", "body"):
        if key in data:
            setattr(pr, key, data[key])
    return json_response(gh.shapes.pull(pr))


@blueprint.get("/repos/<owner>/<name>/pulls/<int:number>/files")
def pull_files(owner: str, name: str, number: int) -> Response:
    pr = pull_for(owner, name, number)
    gh = github()
    head = gh.state.head_sha(pr)
    files = gh.state.pr_diff(pr)[:MAX_LISTED_FILES]
    return page(files, lambda f: gh.shapes.file(pr.head_repo, head, f))


@blueprint.get("/repos/<owner>/<name>/pulls/<int:number>/reviews")
def list_reviews(owner: str, name: str, number: int) -> Response:
    pr = pull_for(owner, name, number)
    gh = github()
    reviews = [r for r in gh.state.reviews.values() if (r.repo, r.number) == (pr.repo, pr.number)]
    return page(reviews, gh.shapes.review)


@blueprint.post("/repos/<owner>/<name>/pulls/<int:number>/reviews")
def create_review(owner: str, name: str, number: int) -> Response:
    pr = pull_for(owner, name, number)
    repo_for(owner, name, write=True)
    gh = github()
    data = body()
    specs = [CommentSpec.from_json(c) for c in data.get("comments") or []]
    review = gh.create_review(
        pr,
        str(data.get("body") or ""),
        str(data.get("event") or "PENDING"),
        data.get("commit_id"),
        specs,
        gh.bot_login,
    )
    return json_response(gh.shapes.review(review))


@blueprint.get("/repos/<owner>/<name>/pulls/<int:number>/comments")
def list_review_comments(owner: str, name: str, number: int) -> Response:
    pr = pull_for(owner, name, number)
    gh = github()
    comments = [c for c in gh.state.review_comments.values() if (c.repo, c.number) == (pr.repo, pr.number)]
    return page(comments, gh.shapes.review_comment)


@blueprint.post("/repos/<owner>/<name>/pulls/<int:number>/comments/<int:comment_id>/replies")
def reply(owner: str, name: str, number: int, comment_id: int) -> Response:
    pr = pull_for(owner, name, number)
    repo_for(owner, name, write=True)
    gh = github()
    comment = gh.reply(pr, comment_id, str(body().get("body", "")), gh.bot_login)
    return json_response(gh.shapes.review_comment(comment), 201)


def raw_diff(pr: PullRequest) -> Response:
    """The PR as `git diff` text, or GitHub's 406 when it is too large to render."""
    files = github().state.pr_diff(pr)
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
