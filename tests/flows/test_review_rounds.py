"""The review's round trips: what it reads at once on a pull request it has seen, and what it never posts."""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.fix_latency import waves
from bot import keys
from bot.refs import check_run_external_id
from sandbox.scenario import Event
from tests.flows.conftest import Flow, StartFlow
from tests.stories import BARE_EXCEPT, LOADER, UNCLOSED, checks, quiet, reviews
from workers.flows.gate import CHECK_NAME
from workers.flows.review import run_review
from workers.memory import check_runs

# Round trips long enough that calls sent together overlap and calls sent one after another do not.
LATENCY_MS = 150


def slow(document: dict[str, Any]) -> dict[str, Any]:
    """Return the story with every GitHub call slowed down, and a config of the repository's own."""
    document["github"] = {"latency_ms": LATENCY_MS}
    document["repository"]["files"][".github/spark.yml"] = "review:\n  min_severity: low\n"
    return document


def push_and_review(flow: Flow, text: str) -> tuple[str | None, int]:
    """Push ``text`` as app/config.py, review the new head; return its outcome and its sequential rounds."""
    mark = len(flow.github.request_log)
    outcome = flow.act(Event("push", {"files": {"app/config.py": text}}))
    # The repository index's own reads (a compare, then the blobs it lacks) are the index's, not counted here.
    requests = [
        r for r in flow.github.request_log[mark:] if "/compare/" not in r.path and "/git/blobs/" not in r.path
    ]
    return outcome, waves(requests)


def test_a_review_of_a_pull_request_it_has_seen_takes_four_rounds(flows: StartFlow) -> None:
    """Seen before: the pull request, diff, threads, config and files at once, with the check run opened;
    then the model; then the head confirmed, the review, the check run's conclusion."""
    replies = [{"path": "app/config.py", "reply": BARE_EXCEPT, "repeat": False}]
    replies.append({"path": "app/config.py", "reply": BARE_EXCEPT + "\n" + UNCLOSED})
    flow = flows(slow(quiet("acme/rounds", replies)))
    first, _ = push_and_review(flow, LOADER + "\n")
    assert first == "posted"
    seen, seen_rounds = push_and_review(flow, LOADER + "\n# more\n")
    assert seen == "posted" and len(reviews(flow)) == 2
    assert seen_rounds == 4, seen_rounds
    # The check run opened at once is the one concluded: one per head.
    assert [c["conclusion"] for c in checks(flow)] == ["neutral", "neutral"]


def test_the_repository_index_adds_no_round_to_a_review_of_a_pull_request_it_has_seen(
    flows: StartFlow,
) -> None:
    """The index's compare leaves with the first round, and the blob of the file pushed is not read again:
    the index takes it from the review's own read of the file at the head."""
    replies = [{"path": "app/config.py", "reply": BARE_EXCEPT, "repeat": False}]
    replies.append({"path": "app/config.py", "reply": BARE_EXCEPT + "\n" + UNCLOSED})
    flow = flows(slow(quiet("acme/indexed", replies)))
    assert flow.act(Event("push", {"files": {"app/config.py": LOADER + "\n"}})) == "posted"
    mark = len(flow.github.request_log)
    assert flow.act(Event("push", {"files": {"app/config.py": LOADER + "\n# more\n"}})) == "posted"
    requests = flow.github.request_log[mark:]
    assert [r.path for r in requests if "/compare/" in r.path], "the index was updated from a compare"
    assert not [r.path for r in requests if "/git/blobs/" in r.path]
    assert waves(requests) == 4, waves(requests)


def test_a_head_that_moved_under_the_review_gets_nothing_posted(flows: StartFlow) -> None:
    """The files read ahead at the webhook's head are of a head the pull request no longer has: stale."""
    replies = [{"path": "app/config.py", "reply": BARE_EXCEPT, "repeat": True}]
    flow = flows(slow(quiet("acme/moved", replies)))
    assert flow.act(Event("push", {"files": {"app/config.py": LOADER + "\n"}})) == "posted"
    ctx = flow.context("review", head_sha=flow.head())
    # A push the webhook of this job does not know: the job's head is now an old one.
    flow.scene.act(Event("push", {"files": {"app/config.py": LOADER + "\n# later\n"}}))
    assert run_review(ctx, "synchronize") == "stale"
    assert len(reviews(flow)) == 1
    # The check run opened at once on the old head says why it stopped.
    stale = [c for c in checks(flow) if c["conclusion"] == "skipped"]
    assert stale and stale[0]["output"]["title"] == "Head moved"


def test_a_review_job_that_runs_again_concludes_its_check_run_never_a_second(
    flows: StartFlow,
) -> None:
    """At-least-once: the job's worker (or Redis) went away after GitHub created the check run and before the
    job recorded its id, so only the reservation says it may exist; the job run again finds it on the head."""
    replies = [{"path": "app/config.py", "reply": BARE_EXCEPT, "repeat": True}]
    flow = flows(quiet("acme/again", replies))
    flow.scene.act(Event("push", {"files": {"app/config.py": LOADER + "\n"}}))
    head = flow.head()
    ctx = dataclasses.replace(flow.context("review", head_sha=head), job_id="job-7")
    external = check_run_external_id(flow.number, "job-7")
    run = check_runs.open_check_run(ctx.redis, ctx.github, ctx.repo, head, CHECK_NAME, external, "job-7")
    assert run[1] is False
    ctx.redis.set(keys.CHECK_RUN.format("job-7", head, CHECK_NAME), check_runs.PENDING)  # the id was lost
    assert run_review(ctx, "synchronize") == "posted"
    spark = [c for c in checks(flow) if c["name"] == CHECK_NAME]
    assert [(c["id"], c["status"]) for c in spark] == [(run[0], "completed")]
    # A job with no record at all (it never reached GitHub) creates one; another job id, another run.
    again = dataclasses.replace(flow.context("review", head_sha=head), job_id="job-8")
    run_review(again, "synchronize")
    assert len([c for c in checks(flow) if c["name"] == CHECK_NAME]) == 2
