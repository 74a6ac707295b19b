"""A fix asked before GitHub answers (``workers.commands.fix.ahead``): used only when the head is the one last
seen and everything the model saw is what GitHub then answers; otherwise dropped unseen, and the fix commits
against what GitHub has, as if it had never started early. Nobody without permission gets anything."""

from __future__ import annotations

from typing import Any

import yaml

from sandbox.cerebras import RequestRecord
from sandbox.github.server import LoggedRequest
from sandbox.scenario import Event
from tests.flows.conftest import Flow, StartFlow
from tests.stories import (
    BUG,
    FIX_ANSWER,
    FIXED,
    HEAD,
    PATH,
    REPO,
    bot_comments,
    captured_logs,
    comment,
    head_file,
)
from tests.stories import fix_story as story

COMMAND = "/spark fix average divides by the wrong count"
BRANCH = "average"
SCRIPT = {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER, "repeat": True}
# GitHub's round trips long enough that a model request sent before the first one came back is plainly early.
LATENCY_MS = 150
# The same bug under another docstring: one scripted answer fits both texts.
CHANGED = HEAD.replace('"""Return the arithmetic mean of values."""', '"""Return the mean."""')


def calculator(
    *, collaborators: dict[str, str] | None = None, files: dict[str, str] | None = None
) -> dict[str, Any]:
    """Return the fix story's document: automatic review off (a push's review only notes the head), slow
    GitHub, and the fix answer for every request."""
    document: dict[str, Any] = yaml.safe_load(
        story([comment(COMMAND)], [SCRIPT], collaborators=collaborators, config="review:\n  auto: false\n")
    )
    document["github"] = {"latency_ms": LATENCY_MS}
    document["pull_request"]["files"].update(files or {})
    return document


def fix(
    flow: Flow, by: str = "alice"
) -> tuple[str | None, list[RequestRecord], list[LoggedRequest], list[str]]:
    """Comment the fix; return its outcome, the model requests and GitHub calls it made, and the log lines of
    its early start."""
    model_mark, log_mark = len(flow.model.requests), len(flow.github.request_log)
    with captured_logs() as logs:
        outcome = flow.act(Event("comment", {"by": by, "body": COMMAND}))
    early = [e for e in logs if e["event"].startswith("fix.ahead")]
    return outcome, flow.model.requests[model_mark:], flow.github.request_log[log_mark:], early


def events(logs: list[dict[str, Any]]) -> list[str]:
    """Return the events of log lines."""
    return [e["event"] for e in logs]


def seen_push(flow: Flow, files: dict[str, str]) -> None:
    """Push ``files`` as a user; Spark's review of the push (automatic review off) notes the new head."""
    flow.act(Event("push", {"files": files}))


def quiet_push(flow: Flow, files: dict[str, str]) -> None:
    """Push ``files`` as a user without Spark seeing it (no review job runs for it)."""
    flow.github.push(REPO, BRANCH, dict(files), message="Quiet push", author="alice")


def shown(request: RequestRecord) -> str:
    """Return everything a model request showed the model."""
    return "\n".join(str(m["content"]) for m in request.messages)


def fixed_once(flow: Flow) -> Flow:
    """Run the first fix (it reads everything from GitHub and keeps it), then put the bug back in a push
    Spark sees: the head last seen is a user's push, with the text the first fix read."""
    outcome, asked, _, early = fix(flow)
    assert outcome == "committed" and len(asked) == 1 and early == []
    seen_push(flow, {PATH: HEAD})
    return flow


def test_a_fix_on_a_seen_head_asks_the_model_before_github_answers(flows: StartFlow) -> None:
    flow = fixed_once(flows(calculator()))
    outcome, asked, calls, early = fix(flow)
    assert outcome == "committed" and FIXED in head_file(flow) and BUG not in head_file(flow)
    # One model call, asked early and used: nothing was asked twice.
    assert events(early) == ["fix.ahead_asked", "fix.ahead_used"]
    [request] = asked
    # It left before GitHub had answered with the pull request (or its diff).
    pulls = [c for c in calls if c.method == "GET" and c.path.endswith("/pulls/1")]
    assert pulls and request.received_at < min(c.started + c.duration for c in pulls)
    # The reply is the usual one, with the model's figures.
    reply = bot_comments(flow.outcome())[-1]
    assert "Pushed a fix" in reply and "first token" in reply


def test_a_push_after_the_head_last_seen_is_never_committed_against(flows: StartFlow) -> None:
    """A push Spark has not seen lands between the head last seen and the fix: the answer asked early on
    the head last seen is dropped, and the fix asks again on the text GitHub has and commits against it."""
    flow = fixed_once(flows(calculator()))
    quiet_push(flow, {PATH: CHANGED})
    outcome, asked, _, early = fix(flow)
    assert outcome == "committed"
    assert events(early) == ["fix.ahead_asked", "fix.ahead_dropped"]
    first, second = asked
    assert "Return the mean." not in shown(first) and "Return the mean." in shown(second)
    text = head_file(flow)
    assert '"""Return the mean."""' in text and FIXED in text and BUG not in text


def test_a_new_head_with_the_same_text_is_not_the_head_last_seen(flows: StartFlow) -> None:
    """Even where every text is the same, an answer asked on one head is not used for another."""
    flow = fixed_once(flows(calculator()))
    quiet_push(flow, {"README.md": "calculator\n"})
    outcome, asked, _, logs = fix(flow)
    assert outcome == "committed" and len(asked) == 2 and FIXED in head_file(flow)
    dropped = [e for e in logs if e["event"] == "fix.ahead_dropped"]
    assert [e["changed"] for e in dropped] == [["head"]]


def test_a_file_changed_at_the_seen_head_drops_the_early_answer(flows: StartFlow) -> None:
    """The head last seen holds another text than the one Spark kept: the fix asks again on GitHub's text."""
    flow = fixed_once(flows(calculator()))
    seen_push(flow, {PATH: CHANGED})
    outcome, asked, _, logs = fix(flow)
    assert outcome == "committed"
    [dropped] = [e for e in logs if e["event"] == "fix.ahead_dropped"]
    assert "text" in dropped["changed"]
    first, second = asked
    assert "Return the mean." not in shown(first) and "Return the mean." in shown(second)
    text = head_file(flow)
    assert '"""Return the mean."""' in text and FIXED in text and BUG not in text


UTIL = "src/util.py"
UTIL_ANSWER = f"{UTIL}\n<<<<<<< SEARCH\n    return x + x + x\n=======\n    return x * 2\n>>>>>>> REPLACE\n"


def test_a_file_the_last_fix_did_not_read_starts_early_on_the_index_s_text(flows: StartFlow) -> None:
    """The last fix edited src/calc.py; this one names src/util.py, which it never read: its text at the head
    comes from the repository index's store (by blob SHA), and the answer asked on it is used."""
    document = calculator(files={UTIL: "def double(x: int) -> int:\n    return x + x + x\n"})
    # The util script first: the second request also names src/calc.py (the session's earlier fix).
    document["model"]["replies"] = [
        {"name": "util", "path": UTIL, "command": "fix", "reply": UTIL_ANSWER, "repeat": True},
        SCRIPT,
    ]
    flow = flows(document)
    assert flow.act(Event("comment", {"by": "alice", "body": "/spark fix the average in src/calc.py"})) == (
        "committed"
    )
    seen_push(flow, {"README.md": "calculator\n"})
    model_mark = len(flow.model.requests)
    with captured_logs() as logs:
        outcome = flow.act(Event("comment", {"by": "alice", "body": "/spark fix double in src/util.py"}))
    assert outcome == "committed"
    assert [e["event"] for e in logs if e["event"].startswith("fix.ahead")] == [
        "fix.ahead_asked",
        "fix.ahead_used",
    ]
    [request] = flow.model.requests[model_mark:]
    assert "return x + x + x" in shown(request)
    text = flow.github.file_at(REPO, flow.head(), UTIL) or ""
    assert "return x * 2" in text


STATS = "src/stats.py"
TOTAL = (
    'def total(values: list[float]) -> float:\n    """Return the sum of values."""\n    return sum(values)\n'
)
USES_TOTAL = HEAD.replace(
    "    return sum(values) / (len(values) - 1)", "    return total(values) / (len(values) - 1)"
)
TOTAL_FIX = (
    f"{PATH}\n<<<<<<< SEARCH\n    return total(values) / (len(values) - 1)\n=======\n"
    "    return total(values) / len(values)\n>>>>>>> REPLACE\n"
)


def test_code_from_another_file_that_changed_drops_the_early_answer(flows: StartFlow) -> None:
    """The model is shown the definitions the target uses from other files; one of them changed at the head:
    the early request showed the old one, so its answer is dropped and the fix asks with the new one."""
    document = calculator(files={PATH: USES_TOTAL, STATS: TOTAL})
    document["model"]["replies"] = [{**SCRIPT, "reply": TOTAL_FIX}]
    flow = flows(document)
    outcome, _, _, _ = fix(flow)
    assert outcome == "committed"
    renamed = TOTAL.replace("Return the sum of values.", "Return the total of values.")
    seen_push(flow, {PATH: USES_TOTAL, STATS: renamed})
    outcome, asked, _, logs = fix(flow)
    assert outcome == "committed"
    [dropped] = [e for e in logs if e["event"] == "fix.ahead_dropped"]
    assert dropped["changed"] == ["elsewhere"]
    first, second = asked
    assert "Return the sum of values." in shown(first) and "Return the total of values." in shown(second)
    assert "total(values) / len(values)" in head_file(flow)


def test_a_commenter_without_permission_makes_spark_ask_nothing(flows: StartFlow) -> None:
    """Only a commenter whose fix passed the permission check on the pull request starts early: another's
    `/spark fix` is refused as before, without a model call."""
    flow = fixed_once(flows(calculator(collaborators={"alice": "write", "mallory": "read"})))
    head = flow.head()
    outcome, asked, _, early = fix(flow, by="mallory")
    assert outcome == "failed" and asked == [] and early == []
    assert flow.head() == head
    assert "needs write permission" in bot_comments(flow.outcome())[-1]


def test_permission_taken_away_is_checked_before_an_early_answer_is_used(flows: StartFlow) -> None:
    """Alice's fix passed the check before, so hers starts early; her permission is gone since: the answer is
    never used, nothing is committed and the only reply is the refusal."""
    flow = fixed_once(flows(calculator()))
    flow.github.add_collaborator(REPO, "alice", "read")
    head, replies = flow.head(), len(bot_comments(flow.outcome()))
    outcome, asked, _, early = fix(flow)
    # The model was asked (the cost of starting before the check); its answer was never looked at.
    assert outcome == "failed" and len(asked) <= 1
    assert "fix.ahead_asked" in events(early) and "fix.ahead_used" not in events(early)
    assert flow.head() == head
    after = bot_comments(flow.outcome())
    assert len(after) == replies + 1 and "needs write permission" in after[-1]


def test_right_after_sparks_own_commit_nothing_starts_early(flows: StartFlow) -> None:
    """The head last seen is Spark's own commit: the texts it changed are not what the last fix read, so a
    follow-up fix asks once, on GitHub's answers."""
    flow = flows(calculator())
    assert fix(flow)[0] == "committed"
    _, asked, _, early = fix(flow)
    assert early == [] and asked
