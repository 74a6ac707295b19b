"""The GitHub adapter with the real PyGithub over HTTP against the local GitHub sandbox."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from bot.adapters.github import Installation, diff_from_files
from bot.adapters.github_app import GitHubApp
from bot.adapters.github_port import BranchMoved, ChangedFile, Committed, GitHubError, Unreadable
from bot.core import markers
from bot.core.types import ReviewComment
from sandbox.github import GitHubSandbox, Submodule, Symlink
from sandbox.github.auth import generate_private_key_pem

REPO = "octo/demo"
BASE_FILES = {"app.py": "def add(a, b):\n    return a - b\n", "README.md": "# demo\n"}
HEAD_FILES = {"app.py": "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a + b\n"}


@dataclass
class World:
    """A sandbox with one installation, one repository and one same-repo pull request."""

    sandbox: GitHubSandbox
    app: GitHubApp
    installation_id: int
    number: int

    @property
    def gh(self) -> Installation:
        return self.app.installation(self.installation_id)

    def calls(self, method: str, fragment: str) -> list[int]:
        """Return the statuses of logged requests whose method and path match."""
        return [r.status for r in self.sandbox.request_log if r.method == method and fragment in r.path]


@pytest.fixture(scope="module")
def app_key() -> str:
    """One App key for the module: generating RSA keys is the slow part of a sandbox."""
    return generate_private_key_pem()


@pytest.fixture()
def world(app_key: str) -> Iterator[World]:
    with GitHubSandbox(private_key_pem=app_key) as sandbox:
        installation_id = sandbox.create_installation("octo")
        sandbox.create_repo(REPO, dict(BASE_FILES), installation_id=installation_id)
        sandbox.add_collaborator(REPO, "writer", "write")
        number = sandbox.open_pull_request(
            REPO, "feature", dict(HEAD_FILES), title="Add sub", author="writer"
        )
        app = GitHubApp(sandbox.app_id, sandbox.private_key_pem, base_url=sandbox.url)
        yield World(sandbox, app, installation_id, number)
        app.close()


def test_pull_reports_head_base_and_fork_status(world: World) -> None:
    pull = world.gh.pull(REPO, world.number)
    assert pull.head_sha == world.sandbox.head_sha(REPO, world.number)
    assert pull.head_ref == "feature"
    assert pull.base_ref == "main"
    assert not pull.is_fork
    assert pull.title == "Add sub"
    assert pull.author == "writer"


def test_one_token_mint_serves_many_calls_and_one_pool_is_reused(world: World) -> None:
    first = world.gh
    for _ in range(5):
        world.gh.pull(REPO, world.number)
    assert world.app.installation(world.installation_id) is first
    assert len(world.calls("POST", "/access_tokens")) == 1


def test_an_expiring_token_is_minted_again(world: World) -> None:
    # PyGithub re-mints 20 s before expiry, so a 21.5 s token is good for about 1.5 s.
    world.sandbox.token_ttl = 21.5
    world.gh.pull(REPO, world.number)
    world.gh.pull(REPO, world.number)
    assert len(world.calls("POST", "/access_tokens")) == 1
    time.sleep(2.0)
    world.gh.pull(REPO, world.number)
    assert len(world.calls("POST", "/access_tokens")) == 2


def test_a_secondary_rate_limit_is_retried_after_retry_after(world: World) -> None:
    world.gh.pull(REPO, world.number)  # mint first, so only the PR call is limited
    world.sandbox.faults.secondary_rate_limit("GET", r"/pulls/\d+$", retry_after=1)
    started = time.monotonic()
    pull = world.gh.pull(REPO, world.number)
    assert time.monotonic() - started >= 1.0
    assert pull.number == world.number
    assert world.calls("GET", f"/pulls/{world.number}")[-2:] == [403, 200]


def test_server_errors_are_retried_for_patch_too(world: World) -> None:
    posted = world.gh.comment(REPO, world.number, "hello")
    world.sandbox.faults.inject(502, "PATCH", r"/issues/comments/", times=1)
    edited = world.gh.edit_comment(REPO, posted.id, "hello again")
    assert edited.body == "hello again"
    assert world.calls("PATCH", "/issues/comments/") == [502, 200]


def test_a_5xx_to_a_post_is_not_resent_blindly(world: World) -> None:
    world.gh.pull(REPO, world.number)
    world.sandbox.faults.inject(502, "POST", r"/issues/\d+/comments$", times=1)
    with pytest.raises(GitHubError) as caught:
        world.gh.comment(REPO, world.number, "plain")
    assert caught.value.status == 502
    assert world.calls("POST", "/comments") == [502]


def test_upsert_after_a_5xx_posts_exactly_once(world: World) -> None:
    world.gh.pull(REPO, world.number)
    world.sandbox.faults.inject(502, "POST", r"/issues/\d+/comments$", times=1)
    posted = world.gh.upsert_comment(REPO, world.number, "fix-9", "done")
    ours = [
        c
        for c in world.sandbox.issue_comments(REPO, world.number)
        if markers.tag("reply", "fix-9") in c["body"]
    ]
    assert [c["id"] for c in ours] == [posted.id]
    assert world.calls("POST", "/comments") == [502, 201]


def test_keyed_review_and_check_run_survive_a_5xx_without_doubling(world: World) -> None:
    head = world.sandbox.head_sha(REPO, world.number)
    world.sandbox.faults.inject(502, "POST", r"/reviews$", times=1)
    world.sandbox.faults.inject(502, "POST", r"/check-runs$", times=1)
    review_id = world.gh.review(REPO, world.number, commit_sha=head, body="Spark review", key="review-1")
    run_id = world.gh.create_check_run(REPO, head, "Spark", external_id="job-1")
    assert [r["id"] for r in world.sandbox.reviews(REPO, world.number)] == [review_id]
    assert [r["id"] for r in world.sandbox.check_runs(REPO, head)] == [run_id]


def test_pull_diff_is_the_raw_diff(world: World) -> None:
    diff = world.gh.pull_diff(REPO, world.number)
    assert diff.source == "raw"
    assert "+def sub(a, b):" in diff.text
    assert "diff --git a/app.py b/app.py" in diff.text


def test_pull_diff_falls_back_to_file_patches_on_406(world: World) -> None:
    world.gh.pull(REPO, world.number)
    world.sandbox.faults.inject(
        406, "GET", rf"/pulls/{world.number}$", times=1, body={"message": "too_large"}
    )
    diff = world.gh.pull_diff(REPO, world.number)
    assert diff.source == "files"
    assert "+def sub(a, b):" in diff.text
    assert diff.text.startswith("diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n@@")


def test_diff_from_files_lists_files_without_a_patch() -> None:
    diff = diff_from_files(
        [
            ChangedFile("new.py", "added", None, "@@ -0,0 +1 @@\n+x = 1", 1, 0),
            ChangedFile("logo.png", "modified", None, None, 0, 0),
        ]
    )
    assert "--- /dev/null\n+++ b/new.py\n" in diff.text
    assert diff.missing == ("logo.png",)


def test_file_text_at_a_ref(world: World) -> None:
    head = world.sandbox.head_sha(REPO, world.number)
    assert world.gh.file_text(REPO, "app.py", head) == HEAD_FILES["app.py"]
    assert world.gh.file_text(REPO, "app.py", "main") == BASE_FILES["app.py"]
    assert world.gh.file_text(REPO, "missing.py", head) is None


def test_file_text_reads_a_file_over_1_mb_through_the_blob_api_only_when_allowed(world: World) -> None:
    big = "x = 1\n" * 200_000  # 1.2 MB: the contents API sends it with `encoding: "none"` and no content
    world.sandbox.push(REPO, "main", {"big.py": big})
    assert world.gh.file_text(REPO, "big.py", "main") == big
    assert world.calls("GET", "/git/blobs/") == [200]
    with pytest.raises(Unreadable, match="too large"):
        world.gh.file_text(REPO, "big.py", "main", max_bytes=1_000_000)
    assert world.calls("GET", "/git/blobs/") == [200]  # refused on its size, not fetched
    world.sandbox.push(REPO, "main", {"empty.py": ""})
    assert world.gh.file_text(REPO, "empty.py", "main") == ""


def test_file_text_refuses_what_is_not_a_regular_file(world: World) -> None:
    world.sandbox.push(
        REPO,
        "main",
        {"link.py": Symlink("app.py"), "lib": Submodule("https://example.com/lib.git", "b" * 40)},
    )
    with pytest.raises(Unreadable, match=r"symbolic link to `app\.py`"):
        world.gh.file_text(REPO, "link.py", "main")
    with pytest.raises(Unreadable, match="submodule"):
        world.gh.file_text(REPO, "lib", "main")
    world.sandbox.push(REPO, "main", {"pkg/a.py": "a = 1\n"})
    with pytest.raises(Unreadable, match="directory"):
        world.gh.file_text(REPO, "pkg", "main")


@pytest.mark.parametrize("path", ["a #1.py", "why?.py", "50%41.py", "caf\u00e9 au lait.py"])
def test_file_text_encodes_the_path(world: World, path: str) -> None:
    world.sandbox.push(REPO, "main", {path: "ok = True\n"})
    assert world.gh.file_text(REPO, path, "main") == "ok = True\n"


def test_collaborator_permission(world: World) -> None:
    assert world.gh.permission(REPO, "writer") == "write"
    assert world.gh.permission(REPO, "stranger") in ("none", "read")


def test_reactions_on_issue_and_review_comments(world: World) -> None:
    comment_id = world.sandbox.comment(REPO, world.number, "/spark fix it", author="writer")
    world.gh.react(REPO, comment_id, "eyes")
    review_comment_id = world.sandbox.review_comment(
        REPO, world.number, "app.py", 6, "/spark fix", author="writer"
    )
    world.gh.react(REPO, review_comment_id, "rocket", review_comment=True)
    bot = world.sandbox.bot_login
    assert ("eyes", bot) in world.sandbox.reactions(comment_id)
    assert ("rocket", bot) in world.sandbox.reactions(review_comment_id)


def test_upsert_comment_posts_once_and_edits_after(world: World) -> None:
    first = world.gh.upsert_comment(REPO, world.number, "fix-123", "working on it")
    again = world.gh.upsert_comment(REPO, world.number, "fix-123", "done")
    same = world.gh.upsert_comment(REPO, world.number, "fix-123", "done")
    ours = [
        c
        for c in world.sandbox.issue_comments(REPO, world.number)
        if markers.tag("reply", "fix-123") in c["body"]
    ]
    assert len(ours) == 1
    assert first.id == again.id == same.id
    assert ours[0]["body"].startswith("done")
    assert world.gh.find_comment(REPO, world.number, "other") is None


def test_review_with_a_suggestion_and_a_thread_reply(world: World) -> None:
    head = world.sandbox.head_sha(REPO, world.number)
    suggestion = ReviewComment(path="app.py", line=6, start_line=5, body="```suggestion\nx\n```")
    review_id = world.gh.review(
        REPO, world.number, commit_sha=head, body="Spark review", comments=[suggestion]
    )
    reviews = world.sandbox.reviews(REPO, world.number)
    assert [r["id"] for r in reviews] == [review_id]
    (comment,) = reviews[0]["comments"]
    assert (comment["line"], comment["start_line"], comment["side"]) == (6, 5, "RIGHT")
    reply = world.gh.reply_to_review_comment(REPO, world.number, comment["id"], "fixed")
    assert reply.body == "fixed"
    threads = world.gh.review_threads(REPO, world.number)
    assert len(threads) == 1 and threads[0].first_comment_id == comment["id"]
    assert threads[0].path == "app.py" and not threads[0].is_resolved
    assert world.gh.resolve_thread(threads[0].id) is True
    assert world.gh.review_threads(REPO, world.number)[0].is_resolved


def test_check_run_create_and_complete(world: World) -> None:
    head = world.sandbox.head_sha(REPO, world.number)
    run_id = world.gh.create_check_run(REPO, head, "Spark")
    world.gh.update_check_run(
        REPO, run_id, status="completed", conclusion="success", output={"title": "ok", "summary": "fine"}
    )
    (run,) = world.sandbox.check_runs(REPO, head)
    assert (run["id"], run["status"], run["conclusion"]) == (run_id, "completed", "success")


def test_commit_on_branch_commits_then_reports_a_moved_branch(world: World) -> None:
    head = world.sandbox.head_sha(REPO, world.number)
    fixed = HEAD_FILES["app.py"].replace("return a - b", "return a + b", 1)
    result = world.gh.commit_on_branch(
        REPO, "feature", expected_head=head, headline="Fix add", additions={"app.py": fixed.encode()}
    )
    assert isinstance(result, Committed)
    assert world.sandbox.head_sha(REPO, world.number) == result.oid
    assert world.sandbox.file_at(REPO, "feature", "app.py") == fixed
    assert world.sandbox.commits(REPO, "feature")[0]["verified"] is True
    stale = world.gh.commit_on_branch(
        REPO, "feature", expected_head=head, headline="Again", additions={"app.py": b"x = 1\n"}
    )
    assert isinstance(stale, BranchMoved)
    assert stale.expected_head == head
    assert world.sandbox.file_at(REPO, "feature", "app.py") == fixed


def test_app_deliveries_and_redelivery(world: World) -> None:
    world.sandbox.wait_for_deliveries()
    deliveries = world.app.deliveries()
    assert deliveries, "opening the pull request fired at least one delivery"
    assert any(d.event == "pull_request" for d in deliveries)
    before = len(world.sandbox.deliveries)
    world.app.redeliver(deliveries[0].id)
    world.sandbox.wait_for_deliveries()
    assert len(world.sandbox.deliveries) == before + 1
    assert world.app.app_slug() == world.sandbox.app_slug
