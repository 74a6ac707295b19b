"""The automatic review, end to end: the local GitHub and Cerebras, the receiver, real ``spark worker``s.

One stack serves the whole module (worker processes take seconds to start): each test seeds a repository
of its own on the same local GitHub, adds its scripted model replies, and fires its events. Two worker
processes run, as in production, so a ``/spark stop`` or a newer push can be handled while a review runs.
Here is what needs them: bursts of pushes, stops and pushes reaching a running review, commands, a re-run
of an older head's check. The review flow's own stories run in process in tests/flows/test_review.py, with
this module's stories and helpers.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
import yaml

from bot.redis_server import PrivateRedis
from bot.settings import Settings
from sandbox import scenario as scenarios
from sandbox.cerebras import Speed
from sandbox.scenario import Event
from sandbox.stack import Stack, start_stack, wait_for_jobs
from tests.conftest import RedisDb, redis_url
from tests.e2e.conftest import StartStack, assert_no_planted_secret
from tests.stories import (
    BARE_EXCEPT,
    LOADER,
    LOADER_BASE,
    _first_request,
    checks,
    head,
    model_requests,
    quiet,
    reviews,
)
from tests.stories import REVIEW_PLACEHOLDER as PLACEHOLDER
from tests.stories import review_act as act
from tests.stories import review_results as results
from tests.stories import review_story as story
from tests.stories import review_use as use

DEBOUNCE = 0.4


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, redis_server: PrivateRedis) -> Iterator[Stack]:
    """Start one stack for the module: both sandboxes, the receiver, two worker processes, short debounce."""
    url = redis_url(redis_server, RedisDb.E2E_REVIEW)
    redis.Redis.from_url(url).flushdb()
    base = Settings.load({"REDIS_URL": url, "SPARK_REVIEW_DEBOUNCE_SECONDS": str(DEBOUNCE)}, env_file=None)
    data_dir = tmp_path_factory.mktemp("review-e2e")
    started = start_stack(scenarios.parse(PLACEHOLDER), base, data_dir, processes=2)
    yield started
    started.close()
    assert_no_planted_secret(started)


# -- pushes: debounce, incremental review, the findings ledger ----------------------------------------------


def test_a_burst_of_pushes_gets_one_review_of_the_newest_head(stack: Stack) -> None:
    use(stack, quiet("acme/burst", [{"path": "app/config.py", "reply": BARE_EXCEPT}]))
    stack.scene.act(Event("push", {"files": {"app/config.py": LOADER + "\n# one\n"}}))
    stack.scene.act(Event("push", {"files": {"app/config.py": LOADER + "\n# two\n"}}))
    settled = wait_for_jobs(stack, timeout=60)
    outcomes = results(stack, settled)["review"]
    # The older push's job stood down (cancelled in its quiet window, or found its head stale).
    assert sorted(outcomes) == ["posted", "superseded"] or sorted(outcomes) == ["posted", "stale"]
    [review] = reviews(stack)
    assert review["commit_id"] == head(stack)
    assert [r["head_sha"] for r in checks(stack)] == [head(stack)]
    assert len(model_requests(stack, "app/config.py")) == 1


def test_incremental_review_sees_only_changed_files_and_rerun_reviews_all(stack: Stack) -> None:
    replies = [
        {"path": "app/config.py", "reply": BARE_EXCEPT},
        {"path": "app/other.py", "reply": "NO_FINDINGS"},
        {"path": "app/other.py", "reply": "NO_FINDINGS"},
        {"path": "app/config.py", "reply": BARE_EXCEPT},
        {"path": "app/other.py", "reply": "NO_FINDINGS"},
    ]
    use(stack, quiet("acme/incremental", replies, **{"app/other.py": "X = 2\n"}))
    stack.scene.act(Event("push", {"files": {"app/config.py": LOADER + "\n"}}))
    wait_for_jobs(stack, timeout=60)
    assert len(model_requests(stack, "app/config.py")) == 1
    act(stack, "push", files={"app/other.py": "X = 3\n"})
    assert len(model_requests(stack, "app/other.py")) == 2
    assert len(model_requests(stack, "app/config.py")) == 1
    summary = checks(stack)[-1]["output"]["summary"]
    assert "`app/config.py`: skipped: unchanged since the last review" in summary
    # "Re-run" on the check reviews every file again, and still posts nothing twice.
    stack.github.rerequest_check_run(checks(stack)[-1]["id"], author="bob")
    settled = wait_for_jobs(stack, timeout=60)
    assert results(stack, settled)["check_run"] == ["nothing new"]
    assert len(model_requests(stack, "app/config.py")) == 2
    assert len(reviews(stack)) == 1
    # "Re-run" on an older head's check reviews nothing: GitHub attaches no pull request to it, so the job
    # finds its pull request by the run's external_id and sees that a newer head exists.
    old = checks(stack)[0]
    assert old["head_sha"] != head(stack)
    stack.github.rerequest_check_run(old["id"], author="bob")
    settled = wait_for_jobs(stack, timeout=60)
    assert results(stack, settled) == {"check_run": ["stale"]}
    assert len(model_requests(stack, "app/config.py")) == 2


def test_with_the_merge_gate_a_re_run_after_a_resolved_thread_passes_without_a_model_call(
    stack: Stack,
) -> None:
    base = {"app/config.py": LOADER_BASE, ".github/spark.yml": "review:\n  gate: high\n"}
    replies = [{"path": "app/config.py", "reply": BARE_EXCEPT}]
    use(stack, story("acme/gated", base, {"app/config.py": LOADER}, replies))
    act(stack, "open")
    [failed] = checks(stack)
    assert failed["conclusion"] == "failure"
    [review] = reviews(stack)
    [comment] = review["comments"]
    stack.github.resolve_thread(comment["id"], author="bob")
    # "Re-run" is delivered as GitHub delivers it (check_run rerequested) and decided again from memory.
    stack.github.rerequest_check_run(failed["id"], author="bob")
    settled = wait_for_jobs(stack, timeout=60)
    assert results(stack, settled) == {"check_run": ["gate success"]}
    assert len(model_requests(stack, "app/config.py")) == 1
    assert [r["conclusion"] for r in checks(stack)] == ["failure", "success"]


# -- configuration: invalid files reported, drafts ----------------------------------------------------------


def test_one_bad_config_key_is_reported_with_its_line_and_the_rest_applies(stack: Stack) -> None:
    bad = (
        "review:\n  auto: true\n  max_inline_comments: many\n  min_severty: high\n  min_severity: critical\n"
    )
    base = {"app/config.py": LOADER_BASE, ".github/spark.yml": bad}
    use(
        stack,
        story(
            "acme/bad-config",
            base,
            {"app/config.py": LOADER},
            [{"path": "app/config.py", "reply": BARE_EXCEPT}],
        ),
    )
    settled = act(stack, "open")
    # min_severity: critical still applies: the high finding is not posted.
    assert results(stack, settled)["review"] == ["nothing new"]
    assert not reviews(stack)
    summary = checks(stack)[0]["output"]["summary"]
    assert "Configuration problems" in summary
    assert ".github/spark.yml:3: review.max_inline_comments: expected integer" in summary
    assert "review.max_inline_comments uses 20 instead" in summary
    assert (
        ".github/spark.yml:4: unknown key 'min_severty' in review (did you mean 'min_severity'?)" in summary
    )
    # /spark help shows the same problems in its configuration section.
    act(stack, "comment", by="carol", body="/spark help")
    [help_reply] = [
        c["body"]
        for c in stack.github.issue_comments(stack.scene.repo, stack.scene.pr_number)
        if "**Spark commands**" in c["body"]
    ]
    section = help_reply[help_reply.index("**Configuration**") :]
    assert "minimum severity: critical" in section
    assert "review.max_inline_comments uses 20 instead" in section
    assert "did you mean 'min_severity'?" in section


def test_drafts_are_skipped_until_asked(stack: Stack) -> None:
    doc = story(
        "acme/drafty",
        {"app/config.py": LOADER_BASE},
        {"app/config.py": LOADER},
        [{"path": "app/config.py", "reply": BARE_EXCEPT}],
        draft=True,
    )
    use(stack, doc)
    settled = act(stack, "open")
    assert results(stack, settled)["review"] == ["draft skipped"]
    assert checks(stack) == [] and model_requests(stack, "app/config.py") == []
    settled = act(stack, "comment", by="bob", body="/Spark REVIEW now please")
    assert results(stack, settled)["command"] == ["posted"]
    assert len(reviews(stack)) == 1
    # Ready for review: reviewed automatically, but the file has not changed since, and nothing is repeated.
    stack.github.mark_ready_for_review(stack.scene.repo, stack.scene.pr_number, author="bob")
    settled = wait_for_jobs(stack, timeout=60)
    assert results(stack, settled)["review"] == ["nothing new"]
    assert len(model_requests(stack, "app/config.py")) == 1 and len(reviews(stack)) == 1
    assert "unchanged since the last review" in checks(stack)[-1]["output"]["summary"]


# -- stopping: /spark stop and newer pushes -----------------------------------------------------------------


SLOW = Speed(ttft_ms=50, tokens_per_second=200)
# About a thousand tokens: five seconds at the slow speed, so the stop lands while the model streams.
LONG_ANSWER = BARE_EXCEPT + "\n" + "More on why this matters. " * 150


def start_slow_review(stack: Stack, repo: str, *, opened: bool = True) -> None:
    """Seed ``repo`` with a slow scripted answer and start its review; return once the model is streaming."""
    assert stack.model is not None
    stack.model.set_speed(SLOW)
    replies = [
        {"path": "app/config.py", "reply": LONG_ANSWER},
        {"path": "app/config.py", "reply": BARE_EXCEPT},
    ]
    use(stack, story(repo, {"app/config.py": LOADER_BASE}, {"app/config.py": LOADER}, replies))
    stack.scene.act(Event("open", {}))
    deadline = time.monotonic() + 20
    while not model_requests(stack, "app/config.py"):
        assert time.monotonic() < deadline, "the review never called the model"
        time.sleep(0.02)


@pytest.fixture()
def slow_model(stack: Stack) -> Iterator[None]:
    """Let a test slow the local model down; restore the default speed after it."""
    yield
    assert stack.model is not None
    stack.model.set_speed(Speed())


@pytest.mark.usefixtures("slow_model")
def test_spark_stop_mid_review_cancels_it_and_nothing_is_posted_after(stack: Stack) -> None:
    start_slow_review(stack, "acme/stopped")
    [running] = checks(stack)
    assert running["status"] == "in_progress"
    stopped_at = time.monotonic()
    stack.scene.act(Event("comment", {"by": "bob", "body": "/Spark STOP this is the wrong branch"}))
    settled = wait_for_jobs(stack, timeout=60)
    assert results(stack, settled) == {"review": ["cancelled"], "command": ["stopped"]}
    assert reviews(stack) == []
    assert stack.github.review_comments(stack.scene.repo, stack.scene.pr_number) == []
    [run] = checks(stack)
    assert (run["status"], run["conclusion"]) == ("completed", "cancelled")
    assert "Nothing was posted" in run["output"]["summary"]
    [request] = model_requests(stack, "app/config.py")
    # The stream was cut, well before the answer's five seconds were up. The sandbox notices the closed
    # connection at its next write, which may come a moment after the job has ended: wait for it.
    deadline = time.monotonic() + 5
    while not request.cancelled and time.monotonic() < deadline:
        time.sleep(0.02)
    assert request.cancelled and request.finished_at is not None
    assert request.finished_at - request.received_at < 4
    assert time.monotonic() - stopped_at < 10
    said = [c["body"] for c in stack.github.issue_comments(stack.scene.repo, stack.scene.pr_number)]
    assert any(body.startswith("Stopped") for body in said)


@pytest.mark.usefixtures("slow_model")
def test_a_push_during_a_review_cancels_it_and_the_new_head_is_reviewed(stack: Stack) -> None:
    start_slow_review(stack, "acme/pushed-over")
    assert stack.model is not None
    stack.model.set_speed(Speed())
    stack.scene.act(Event("push", {"files": {"app/config.py": LOADER + "\n"}}))
    settled = wait_for_jobs(stack, timeout=60)
    outcome = results(stack, settled)["review"]
    assert outcome[-1] == "posted"
    [review] = reviews(stack)
    assert review["commit_id"] == head(stack)
    first = model_requests(stack, "app/config.py")[0]
    # The old head's review stopped streaming as soon as the push arrived, and posted nothing.
    assert outcome[0] == "cancelled" and first.cancelled


# -- commands -----------------------------------------------------------------------------------------------


def test_help_unknown_commands_and_thread_replies(stack: Stack) -> None:
    base = {"app/config.py": LOADER_BASE, ".github/spark.yml": "review:\n  max_inline_comments: 7\n"}
    use(
        stack,
        story(
            "acme/helpful", base, {"app/config.py": LOADER}, [{"path": "app/config.py", "reply": BARE_EXCEPT}]
        ),
    )
    act(stack, "open")
    settled = act(stack, "comment", by="carol", body="/spark HELP")
    assert results(stack, settled)["command"] == ["help"]
    act(stack, "comment", by="carol", body="/spark xyz do something")
    act(stack, "comment", by="carol", body="/spark help me")
    bodies = [c["body"] for c in stack.github.issue_comments(stack.scene.repo, stack.scene.pr_number)]
    helps = [b for b in bodies if "**Spark commands**" in b]
    assert len(helps) == 3 and all("max inline comments" in b and "7" in b for b in helps)
    assert "I don't know the command `xyz`" in helps[1] and "`xyz`" not in helps[0]
    # Free text after a known command is not an unknown command.
    assert "I don't know" not in helps[2]
    # In a review thread the answer goes to the thread.
    act(stack, "reply", by="carol", body="/spark help", to="last_by_app")
    [thread] = stack.github.threads(stack.scene.repo, stack.scene.pr_number)
    replies = [
        c
        for c in stack.github.review_comments(stack.scene.repo, stack.scene.pr_number)
        if c["id"] in thread["comment_ids"][1:]
    ]
    assert [r["user"]["login"] for r in replies] == ["carol", stack.github.bot_login]
    assert "**Spark commands**" in replies[-1]["body"]


def wait_for_model(stack: Stack, path: str, count: int) -> None:
    """Wait until the local model has had ``count`` requests about ``path`` in this test."""
    deadline = time.monotonic() + 20
    while len(model_requests(stack, path)) < count:
        assert time.monotonic() < deadline, "the review never called the model"
        time.sleep(0.02)


def test_stop_and_push_reach_a_running_review_on_a_single_worker(start: StartStack) -> None:
    """With one worker process, stops and pushes are signalled at intake, not queued behind the review."""
    replies = [{"path": "app/config.py", "reply": LONG_ANSWER}] * 2 + [
        {"path": "app/config.py", "reply": BARE_EXCEPT}
    ]
    doc = story("acme/one-worker", {"app/config.py": LOADER_BASE}, {"app/config.py": LOADER}, replies)
    doc["model"]["speed"] = {"ttft_ms": SLOW.ttft_ms, "tokens_per_second": SLOW.tokens_per_second}
    stack = start(scenarios.parse(yaml.safe_dump(doc, sort_keys=False)))
    _first_request[id(stack)] = 0
    stack.scene.act(Event("open", {}))
    wait_for_model(stack, "app/config.py", 1)
    stack.scene.act(Event("comment", {"by": "bob", "body": "/spark stop"}))
    settled = wait_for_jobs(stack, timeout=60)
    assert results(stack, settled) == {"review": ["cancelled"], "command": ["stopped"]}
    assert reviews(stack) == []
    # A push during the next review cancels it; the newest head is the one reviewed.
    stack.scene.act(Event("push", {"files": {"app/config.py": LOADER + "\n"}}))
    wait_for_model(stack, "app/config.py", 2)
    assert stack.model is not None
    stack.model.set_speed(Speed())
    stack.scene.act(Event("push", {"files": {"app/config.py": LOADER + "\n\n"}}))
    settled = wait_for_jobs(stack, timeout=60)
    assert results(stack, settled)["review"] == ["cancelled", "posted"]
    [review] = reviews(stack)
    assert review["commit_id"] == head(stack)
    assert [r.cancelled for r in model_requests(stack, "app/config.py")] == [True, True, False]
