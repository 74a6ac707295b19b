"""How much a reasoning model thinks before it answers: the effort per task, what each model accepts.

Cerebras' reasoning models reason before the first token of content unless told otherwise, and
``max_completion_tokens`` counts those tokens. gpt-oss takes ``reasoning_effort`` low, medium (its default)
or high and refuses ``none``; GLM reasons unless ``reasoning_effort`` is ``none`` (its older
``disable_reasoning`` is deprecated), and takes no levels in between. Other models get no reasoning
parameter at all. Reasoning is always asked for apart from the content (``reasoning_format: parsed``): it
never reaches a reply, and its deltas still show when the first token of any kind arrived.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Effort = Literal["none", "low", "medium", "high"]
Task = Literal["fix", "ask", "describe", "review", "escalate"]
EFFORTS: tuple[Effort, ...] = get_args(Effort)
TASKS: tuple[Task, ...] = get_args(Task)

# A quick fix, an answer and a summary want the first token of content soon; a review and the deep
# model's one attempt at a fix the fast model could not make are worth more thought.
DEFAULT_EFFORTS: dict[Task, Effort] = {
    "fix": "low",
    "ask": "low",
    "describe": "low",
    "review": "medium",
    "escalate": "high",
}
REASONING_FORMAT = "parsed"
# The most room a retry after a cut-off asks for (Cerebras' largest output is of this order).
MAX_RETRY_TOKENS = 65536


@dataclass(frozen=True, slots=True)
class Family:
    """A family of reasoning models: the model-name prefix and the efforts it accepts, lowest first."""

    prefix: str
    accepts: tuple[Effort, ...]
    # What the model does when no effort is sent (said in replies; never sent).
    default: Effort


FAMILIES = (
    Family("gpt-oss-", ("low", "medium", "high"), "medium"),
    Family("zai-glm-", ("none",), "medium"),
)


def family(model: str) -> Family | None:
    """Return the reasoning family of ``model``, or None for a model that does not reason."""
    return next((f for f in FAMILIES if model.startswith(f.prefix)), None)


def sent_effort(model: str, effort: Effort) -> Effort | None:
    """Return the effort to send ``model`` for ``effort``, or None to send none (its default applies).

    An effort the model does not take becomes the nearest it does: ``none`` becomes gpt-oss's ``low``; a
    level GLM does not take leaves GLM at its default.
    """
    found = family(model)
    if found is None:
        return None
    if effort in found.accepts:
        return effort
    if effort == "none":
        return found.accepts[0]
    return None


def reasoning_options(model: str, effort: Effort) -> dict[str, str]:
    """Return the request parameters for ``model`` at ``effort`` (empty for a model that does not reason)."""
    if family(model) is None:
        return {}
    options = {"reasoning_format": REASONING_FORMAT}
    sent = sent_effort(model, effort)
    if sent is not None:
        options["reasoning_effort"] = sent
    return options


def effective_effort(model: str, effort: Effort) -> Effort:
    """Return the effort ``model`` actually reasons at when asked for ``effort`` ("none" if it never does)."""
    found = family(model)
    if found is None:
        return "none"
    return sent_effort(model, effort) or found.default


def cut_off_while_reasoning(finish_reason: str, reasoning_tokens: int) -> bool:
    """Return whether an answer hit the length limit after spending tokens on reasoning."""
    return finish_reason == "length" and reasoning_tokens > 0


def lower(model: str, effort: Effort) -> Effort:
    """Return the next effort below what ``model`` reasons at for ``effort`` (itself at the bottom)."""
    current = effective_effort(model, effort)
    # GLM's only other setting is no reasoning at all; gpt-oss bottoms out at low.
    for below in reversed(EFFORTS[: EFFORTS.index(current)]):
        if effective_effort(model, below) != current:
            return effective_effort(model, below)
    return current


@dataclass(frozen=True, slots=True)
class Retry:
    """The second ask after a cut-off: its effort and room, and the sentence the reply carries."""

    effort: Effort
    max_tokens: int
    note: str


def cutoff_retry(model: str, effort: Effort, max_tokens: int, reasoning_tokens: int) -> Retry:
    """Return how to ask again after ``model`` ran out of ``max_tokens`` while reasoning: less effort and
    twice the room (at most ``MAX_RETRY_TOKENS``)."""
    before = effective_effort(model, effort)
    after = lower(model, effort)
    room = min(MAX_RETRY_TOKENS, max_tokens * 2)
    changes = []
    if after != before:
        changes.append(f"{after} reasoning effort instead of {before}")
    if room > max_tokens:
        changes.append(f"room for {room} tokens instead of {max_tokens}")
    note = (
        f"The model's first answer was cut off at the length limit after {reasoning_tokens} tokens of "
        f"reasoning, so I asked again once with {' and '.join(changes) or 'the same settings'}."
    )
    return Retry(after, room, note)
