"""When the fast model's edit still fails after its retry, `/spark fix` asks the deep model once."""

from __future__ import annotations

import re

from bot.settings import Settings
from tests.flows.conftest import StartFlow
from tests.stories import BUG, FIX, FIX_ANSWER, FIXED, PATH, answer, bot_comments, head_file
from tests.stories import fix_story as story

WRONG = answer("    return sum(values) / (len(values) + 1)\n", FIXED)
FAST = Settings.model_fields["spark_model_fast"].default
DEEP = Settings.model_fields["spark_model_deep"].default


def scripts(*replies: str) -> list[dict[str, str]]:
    """Return scripted answers for the calculator's file, used in order (first try, retry, deep model)."""
    return [
        {"name": f"answer-{i}", "path": PATH, "command": "fix", "reply": r} for i, r in enumerate(replies)
    ]


def test_deep_model_fixes_what_the_fast_one_could_not(flows: StartFlow) -> None:
    flow = flows(story(FIX, scripts(WRONG, WRONG, FIX_ANSWER)))
    outcome = flow.run_all()
    [commit] = outcome["new_commits"]
    assert FIXED in head_file(flow) and BUG not in head_file(flow)
    assert flow.model is not None
    asked = flow.model.requests
    assert [r.model for r in asked] == [FAST, FAST, DEEP]
    # The same request, plus what went wrong: the deep model is not shown the fast model's answers.
    deep_text = "\n".join(m["content"] for m in asked[2].messages)
    assert asked[2].messages[:2] == asked[0].messages[:2]
    assert "could not be used even after one retry" in deep_text and "(len(values) + 1)" not in deep_text
    [reply] = bot_comments(outcome)
    assert f"/commit/{commit['sha']}" in reply
    note = re.search(rf"the fast model \(`{FAST}`, (\d+) ms\).*deep model \(`{DEEP}`, (\d+) ms\)", reply)
    assert note is not None and "the one verified" in reply


def test_deep_model_failing_too_commits_nothing_and_says_so(flows: StartFlow) -> None:
    flow = flows(story(FIX, scripts(WRONG, WRONG, WRONG)))
    outcome = flow.run_all()
    assert outcome["new_commits"] == []
    [reply] = bot_comments(outcome)
    assert "Nothing was committed" in reply and "its answer failed too" in reply
    assert flow.model is not None and [r.model for r in flow.model.requests] == [FAST, FAST, DEEP]


def test_repository_can_turn_escalation_off(flows: StartFlow) -> None:
    config = "review:\n  auto: false\nfix:\n  escalate: false\n"
    flow = flows(story(FIX, scripts(WRONG, WRONG, FIX_ANSWER), config=config))
    outcome = flow.run_all()
    assert outcome["new_commits"] == []
    assert flow.model is not None and [r.model for r in flow.model.requests] == [FAST, FAST]
    [reply] = bot_comments(outcome)
    assert "deep model" not in reply and "Nothing was committed" in reply
