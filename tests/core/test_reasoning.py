"""The reasoning options sent per task and model, and the retry after a cut-off while reasoning."""

from __future__ import annotations

import pytest

from bot.core.reasoning import (
    DEFAULT_EFFORTS,
    MAX_RETRY_TOKENS,
    TASKS,
    cut_off_while_reasoning,
    cutoff_retry,
    effective_effort,
    lower,
    reasoning_options,
)

GPT = "gpt-oss-120b"
GLM = "zai-glm-4.7"


def test_defaults_keep_quick_tasks_low_and_the_deep_ones_higher() -> None:
    """A fix, an answer and a summary reason little; a review and the deep model's attempt more."""
    assert set(DEFAULT_EFFORTS) == set(TASKS)
    assert [DEFAULT_EFFORTS[t] for t in ("fix", "ask", "describe")] == ["low", "low", "low"]
    assert DEFAULT_EFFORTS["review"] == "medium" and DEFAULT_EFFORTS["escalate"] == "high"


@pytest.mark.parametrize(
    ("model", "effort", "sent"),
    [
        # gpt-oss takes low..high; "none" is refused by the API, so its lowest level goes instead.
        (GPT, "low", {"reasoning_effort": "low", "reasoning_format": "parsed"}),
        (GPT, "medium", {"reasoning_effort": "medium", "reasoning_format": "parsed"}),
        (GPT, "high", {"reasoning_effort": "high", "reasoning_format": "parsed"}),
        (GPT, "none", {"reasoning_effort": "low", "reasoning_format": "parsed"}),
        # GLM only switches reasoning off; any level leaves it at its default.
        (GLM, "none", {"reasoning_effort": "none", "reasoning_format": "parsed"}),
        (GLM, "low", {"reasoning_format": "parsed"}),
        (GLM, "high", {"reasoning_format": "parsed"}),
        # A model that does not reason gets no reasoning parameter at all.
        ("llama3.1-8b", "low", {}),
        ("llama3.1-8b", "none", {}),
    ],
)
def test_options_sent_per_model(model: str, effort: str, sent: dict[str, str]) -> None:
    assert reasoning_options(model, effort) == sent  # type: ignore[arg-type]


def test_options_sent_per_task_with_the_default_models() -> None:
    """What each task sends with the deployment's defaults: the fast model for fix/ask/describe, the deep
    one for reviews and escalations."""
    models = {"fix": GPT, "ask": GPT, "describe": GPT, "review": GLM, "escalate": GLM}
    sent = {task: reasoning_options(models[task], DEFAULT_EFFORTS[task]) for task in TASKS}
    assert (
        sent["fix"]
        == sent["ask"]
        == sent["describe"]
        == {
            "reasoning_effort": "low",
            "reasoning_format": "parsed",
        }
    )
    assert sent["review"] == sent["escalate"] == {"reasoning_format": "parsed"}
    # The same tasks on gpt-oss as the deep model take their own levels.
    assert reasoning_options(GPT, DEFAULT_EFFORTS["review"])["reasoning_effort"] == "medium"
    assert reasoning_options(GPT, DEFAULT_EFFORTS["escalate"])["reasoning_effort"] == "high"


def test_effective_effort_and_the_step_below() -> None:
    assert effective_effort(GLM, "high") == "medium"  # GLM's default: it takes no level
    assert effective_effort("llama3.1-8b", "high") == "none"
    assert [lower(GPT, e) for e in ("high", "medium", "low", "none")] == ["medium", "low", "low", "low"]
    assert [lower(GLM, e) for e in ("high", "none")] == ["none", "none"]


def test_cut_off_only_counts_when_reasoning_spent_the_room() -> None:
    assert cut_off_while_reasoning("length", 900)
    assert not cut_off_while_reasoning("length", 0)  # a long answer, not a reasoning problem
    assert not cut_off_while_reasoning("stop", 900)


def test_retry_after_a_cut_off_asks_with_less_effort_and_more_room() -> None:
    retry = cutoff_retry(GPT, "medium", 4096, 4096)
    assert (retry.effort, retry.max_tokens) == ("low", 8192)
    assert "4096 tokens of reasoning" in retry.note
    assert "low reasoning effort instead of medium" in retry.note
    assert "8192 tokens instead of 4096" in retry.note
    # At the bottom already, only the room grows; and the room is bounded.
    bottom = cutoff_retry(GPT, "low", MAX_RETRY_TOKENS, 100)
    assert (bottom.effort, bottom.max_tokens) == ("low", MAX_RETRY_TOKENS)
    assert "the same settings" in bottom.note
    glm = cutoff_retry(GLM, "medium", 4096, 4000)
    assert glm.effort == "none"
