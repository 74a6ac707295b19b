"""Reasoning as production sees it: the effort each task sends, the timings replies give, the cut-off
retry."""

from __future__ import annotations

from typing import Any

import yaml

from tests.flows.conftest import StartFlow
from tests.stories import BUG, FIX, FIX_SCRIPT, FIXED, bot_comments, head_file
from tests.stories import fix_story as story


def reasoning_story(reasoning: Any, config: str = "review:\n  auto: false\n") -> str:
    """Return the fix story with the local model reasoning ``reasoning`` tokens (per effort) first."""
    document = yaml.safe_load(story(FIX, [{**FIX_SCRIPT, "repeat": True}], config=config))
    document["model"]["reasoning"] = reasoning
    return yaml.safe_dump(document, sort_keys=False)


def test_a_fix_reasons_at_low_effort_and_its_reply_counts_the_reasoning(flows: StartFlow) -> None:
    flow = flows(reasoning_story({"low": 120, "medium": 900, "high": 3000}))
    outcome = flow.run_all()
    assert len(outcome["new_commits"]) == 1 and FIXED in head_file(flow)
    [request] = flow.model.requests
    assert (request.reasoning_effort, request.reasoning_format) == ("low", "parsed")
    assert request.reasoning_tokens == 120
    [reply] = bot_comments(outcome)
    assert "first token" in reply and "first content" in reply and "120 of them reasoning" in reply
    assert "Weighing the request" not in reply  # the reasoning never reaches the reply


def test_the_repository_chooses_the_effort_per_task(flows: StartFlow) -> None:
    config = "review:\n  auto: false\nreasoning:\n  fix: high\n"
    flow = flows(reasoning_story({"low": 10, "medium": 20, "high": 30}, config=config))
    flow.run_all()
    assert [(r.reasoning_effort, r.reasoning_tokens) for r in flow.model.requests] == [("high", 30)]


def test_an_answer_cut_off_while_reasoning_is_asked_again_once_and_the_reply_says_so(
    flows: StartFlow,
) -> None:
    """Medium effort reasons past the 4,096-token limit: the fix is asked again at low effort with twice
    the room, commits, and its reply says why it took two calls."""
    config = "review:\n  auto: false\nreasoning:\n  fix: medium\n"
    flow = flows(reasoning_story({"low": 50, "medium": 5000}, config=config))
    outcome = flow.run_all()
    assert len(outcome["new_commits"]) == 1 and BUG not in head_file(flow)
    asked = [(r.reasoning_effort, r.max_completion_tokens, r.finish_reason) for r in flow.model.requests]
    assert asked == [("medium", 4096, "length"), ("low", 8192, "stop")]
    [reply] = bot_comments(outcome)
    assert "cut off at the length limit after 4096 tokens of reasoning" in reply
    assert "low reasoning effort instead of medium and room for 8192 tokens instead of 4096" in reply


def test_a_second_cut_off_is_not_retried_again(flows: StartFlow) -> None:
    """Reasoning past even the larger room: each call is asked again once only, then the usual refusal."""
    config = "review:\n  auto: false\nreasoning:\n  fix: medium\nfix:\n  escalate: false\n"
    flow = flows(reasoning_story({"low": 9000, "medium": 9000}, config=config))
    outcome = flow.run_all()
    assert outcome["new_commits"] == []
    # The first ask and its cut-off retry; the edit's own retry (the answer was empty) and its cut-off retry.
    assert [r.reasoning_effort for r in flow.model.requests] == ["medium", "low", "medium", "low"]
    [reply] = bot_comments(outcome)
    assert "Nothing was committed" in reply and "cut off at the length limit" in reply
