"""Pull requests through the real PyGithub client: files, raw diffs, review placement rules, suggestions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import pytest
from github import Github, GithubException
from github.ContentFile import ContentFile
from github.PullRequest import PullRequest, ReviewComment

from sandbox.github import GitHubSandbox
from sandbox.github.auth import generate_private_key_pem

KEY = generate_private_key_pem()
BASE = "".join(f"line {i}\n" for i in range(1, 41))
# Lines 5 and 30 change and line 41 is added: three hunks (RIGHT lines 2-8, 27-33 and 38-41).
HEAD = BASE.replace("line 5\n", "line five\n").replace("line 30\n", "line thirty\n") + "line 41\n"
DIFF_ACCEPT = {"Accept": "application/vnd.github.diff"}


@pytest.fixture()
def gh() -> Iterator[GitHubSandbox]:
    """A sandbox with acme/app installed and PR #1 changing two distant lines of big.py."""
    with GitHubSandbox(private_key_pem=KEY) as sandbox:
        installation = sandbox.create_installation("acme")
        sandbox.create_repo("acme/app", {"big.py": BASE, "other.py": "a = 1\n"}, installation)
        sandbox.add_collaborator("acme/app", "writer", "write")
        sandbox.open_pull_request(
            "acme/app", "feature", {"big.py": HEAD}, title="Change lines", author="writer"
        )
        yield sandbox


@pytest.fixture()
def client(gh: GitHubSandbox) -> Github:
    """PyGithub authenticated as the installation."""
    return gh.client(next(iter(gh.state.installations)))


@pytest.fixture()
def pr(client: Github) -> PullRequest:
    """PR #1 as PyGithub sees it."""
    return client.get_repo("acme/app").get_pull(1)


def suggestion(line: int, body: str = "fixed\n", start_line: int | None = None) -> ReviewComment:
    comment: dict[str, object] = {
        "path": "big.py",
        "line": line,
        "side": "RIGHT",
        "body": f"```suggestion\n{body}```",
    }
    if start_line is not None:
        comment["start_line"], comment["start_side"] = start_line, "RIGHT"
    return cast(ReviewComment, comment)


def test_pull_request_fields_and_files(gh: GitHubSandbox, pr: PullRequest) -> None:
    assert pr.title == "Change lines"
    assert pr.head.ref == "feature"
    assert pr.head.sha == gh.head_sha("acme/app", 1)
    assert pr.base.ref == "main"
    assert pr.user.login == "writer"
    assert pr.changed_files == 1
    files = list(pr.get_files())
    assert [f.filename for f in files] == ["big.py"]
    patch = files[0].patch
    # git's hunk heading: the nearest line above the hunk that starts with a letter.
    assert patch.startswith("@@ -2,7 +2,7 @@ line 1\n line 2\n")
    assert "-line 5\n+line five" in patch
    assert "\n@@ -27,7 +27,7 @@ line 26\n" in patch
    assert "\n@@ -38,3 +38,4 @@ line 37\n" in patch
    assert patch.endswith("+line 41")
    assert (files[0].additions, files[0].deletions) == (3, 2)


def test_raw_diff_is_served_for_the_diff_media_types(client: Github, pr: PullRequest) -> None:
    for accept in ("application/vnd.github.diff", "application/vnd.github.v3.diff"):
        _, data = client.requester.requestJsonAndCheck("GET", pr.url, headers={"Accept": accept})
        text = data["data"]
        assert text.startswith("diff --git a/big.py b/big.py\n")
        assert "--- a/big.py\n+++ b/big.py\n@@ -2,7 +2,7 @@" in text


def test_raw_diff_over_300_files_is_406(gh: GitHubSandbox, client: Github) -> None:
    files: dict[str, str | bytes | None] = {f"gen/f{i}.txt": f"{i}\n" for i in range(301)}
    number = gh.open_pull_request("acme/app", "huge", files)
    url = client.get_repo("acme/app").get_pull(number).url
    with pytest.raises(GithubException) as caught:
        client.requester.requestJsonAndCheck("GET", url, headers=DIFF_ACCEPT)
    assert caught.value.status == 406
    assert "maximum number of files (300)" in caught.value.data["message"]
    assert caught.value.data["errors"] == [{"resource": "PullRequest", "field": "diff", "code": "too_large"}]
    listed = list(client.get_repo("acme/app").get_pull(number).get_files())
    assert len(listed) == 301  # the file list still works, page by page


def test_raw_diff_over_20000_lines_is_406(gh: GitHubSandbox, client: Github) -> None:
    number = gh.open_pull_request("acme/app", "long", {"long.txt": "x\n" * 20_001})
    url = client.get_repo("acme/app").get_pull(number).url
    with pytest.raises(GithubException) as caught:
        client.requester.requestJsonAndCheck("GET", url, headers=DIFF_ACCEPT)
    assert caught.value.status == 406
    assert "maximum number of lines (20000)" in caught.value.data["message"]


def test_review_with_valid_suggestions(gh: GitHubSandbox, pr: PullRequest) -> None:
    review = pr.create_review(
        body="two fixes", event="COMMENT", comments=[suggestion(5), suggestion(31, start_line=29)]
    )
    assert review.state == "COMMENTED"
    stored = gh.reviews("acme/app", 1)
    assert [c["line"] for c in stored[0]["comments"]] == [5, 31]
    assert stored[0]["comments"][1]["start_line"] == 29
    assert stored[0]["comments"][0]["diff_hunk"].endswith("+line five")
    listed = list(pr.get_review_comments())
    assert [c.path for c in listed] == ["big.py", "big.py"]


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        (suggestion(20), "Pull request review thread line must be part of the diff"),
        ({**suggestion(41), "side": "LEFT"}, "Pull request review thread line must be part of the diff"),
        (suggestion(30, start_line=5), "start line must be part of the same hunk as the line"),
        (suggestion(5, start_line=5), "start line must precede the end line"),
        ({**suggestion(5), "path": "missing.py"}, "Path could not be resolved"),
    ],
)
def test_misplaced_comment_rejects_the_whole_review(
    gh: GitHubSandbox, pr: PullRequest, comment: dict[str, object], message: str
) -> None:
    with pytest.raises(GithubException) as caught:
        pr.create_review(body="x", event="COMMENT", comments=[suggestion(5), cast(ReviewComment, comment)])
    assert caught.value.status == 422
    assert caught.value.data["message"] == "Unprocessable Entity"
    assert any(message in error for error in caught.value.data["errors"])
    assert gh.reviews("acme/app", 1) == []  # the valid first comment was not kept either
    assert gh.review_comments("acme/app", 1) == []


def test_a_review_comment_outside_the_diff_is_422(gh: GitHubSandbox, pr: PullRequest) -> None:
    commit = pr.base.repo.get_commit(pr.head.sha)
    outside: ReviewComment = {"path": "big.py", "line": 20, "side": "RIGHT", "body": "nope"}
    with pytest.raises(GithubException) as caught:
        pr.create_review(commit, "", "COMMENT", [outside])
    assert caught.value.status == 422
    assert caught.value.data["errors"] == ["Pull request review thread line must be part of the diff"]
    inside: ReviewComment = {"path": "big.py", "line": 41, "side": "RIGHT", "body": "yes"}
    pr.create_review(commit, "", "COMMENT", [inside])
    assert [c.line for c in pr.get_review_comments()] == [41]


def test_replies_and_reactions(gh: GitHubSandbox, pr: PullRequest) -> None:
    root_id = gh.review_comment("acme/app", 1, "big.py", 5, "/spark fix this", author="writer")
    reply = pr.create_review_comment_reply(root_id, "on it")
    assert reply.in_reply_to_id == root_id
    with pytest.raises(GithubException) as caught:
        pr.create_review_comment_reply(reply.id, "nested")
    assert caught.value.status == 422
    root = next(c for c in pr.get_review_comments() if c.id == root_id)
    root.create_reaction("eyes")
    comment = pr.create_issue_comment("done")
    comment.create_reaction("rocket")
    comment.edit("done, really")
    assert gh.reactions(root_id) == [("eyes", gh.bot_login)]
    assert gh.reactions(comment.id) == [("rocket", gh.bot_login)]
    assert [c["body"] for c in gh.issue_comments("acme/app", 1)] == ["done, really"]
    assert gh.threads("acme/app", 1)[0]["comment_ids"] == [root_id, reply.id]


def test_commit_suggestion_replaces_exactly_the_commented_lines(gh: GitHubSandbox, pr: PullRequest) -> None:
    pr.create_review(body="", event="COMMENT", comments=[suggestion(31, "thirty\nthirty-one\nextra\n", 29)])
    comment_id = gh.review_comments("acme/app", 1)[0]["id"]
    before = gh.head_sha("acme/app", 1)
    sha = gh.apply_suggestion(comment_id, author="writer")
    lines = (gh.file_at("acme/app", sha, "big.py") or "").splitlines()
    expected = HEAD.splitlines()
    expected[28:31] = ["thirty", "thirty-one", "extra"]
    assert lines == expected
    assert gh.commits("acme/app", "feature")[0]["parents"] == [before]
    with pytest.raises(Exception, match="Outdated"):
        gh.apply_suggestion(comment_id)


def test_permission_compare_commit_and_contents(gh: GitHubSandbox, client: Github, pr: PullRequest) -> None:
    repo = client.get_repo("acme/app")
    assert repo.get_collaborator_permission("writer") == "write"
    assert repo.get_collaborator_permission("stranger") == "read"
    assert repo.get_collaborator_permission("acme") == "admin"
    comparison = repo.compare("main", "feature")
    assert comparison.ahead_by == 1
    assert comparison.status == "ahead"
    assert [f.filename for f in comparison.files] == ["big.py"]
    commit = repo.get_commit(pr.head.sha)
    assert commit.commit.message == "Change lines"
    assert cast(ContentFile, repo.get_contents("big.py", ref=pr.head.sha)).decoded_content.decode() == HEAD
    assert cast(ContentFile, repo.get_contents("big.py")).decoded_content.decode() == BASE


def test_check_runs_and_requested_action(gh: GitHubSandbox, client: Github, pr: PullRequest) -> None:
    repo = client.get_repo("acme/app")
    run = repo.create_check_run(name="Spark", head_sha=pr.head.sha, status="in_progress")
    run.edit(
        conclusion="neutral",
        output={"title": "2 findings", "summary": "..."},
        actions=[{"label": "Apply safe fixes", "description": "Commit them", "identifier": "apply"}],
    )
    runs = list(repo.get_commit(pr.head.sha).get_check_runs())
    assert [(r.name, r.status, r.conclusion) for r in runs] == [("Spark", "completed", "neutral")]
    gh.request_check_run_action(run.id, "apply", author="writer")
    event = gh.wait_for_deliveries()[-1]
    assert (event.event, event.action) == ("check_run", "requested_action")
    assert b'"identifier": "apply"' in event.body


def test_vanished_pull_request_is_404(gh: GitHubSandbox, client: Github) -> None:
    gh.faults.inject(404, "GET", r"^/repos/acme/app/pulls/1$", body={"message": "Not Found"})
    with pytest.raises(GithubException) as caught:
        client.get_repo("acme/app").get_pull(1)
    assert caught.value.status == 404


def test_pending_review_suggestions_cannot_be_applied(gh: GitHubSandbox, pr: PullRequest) -> None:
    review = pr.create_review(body="draft", comments=[suggestion(5)])  # no event: GitHub keeps it PENDING
    assert review.state == "PENDING"
    comment_id = gh.review_comments("acme/app", 1)[0]["id"]
    with pytest.raises(Exception, match="pending reviews"):
        gh.apply_suggestion(comment_id)


def test_review_on_a_commit_outside_the_pull_request_is_422(gh: GitHubSandbox, client: Github) -> None:
    pr = client.get_repo("acme/app").get_pull(1)
    elsewhere = client.get_repo("acme/app").get_commit(gh.push("acme/app", "other", {"x.py": "1\n"}))
    with pytest.raises(GithubException) as caught:
        pr.create_review(commit=elsewhere, body="x", event="COMMENT")
    assert caught.value.status == 422
