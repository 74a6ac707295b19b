"""``/spark fix`` end to end: real receiver, real Redis, a real ``spark worker`` process, both sandboxes.

Each test tells a short story in scenario form (YAML built here), fires it through the local GitHub, and
checks what a user would see there and what the local model was asked. Here are the stories that need the
receiver and processes (bots ignored at the intake, one job cancelling another); the fix flow's own stories
run in process in tests/flows/test_fix_flow.py, on the same calculator.
"""

from __future__ import annotations

import time

from sandbox.stack import collect_outcome, fire, wait_for_jobs
from tests.e2e.conftest import StartStack
from tests.stories import (
    FIX_ANSWER,
    FIX_SCRIPT,
    HEAD,
    PATH,
    bot_comments,
    comment,
    head_file,
    reactions_by_app,
    user_comment_ids,
    wait_until,
)
from tests.stories import LONG_FIX_ANSWER as LONG_ANSWER
from tests.stories import SLOW_FIX as SLOW
from tests.stories import fix_story as story
from tests.stories import streaming as _streaming


def test_bots_and_the_app_itself_are_ignored(start: StartStack) -> None:
    events = [
        comment("/spark fix average divides by the wrong count", by="dependabot[bot]"),
        comment("/spark fix average divides by the wrong count", by="spark[bot]"),
    ]
    stack = start(story(events, [FIX_SCRIPT]))
    steps = [fire(stack, event) for event in stack.scenario.events]
    for step in steps:
        assert [d["status_code"] for d in step.deliveries] == [202] and step.jobs == []
    outcome = collect_outcome(stack)
    assert outcome["new_commits"] == [] and outcome["reactions"] == []
    assert stack.model is not None and stack.model.requests == []


# --- cancellation -----------------------------------------------------------------------------------------


def test_a_second_fix_cancels_the_first_within_a_second(start: StartStack) -> None:
    replies = [
        {"name": "slow", "path": PATH, "command": "fix", "reply": LONG_ANSWER},
        {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER},
    ]
    events = [comment("/spark fix average divides by the wrong count"), comment("/spark fix the average")]
    stack = start(story(events, replies, speed=SLOW))
    first_event, second_event = stack.scenario.events
    stack.scene.act(first_event)
    wait_until(_streaming(stack, 1))
    second_at = time.monotonic()
    stack.scene.act(second_event)
    wait_for_jobs(stack, timeout=60)
    assert stack.model is not None
    first, second = stack.model.requests
    # The sandbox notices the closed stream at its next write, maybe just after the job ended.
    wait_until(lambda: first.cancelled, timeout=5)
    assert first.cancelled and first.finished_at is not None
    assert first.finished_at - second_at < 1.0, "the first stream was not cut within a second"
    assert second.script == "fix"
    outcome = collect_outcome(stack)
    [commit] = outcome["new_commits"]
    first_id, second_id = user_comment_ids(stack)
    assert f"issuecomment-{second_id}" in commit["message"]
    # The superseded job posted nothing after the newer one started: only its 👀 from before.
    assert reactions_by_app(stack, first_id) == ["eyes"]
    [reply] = bot_comments(outcome)
    assert f"spark:reply=fix-{second_id}" in reply


def test_spark_stop_mid_fix_stops_the_stream_and_commits_nothing(start: StartStack) -> None:
    replies = [{"name": "slow", "path": PATH, "command": "fix", "reply": LONG_ANSWER}]
    events = [comment("/spark fix average divides by the wrong count"), comment("/spark stop")]
    stack = start(story(events, replies, speed=SLOW))
    fix_event, stop_event = stack.scenario.events
    stack.scene.act(fix_event)
    wait_until(_streaming(stack, 1))
    stop_at = time.monotonic()
    stack.scene.act(stop_event)
    wait_for_jobs(stack, timeout=60)
    assert stack.model is not None
    [request] = stack.model.requests
    wait_until(lambda: request.cancelled, timeout=5)
    assert request.cancelled and request.finished_at is not None
    assert request.finished_at - stop_at < 1.0
    outcome = collect_outcome(stack)
    assert outcome["new_commits"] == [] and head_file(stack) == HEAD
    [reply] = bot_comments(outcome)
    assert reply.startswith("Stopped")


def test_a_strangers_stop_does_not_stop_someone_elses_fix(start: StartStack) -> None:
    """Anyone may comment `/spark stop`; only the PR's author and maintainers stop anything."""
    replies = [{"name": "slow", "path": PATH, "command": "fix", "reply": LONG_ANSWER}]
    events = [comment("/spark fix average divides by the wrong count"), comment("/spark stop", by="mallory")]
    stack = start(story(events, replies, speed=SLOW))
    fix_event, stop_event = stack.scenario.events
    stack.scene.act(fix_event)
    wait_until(_streaming(stack, 1))
    stack.scene.act(stop_event)
    wait_for_jobs(stack, timeout=60)
    assert stack.model is not None
    [request] = stack.model.requests
    assert not request.cancelled
    outcome = collect_outcome(stack)
    [commit] = outcome["new_commits"]
    assert commit["verified"]
    replies_text = bot_comments(outcome)
    assert any("Sorry @mallory" in text for text in replies_text)
    assert not any(text.startswith("Stopped") for text in replies_text)
