"""Issue 15 end to end: nobody borrows a writer's power, only Spark's words count as Spark's, posted text is
inert, secrets stay in the repository. Real receiver, Redis, ``spark worker`` and both sandboxes; the model
is scripted to answer what a prompt-injected model would.
"""

from __future__ import annotations

import time

from bot.sandbox.demo import collect_outcome, wait_for_jobs
from tests.e2e.conftest import StartStack
from tests.e2e.test_fix_flow import (
    HEAD,
    LONG_ANSWER,
    PATH,
    SLOW,
    _streaming,
    bot_comments,
    comment,
    head_file,
    story,
    user_comment_ids,
    wait_until,
)

TEAM = {"alice": "write", "maya": "write", "carol": "write", "trudy": "triage"}
SLOW_FIX = [{"name": "slow", "path": PATH, "command": "fix", "reply": LONG_ANSWER, "repeat": True}]


# -- nobody borrows a writer's power ------------------------------------------------------------------------


def test_a_triage_users_stop_and_fix_do_not_touch_a_maintainers_running_fix(start: StartStack) -> None:
    """Trudy (triage: her comments say COLLABORATOR) cannot stop or supersede Maya's fix on one worker."""
    events = [
        comment("/spark fix average divides by the wrong count", by="maya"),
        comment("/spark stop", by="trudy"),
        comment("/spark fix something else", by="trudy"),
    ]
    stack = start(story(events, SLOW_FIX, collaborators=TEAM, speed=SLOW))
    fix_event, stop_event, fix_again = stack.scenario.events
    stack.scene.act(fix_event)
    wait_until(_streaming(stack, 1))
    stack.scene.act(stop_event)
    stack.scene.act(fix_again)
    wait_for_jobs(stack, timeout=90)
    assert stack.model is not None
    [request] = stack.model.requests  # Trudy's own fix never reached the model
    assert not request.cancelled
    outcome = collect_outcome(stack)
    [commit] = outcome["new_commits"]
    maya_id = user_comment_ids(stack)[0]
    assert f"issuecomment-{maya_id}" in commit["message"]
    replies = bot_comments(outcome)
    assert sum("Sorry @trudy" in text for text in replies) == 2
    assert any(text.startswith("Pushed a fix") for text in replies)


def test_a_fix_stopped_by_another_writer_tells_its_requester_who_stopped_it(start: StartStack) -> None:
    """Carol (write) stops Maya's fix: it stops within a second on one worker, and Maya is told by whom."""
    events = [
        comment("/spark fix average divides by the wrong count", by="maya"),
        comment("/spark stop", by="carol"),
    ]
    stack = start(story(events, SLOW_FIX, collaborators=TEAM, speed=SLOW))
    fix_event, stop_event = stack.scenario.events
    stack.scene.act(fix_event)
    wait_until(_streaming(stack, 1))
    stop_at = time.monotonic()
    stack.scene.act(stop_event)
    wait_for_jobs(stack, timeout=60)
    assert stack.model is not None
    [request] = stack.model.requests
    wait_until(lambda: request.cancelled, timeout=5)
    assert request.finished_at is not None and request.finished_at - stop_at < 1.0
    outcome = collect_outcome(stack)
    assert outcome["new_commits"] == [] and head_file(stack) == HEAD
    replies = bot_comments(outcome)
    told = [text for text in replies if text.startswith("@maya")]
    assert len(told) == 1 and "carol stopped this fix" in told[0], replies
    assert any(text.startswith("Stopped") for text in replies)  # Carol's own answer
