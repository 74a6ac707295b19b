"""Ask the model for one file's edit and judge it, with one retry that carries the errors back.

Shared by ``/spark fix`` (commit or suggestions) and reviews (verified replacements for findings).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.adapters.github_port import GitHubPort
from bot.core.config import RepoConfig
from bot.core.fixes import Attempt, judge_answers
from bot.core.ignore import DEFAULT_MAX_BYTES
from bot.core.prompts import Messages, Request, escalation_messages, fit_request, retry_messages
from bot.core.render import code
from bot.core.secrets import redact_file
from bot.core.window import FileView, Limits
from bot.metrics import FIX_ESCALATIONS
from workers.context import JobContext
from workers.timings import ms


@dataclass(frozen=True, slots=True)
class Escalation:
    """A file the fast model could not fix after its retry, asked once of the deep model; both timings."""

    fast_model: str
    deep_model: str
    # Seconds: every call of the fast model on this file, and the deep model's one call.
    fast: float
    deep: float
    verified: bool


@dataclass(frozen=True, slots=True)
class EditOutcome:
    """The judged result for one file, the answers that produced it, and what the model saw."""

    attempt: Attempt
    answers: tuple[str, ...]
    coverage_reason: str = ""
    # The (redacted) text the model saw, to judge the answers again (a moved branch, routed blocks).
    shown: str = ""
    escalation: Escalation | None = None


@dataclass(frozen=True, slots=True)
class Fitted:
    """A file's first request, fitted to the model's room, and the (redacted) text of the file it shows."""

    shown: str
    request: Request


def fit_edit(
    limits: Limits,
    path: str,
    original: str,
    build: Callable[[FileView], Messages],
    make_view: Callable[[str, int], FileView],
) -> Fitted:
    """Return the first request for an edit of ``path``: ``make_view(shown_text, budget)`` builds the file
    view from the redacted text the model may see, ``build`` the messages around it."""
    shown = redact_file(path, original).text
    return Fitted(shown, fit_request(build, lambda budget: make_view(shown, budget), limits))


def propose_edit(
    ctx: JobContext,
    path: str,
    original: str,
    build: Callable[[FileView], Messages],
    make_view: Callable[[str, int], FileView],
    *,
    model: str,
    config: RepoConfig,
    targets: Sequence[str] = (),
    deep_model: str | None = None,
    fitted: Fitted | None = None,
) -> EditOutcome:
    """Get an edit of ``path`` from the model, judge it, and retry once with the errors if it failed.

    ``make_view(shown_text, budget)`` builds the file view from the redacted text the model may see;
    ``targets`` are all files of this fix (blocks the answer addresses to one of them are routed there).
    The first answer and the retry are judged together: the file changes only if every block applied.
    With ``deep_model``, an edit that still fails after the retry is asked once of that model: the same
    request and the errors, its answer judged on its own. ``fitted`` is the first request when the caller
    fitted it already (``fit_edit`` with the same arguments).
    """
    fitted = fitted or fit_edit(ctx.limits, path, original, build, make_view)
    shown, request = fitted.shown, fitted.request
    if not request.messages:
        reason = request.coverage.reason or "the file does not fit the model's context"
        return EditOutcome(Attempt(path, None, (reason,), failed=(reason,)), (), reason, shown)
    messages = request.messages
    answers: list[str] = []
    attempt = Attempt(path, None, ("no answer",))
    fast = 0.0
    for _ in range(2):
        completion = ctx.complete(messages, model, "fix", config)
        fast += completion.total
        answers.append(completion.text)
        attempt = judge_answers(
            path,
            original,
            shown,
            answers,
            truncated=completion.finish_reason == "length",
            targets=targets,
        )
        if attempt.ok or attempt.no_changes:
            break
        messages = retry_messages(messages, completion.text, attempt.errors, applied=attempt.applied)
    if attempt.ok or attempt.no_changes or not deep_model or deep_model == model:
        return EditOutcome(attempt, tuple(answers), shown=shown)
    deep = ctx.complete(escalation_messages(request.messages, attempt.errors), deep_model, "escalate", config)
    truncated = deep.finish_reason == "length"
    judged = judge_answers(path, original, shown, [deep.text], truncated=truncated, targets=targets)
    escalation = Escalation(model, deep_model, fast, deep.total, judged.ok)
    FIX_ESCALATIONS.labels("verified" if judged.ok else "failed").inc()
    ctx.log.info(
        "edit.escalated",
        path=path,
        model=deep_model,
        verified=judged.ok,
        fast_ms=round(ms(fast)),
        deep_ms=round(ms(deep.total)),
    )
    if judged.ok or judged.no_changes:
        # The deep answer stands alone: judged again (a moved branch, routed blocks) without the fast ones.
        return EditOutcome(judged, (deep.text,), shown=shown, escalation=escalation)
    return EditOutcome(judged, (*answers, deep.text), shown=shown, escalation=escalation)


def escalation_note(path: str, escalation: Escalation) -> str:
    """Return the reply's line on a file handed to the deep model: both models, both timings, the result."""
    outcome = "its edit is the one verified here" if escalation.verified else "its answer failed too"
    return (
        f"{code(path)}: the fast model ({code(escalation.fast_model)}, {ms(escalation.fast):.0f} ms) failed "
        f"even after its retry, so I asked the deep model ({code(escalation.deep_model)}, "
        f"{ms(escalation.deep):.0f} ms) once; {outcome}."
    )


def read_target(gh: GitHubPort, repo: str, ref: str, path: str) -> str | None:
    """Read a file to fix: a regular text file within the review's size limit (else ``Unreadable``)."""
    return gh.file_text(repo, path, ref, max_bytes=DEFAULT_MAX_BYTES)
