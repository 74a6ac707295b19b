"""A fix asked before GitHub answers: used when everything it started from still holds, dropped otherwise."""

from __future__ import annotations

from typing import Any

import yaml
from structlog.testing import capture_logs

from sandbox.scenario import Event
from tests.e2e.test_fix_flow import BUG, FIX, FIX_ANSWER, FIXED, HEAD, PATH, REPO, head_file, story
from tests.flows.conftest import Flow, StartFlow

COMMAND = "/spark fix average divides by the wrong count"
# Round trips long enough that a model request sent before the first one came back is plainly early.
LATENCY_MS = 150


def calculator(replies: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the fix story's document with slow GitHub calls and the given model replies."""
    document: dict[str, Any] = yaml.safe_load(story(FIX, replies, config="review:\n  auto: false\n"))
    document["github"] = {"latency_ms": LATENCY_MS}
    return document


def fix_again(flow: Flow) -> tuple[str | None, list[Any], list[Any]]:
    """Comment the fix again; return its outcome, the model requests and GitHub calls it made."""
    model_mark, log_mark = len(flow.model.requests), len(flow.github.request_log)
    outcome = flow.act(Event("comment", {"by": "alice", "body": COMMAND}))
    return outcome, flow.model.requests[model_mark:], flow.github.request_log[log_mark:]


def put_back(flow: Flow, text: str) -> None:
    """Push ``text`` as the file, as a user: Spark's review of the push (off here) notes the new head."""
    flow.act(Event("push", {"files": {PATH: text}}))


def test_a_second_fix_on_what_the_first_read_is_asked_before_github_answers(flows: StartFlow) -> None:
    script = {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER, "repeat": True}
    flow = flows(calculator([script]))
    assert flow.act(Event("comment", {"by": "alice", "body": COMMAND})) == "committed"
    put_back(flow, HEAD)  # the bug is back, in a new head with the same text
    with capture_logs() as logs:
        outcome, asked, calls = fix_again(flow)
    assert outcome == "committed" and FIXED in head_file(flow) and BUG not in head_file(flow)
    # One model call, asked early (sent while the first round trip was out) and used: nothing asked twice.
    assert [e["event"] for e in logs if e["event"].startswith("fix.ahead")] == ["fix.ahead_used"]
    [request] = asked
    assert request.received_at < max(c.started + c.duration for c in calls if c.started < request.received_at)
    # The reply is the usual one, with the model's figures.
    assert "first token" in flow.github.issue_comments(REPO, 1)[-1]["body"]


def test_a_file_changed_since_the_last_fix_drops_the_early_answer(flows: StartFlow) -> None:
    """The early request saw the text the last fix read; GitHub now has another: the fix asks again on it
    and commits against what GitHub has, as if it had never started early."""
    changed = HEAD.replace('"""Return the arithmetic mean of values."""', '"""Return the mean."""')
    # The bug line is the same in both texts: one scripted answer fits both.
    script = {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER, "repeat": True}
    flow = flows(calculator([script]))
    assert flow.act(Event("comment", {"by": "alice", "body": COMMAND})) == "committed"
    put_back(flow, changed)
    outcome, asked, _ = fix_again(flow)
    assert outcome == "committed"
    early, regular = asked
    seen = lambda request: "\n".join(m["content"] for m in request.messages)  # noqa: E731
    # The early request showed the text the last fix read; the one that counts shows GitHub's.
    assert "Return the mean." not in seen(early) and "Return the mean." in seen(regular)
    text = head_file(flow)
    assert '"""Return the mean."""' in text and FIXED in text and BUG not in text


def test_a_head_that_moved_with_another_file_drops_the_early_answer(flows: StartFlow) -> None:
    """A push that also changed another file: the pull request's diff is not the one the early request was
    built from (targets are chosen from it), so the fix asks again on GitHub's answers."""
    script = {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER, "repeat": True}
    flow = flows(calculator([script]))
    assert flow.act(Event("comment", {"by": "alice", "body": COMMAND})) == "committed"
    flow.act(Event("push", {"files": {PATH: HEAD, "src/extra.py": "X = 1\n"}}))
    outcome, asked, _ = fix_again(flow)
    assert outcome == "committed" and len(asked) == 2
    # The regular request left once GitHub had answered, after the early one.
    assert asked[0].received_at < asked[1].received_at
    assert FIXED in head_file(flow) and BUG not in head_file(flow)


def test_nobody_without_permission_makes_spark_ask_the_model_early(flows: StartFlow) -> None:
    """Only commenters whose fix passed the permission check on this pull request start early: a reader's
    `/spark fix` is refused as before, without a model call."""
    script = {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER, "repeat": True}
    document = calculator([script])
    document["collaborators"] = {"alice": "write", "mallory": "read"}
    flow = flows(document)
    assert flow.act(Event("comment", {"by": "alice", "body": COMMAND})) == "committed"
    put_back(flow, HEAD)
    model_mark = len(flow.model.requests)
    assert flow.act(Event("comment", {"by": "mallory", "body": COMMAND})) == "failed"
    assert flow.model.requests[model_mark:] == []
    assert "needs write permission" in flow.github.issue_comments(REPO, 1)[-1]["body"]


def test_right_after_sparks_own_commit_nothing_starts_early(flows: StartFlow) -> None:
    """The head is Spark's own commit: the texts it changed are not what the last fix read, so a follow-up
    fix asks once, on GitHub's answers."""
    script = {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER, "repeat": True}
    flow = flows(calculator([script]))
    assert flow.act(Event("comment", {"by": "alice", "body": COMMAND})) == "committed"
    with capture_logs() as logs:
        fix_again(flow)
    assert not [e for e in logs if e["event"].startswith("fix.ahead")]
