"""The adapter against GitHub's rate limits and lost answers (real PyGithub over HTTP, the strict sandbox)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import redis

from bot import keys
from bot.adapters.github import Installation
from bot.adapters.github_app import GitHubApp
from bot.adapters.github_port import GitHubError, RateLimited
from bot.adapters.ratelimit import WriteBudget, WriteLimits, rate_limit_wait
from bot.core import markers
from sandbox.github import GitHubSandbox
from sandbox.github.auth import generate_private_key_pem
from workers.limits import SharedWriteBudget

REPO = "octo/demo"
COMMENTS = r"^/repos/octo/demo/issues/1/comments$"
KEY = generate_private_key_pem()


@dataclass
class World:
    """A sandbox with one installation, one repository and PR #1, and the adapter pointed at it."""

    sandbox: GitHubSandbox
    app: GitHubApp
    installation_id: int

    @property
    def gh(self) -> Installation:
        return self.app.installation(self.installation_id)

    def comments(self) -> list[str]:
        return [c["body"] for c in self.sandbox.issue_comments(REPO, 1)]


def make_world(limits: WriteLimits) -> Iterator[World]:
    with GitHubSandbox(private_key_pem=KEY) as sandbox:
        installation_id = sandbox.create_installation("octo")
        sandbox.create_repo(REPO, {"app.py": "a = 1\n"}, installation_id=installation_id)
        sandbox.open_pull_request(REPO, "feature", {"app.py": "a = 2\n"}, author="writer")
        app = GitHubApp(sandbox.app_id, sandbox.private_key_pem, base_url=sandbox.url, limits=limits)
        yield World(sandbox, app, installation_id)
        app.close()


@pytest.fixture()
def world() -> Iterator[World]:
    """Short waits, so a test sees in place what production waits a minute for."""
    yield from make_world(WriteLimits(max_inline_wait=2.0, secondary_wait=0.3))


# --- the rules as a pure function ------------------------------------------------------------------------


# https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit
def test_rate_limit_wait_follows_githubs_order() -> None:
    def wait(status: int, headers: dict[str, str], message: str = "") -> float | None:
        return rate_limit_wait(status, headers, message, now=1000.0, secondary_wait=60.0)

    assert wait(429, {"Retry-After": "7"}) == 7.0
    assert wait(403, {"retry-after": "3", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "2000"}) == 3.0
    assert wait(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1030"}, "API rate limit") == 31.0
    assert wait(429, {}) == 60.0  # no time named: at least a minute
    assert wait(403, {}, "You have exceeded a secondary rate limit.") == 60.0
    assert wait(403, {}, "Resource not accessible by integration") is None  # a refusal, not a limit
    assert wait(404, {"Retry-After": "1"}) is None


def test_write_budget_counts_the_minute_and_the_hour() -> None:
    budget = WriteBudget(WriteLimits(per_minute=2, per_hour=3))
    assert budget.reserve(0.0) == 0 and budget.reserve(1.0) == 0
    assert budget.reserve(2.0) == pytest.approx(58.0)  # the minute is full until the first write ages out
    assert budget.reserve(61.0) == 0
    assert budget.reserve(130.0) == pytest.approx(3470.0)  # three in the hour: wait for the first to age out


# --- bug 5: secondary and primary limits ----------------------------------------------------------------


def test_a_429_without_retry_after_is_waited_out_then_sent_once(world: World) -> None:
    world.sandbox.faults.inject(429, "POST", COMMENTS, body={"message": "Too many requests"})
    started = time.monotonic()
    world.gh.comment(REPO, 1, "hello")
    assert time.monotonic() - started >= 0.3
    assert world.comments() == ["hello"]


def test_a_long_secondary_wait_defers_instead_of_sleeping(world: World) -> None:
    world.app.limits = world.gh.limits = WriteLimits(max_inline_wait=2.0, secondary_wait=60.0)
    world.sandbox.faults.content.status = 403
    world.sandbox.faults.content.retry_after = None
    world.sandbox.faults.content.per_minute = 1
    world.gh.comment(REPO, 1, "first")
    started = time.monotonic()
    with pytest.raises(RateLimited) as caught:
        world.gh.comment(REPO, 1, "second")
    assert time.monotonic() - started < 1.0
    assert caught.value.retry_after == 60.0 and caught.value.status == 403
    assert world.comments() == ["first"]


def test_retry_after_longer_than_a_job_should_sleep_is_raised_with_its_wait(world: World) -> None:
    world.sandbox.faults.content.status = 429
    world.sandbox.faults.content.retry_after = 120
    world.sandbox.faults.content.per_hour = 1
    world.gh.comment(REPO, 1, "first")
    with pytest.raises(RateLimited) as caught:
        world.gh.comment(REPO, 1, "second")
    assert caught.value.retry_after == 120.0 and caught.value.status == 429


def test_the_primary_limit_waits_for_its_reset(world: World) -> None:
    used = len(world.sandbox.request_log)
    world.sandbox.faults.rate_limit = used + 2  # the token mint is the App's, not the installation's
    world.gh.pull(REPO, 1)
    with pytest.raises(RateLimited) as caught:
        for _ in range(5):
            world.gh.pull(REPO, 1)
    # The sandbox's window resets an hour after it started: far beyond what a job sleeps.
    assert 3000 < caught.value.retry_after <= 3601 + 1


def test_writes_go_one_at_a_time_even_from_many_threads(world: World) -> None:
    world.sandbox.faults.latency = 0.02
    threads = [threading.Thread(target=world.gh.comment, args=(REPO, 1, f"c{n}")) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    posts = sorted(
        (r.started, r.started + r.duration)
        for r in world.sandbox.request_log
        if r.method == "POST" and r.path.endswith("/comments")
    )
    assert len(posts) == 8
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(posts))


def test_spark_keeps_its_own_write_budget_before_github_refuses() -> None:
    for world in make_world(WriteLimits(per_minute=2, max_inline_wait=0.0)):
        world.gh.comment(REPO, 1, "one")
        world.gh.comment(REPO, 1, "two")
        before = len(world.sandbox.request_log)
        with pytest.raises(RateLimited):
            world.gh.comment(REPO, 1, "three")
        assert len(world.sandbox.request_log) == before  # never sent


# --- bug 6: a write whose answer was lost is looked for, not resent blindly ----------------------------


def test_a_comment_whose_answer_was_lost_is_not_posted_twice(world: World) -> None:
    world.sandbox.faults.lose_answer("POST", COMMENTS)
    world.gh.upsert_comment(REPO, 1, "reply-1", "Done.")
    assert world.comments() == [markers.append("Done.", "reply", "reply-1")]


def test_a_plain_post_whose_answer_was_lost_says_so(world: World) -> None:
    world.sandbox.faults.lose_answer("POST", COMMENTS)
    with pytest.raises(GitHubError) as caught:
        world.gh.comment(REPO, 1, "once")
    assert caught.value.unanswered and caught.value.maybe_done
    assert world.comments() == ["once"]


def test_a_review_whose_answer_was_lost_is_not_posted_twice(world: World) -> None:
    world.sandbox.faults.lose_answer("POST", r"/pulls/1/reviews$")
    head = world.sandbox.head_sha(REPO, 1)
    review_id = world.gh.review(REPO, 1, commit_sha=head, body="Looks fine.", key="review-1")
    [review] = world.sandbox.reviews(REPO, 1)
    assert review["id"] == review_id


def test_a_check_run_whose_answer_was_lost_is_created_once(world: World) -> None:
    world.sandbox.faults.lose_answer("POST", r"/check-runs$")
    head = world.sandbox.head_sha(REPO, 1)
    run_id = world.gh.create_check_run(REPO, head, "Spark", external_id="job-1")
    [run] = world.sandbox.check_runs(REPO)
    assert run["id"] == run_id


def test_a_read_whose_answer_was_lost_is_simply_sent_again(world: World) -> None:
    world.sandbox.faults.lose_answer("GET", r"/pulls/1$")
    assert world.gh.pull(REPO, 1).number == 1
    # A GraphQL query is a read too, though it is a POST: sent again once.
    world.sandbox.faults.lose_answer("POST", r"^/graphql$")
    assert world.gh.review_threads(REPO, 1) == []


def test_graphql_rate_limited_is_raised_with_the_reset_wait(world: World) -> None:
    world.gh.pull(REPO, 1)
    used = world.sandbox.request_log
    world.sandbox.faults.rate_limit = sum(1 for r in used if "/access_tokens" not in r.path)
    with pytest.raises(RateLimited) as caught:
        world.gh.review_threads(REPO, 1)
    assert caught.value.retry_after > 3000


# --- one budget per installation, shared by every worker process ----------------------------------------


def test_shared_write_budget_counts_the_minute_and_the_hour(redis_conn: redis.Redis) -> None:
    budget = SharedWriteBudget(redis_conn, 7, WriteLimits(per_minute=2, per_hour=3))
    assert budget.reserve(0.5) == 0 and budget.reserve(1.0) == 0
    assert budget.reserve(2.0) == pytest.approx(58.5)  # the minute is full until the first write ages out
    assert budget.reserve(61.0) == 0
    assert budget.reserve(130.0) == pytest.approx(3470.5)  # three in the hour: wait for the first to age out
    key = keys.INSTALLATION_WRITES.format(7)
    assert redis_conn.zcard(key) == 3 and 0 < redis_conn.ttl(key) <= keys.INSTALLATION_WRITES.seconds


def test_two_worker_processes_spend_one_installations_write_budget(redis_conn: redis.Redis) -> None:
    """GitHub counts an installation's writes wherever they come from: so does Spark."""
    limits = WriteLimits(per_minute=2, max_inline_wait=0.5)
    with GitHubSandbox(private_key_pem=KEY) as sandbox:
        installation_id = sandbox.create_installation("octo")
        sandbox.create_repo(REPO, {"app.py": "a = 1\n"}, installation_id=installation_id)
        sandbox.open_pull_request(REPO, "feature", {"app.py": "a = 2\n"}, author="writer")

        def shared(installation: int, limits: WriteLimits) -> SharedWriteBudget:
            return SharedWriteBudget(redis_conn, installation, limits)

        # Two App handles stand for two worker processes (each builds its own).
        first, second = (
            GitHubApp(
                sandbox.app_id,
                sandbox.private_key_pem,
                base_url=sandbox.url,
                limits=limits,
                budget_for=shared,
            )
            for _ in range(2)
        )
        first.installation(installation_id).comment(REPO, 1, "one")
        second.installation(installation_id).comment(REPO, 1, "two")
        with pytest.raises(RateLimited) as caught:
            first.installation(installation_id).comment(REPO, 1, "three")
        assert caught.value.status == 429 and caught.value.retry_after > 50
        assert [c["body"] for c in sandbox.issue_comments(REPO, 1)] == ["one", "two"]
        first.close()
        second.close()
