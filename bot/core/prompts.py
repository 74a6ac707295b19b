"""Chat messages for each task kind, rendered by pure functions from ``prompts.toml`` (one table per task).

The text is package data read with ``tomllib``; every part is a ``string.Template`` filled with named fields.

Every message is redacted (``bot.core.secrets.redact``) as the last step, so no code path can send a secret.
Text from users, the repository or the pull request is wrapped by ``context.quote`` as inert data.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template

from bot.core.secrets import redact
from bot.core.types import SEVERITY_ORDER, Severity
from bot.core.window import Coverage, CoverageStatus, FileView, Limits, estimate_tokens, quote, skipped
from bot.core.wording import plural

Messages = list[dict[str, str]]
# Chat framing (role markers, separators) costs a few tokens per message on top of the content.
MESSAGE_OVERHEAD_TOKENS = 4
DEFAULT_MAX_FINDINGS = 5


@dataclass(frozen=True, slots=True)
class PullRequestText:
    """The pull request's own words: context for the model, always quoted as data."""

    title: str = ""
    body: str = ""


@dataclass(frozen=True, slots=True)
class ThreadText:
    """A review thread: the code it is about (an excerpt of the file) and its comments as (author, body)."""

    code: str
    comments: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Request:
    """Messages ready for the SDK, their token estimate, and what the model saw of the file."""

    messages: Messages
    prompt_tokens: int
    coverage: Coverage


def template(task: str, part: str) -> Template:
    """Return the template of ``part`` of ``task`` in ``prompts.toml`` (package data)."""
    return Template(_tables()[task][part])


def fix_messages(
    view: FileView,
    instruction: str,
    pr: PullRequestText | None = None,
    history: str = "",
    elsewhere: str = "",
) -> Messages:
    """Return messages asking for SEARCH/REPLACE edits of ``view.path`` that satisfy ``instruction``.

    ``history`` is the pull request's session (``bot.core.session.history_text``): earlier fixes a
    follow-up refines, and the words of fixes this one superseded. ``elsewhere``: code from other files
    (``bot.core.crossref``).
    """
    system = _system("fix", view, template("fix", "format").substitute(edit_format=_edit_format(view)))
    user = template("fix", "user").substitute(
        file=_file(view) + elsewhere_text(elsewhere),
        context=_pr_context(pr) + history,
        request=quote("requested change", instruction),
    )
    return _messages(system, user)


def review_messages(
    view: FileView,
    pr: PullRequestText | None = None,
    *,
    min_severity: Severity = "low",
    instructions: str = "",
    max_findings: int = DEFAULT_MAX_FINDINGS,
    elsewhere: str = "",
) -> Messages:
    """Return messages asking for findings (or NO_FINDINGS) about the changes shown in ``view``.

    ``elsewhere``: code from other files (``bot.core.crossref``).
    """
    allowed = SEVERITY_ORDER[: SEVERITY_ORDER.index(min_severity) + 1]
    severities = " or ".join(allowed) if len(allowed) <= 2 else ", ".join(allowed[:-1]) + " or " + allowed[-1]
    fmt = template("review", "format").substitute(
        max_findings=max_findings, severities=severities, edit_format=_edit_format(view)
    )
    context = _pr_context(pr)
    if instructions.strip():
        context += "Review guidance from the repository's configuration:\n"
        context += quote("repository instructions", instructions) + "\n"
    # Code from other files comes with how a finding points at a line of it.
    shown = elsewhere_text(elsewhere)
    if shown:
        shown += template("review", "elsewhere").substitute() + "\n"
    user = template("review", "user").substitute(
        file=_file(view) + shown, context=context, path=_inline(view.path)
    )
    return _messages(_system("review", view, fmt), user)


def thread_fix_messages(
    view: FileView,
    thread: ThreadText,
    instruction: str = "",
    pr: PullRequestText | None = None,
    history: str = "",
) -> Messages:
    """Return messages asking for edits that resolve one review thread about ``thread.code`` (``history``:
    as for ``fix_messages``)."""
    # A thread fix answers in a fix's format.
    fmt = template("fix", "format").substitute(edit_format=_edit_format(view))
    system = _system("thread_fix", view, fmt)
    # One quoted block per comment, so a comment cannot forge another author's turn.
    comments = "\n".join(quote(f"comment by {author}", body) for author, body in thread.comments)
    request = ""
    if instruction.strip():
        request = "The requested change:\n" + quote("requested change", instruction) + "\n"
    user = template("thread_fix", "user").substitute(
        file=_file(view),
        context=_pr_context(pr) + history,
        path=_inline(view.path),
        lines=quote("thread lines", thread.code),
        thread=comments or "(no comments)",
        request=request,
    )
    return _messages(system, user)


def ask_messages(
    question: str,
    diff: str,
    views: Sequence[FileView],
    pr: PullRequestText | None = None,
    thread: tuple[str, ThreadText] | None = None,
    history: str = "",
    elsewhere: str = "",
) -> Messages:
    """Return messages asking for an answer to ``question`` about the pull request (``/spark ask``, a reply).

    ``diff`` is the pull request's redacted changes as text, ``views`` the files shown (a thread's file
    first), ``thread`` the path and lines a review thread is about, with its comments: they come first.
    ``history`` is the pull request's session (``bot.core.session.history_text``): earlier questions,
    answers and fixes a follow-up question may refer to.
    """
    files = "".join(_file(view) for view in views if view.text) + elsewhere_text(elsewhere)
    thread_text = ""
    if thread is not None:
        path, about = thread
        comments = "\n".join(quote(f"comment by {author}", body) for author, body in about.comments)
        thread_text = (
            f"The question was asked in a review thread about these lines of `{_inline(path)}`:\n"
            + quote("thread lines", about.code)
            + "\n"
            + (f"The thread so far:\n{comments}\n" if comments else "")
        )
    user = template("ask", "user").substitute(
        context=_pr_context(pr) + history,
        thread=thread_text,
        diff=quote("pull request changes", diff) if diff.strip() else "(no textual changes)",
        files=files,
        question=quote("question", question),
    )
    return _messages(template("ask", "system").substitute(), user)


def retry_messages(
    messages: Messages, answer: str, errors: Sequence[str], *, applied: int = 0, fallback: str = "NO_CHANGES"
) -> Messages:
    """Return ``messages`` plus the model's ``answer`` and a user turn listing what failed (apply, verify).

    ``applied`` counts the blocks that did apply, so the model does not resend them.
    """
    listed = "\n".join(f"- {error.strip()}" for error in errors if error.strip()) or "- the answer was empty"
    done = f"The other {plural(applied, 'block')} applied and are in the file now; do not resend them.\n"
    done = done if applied else ""
    user = template("retry", "user").substitute(errors=listed, applied=done, fallback=fallback)
    return [*messages, *_messages_of(("assistant", answer), ("user", user))]


def escalation_messages(messages: Messages, errors: Sequence[str]) -> Messages:
    """Return the same request for the deep model, with what went wrong in the fast model's answers."""
    listed = "\n".join(f"- {error.strip()}" for error in errors if error.strip()) or "- the answer was empty"
    return [*messages, *_messages_of(("user", template("escalate", "user").substitute(errors=listed)))]


def prompt_tokens(messages: Messages) -> int:
    """Return the token estimate of ``messages`` as sent."""
    return sum(estimate_tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def fit_request(
    build: Callable[[FileView], Messages], make_view: Callable[[int], FileView], limits: Limits
) -> Request:
    """Build a request whose file view fills exactly the budget the rest of the prompt leaves.

    ``build`` renders messages around a view (e.g. ``lambda v: fix_messages(v, text)``); ``make_view`` builds
    the view for a token budget (e.g. ``lambda b: fix_view(path, text, b)``). The prompt is measured with an
    empty view, so the budget is min(context, cap) - prompt - completion reserve. When nothing of the file
    fits, ``messages`` is empty (do not call the model) and the coverage says why.
    """
    probe = make_view(10**9)
    empty = FileView(probe.path, "", 0, probe.coverage, probe.whole_file, (), probe.marked)
    overhead = prompt_tokens(build(empty))
    budget = limits.budget(overhead)
    ceiling = limits.budget(0)
    window = min(limits.model_context, limits.cap)
    if budget <= 0:
        return Request(
            [],
            0,
            skipped(
                probe.path,
                f"the prompt alone ({overhead} tokens) leaves no room for code in a {window}-token context "
                f"with {limits.completion_reserve} tokens kept for the answer",
            ),
        )

    def fitted(size: int) -> Request | None:
        """Return the request for a view of ``size`` tokens if it fits the context, else None."""
        view = make_view(size)
        if view.coverage.status is CoverageStatus.SKIPPED:
            return None
        messages = build(view)
        tokens = prompt_tokens(messages)
        return Request(messages, tokens, view.coverage) if tokens <= ceiling else None

    # The framing differs a little by view kind (whole file, windows, diff): shrink by any excess. Views are
    # cut at whole lines, so a few tokens less may change nothing: then bisect for the largest that fits.
    low, high = 0, budget
    for _ in range(3):
        view = make_view(budget)
        if view.coverage.status is CoverageStatus.SKIPPED:
            return Request([], 0, view.coverage)
        messages = build(view)
        excess = prompt_tokens(messages) - ceiling
        if excess <= 0:
            return Request(messages, prompt_tokens(messages), view.coverage)
        high = budget - 1
        budget -= excess
        if budget <= 0:
            break
    best: Request | None = None
    while low < high:
        middle = (low + high + 1) // 2
        request = fitted(middle)
        if request is None:
            high = middle - 1
        else:
            low, best = middle, request
    if best is not None:
        return best
    return Request(
        [],
        0,
        skipped(
            probe.path,
            f"not even part of the file fits: the prompt takes {overhead} of {window} tokens and "
            f"{limits.completion_reserve} are kept for the answer",
        ),
    )


# --------------------------------------------------------------------------------------------------------


@cache
def _tables() -> dict[str, dict[str, str]]:
    """Return ``prompts.toml``: a table per task, a template per part."""
    text = resources.files("bot.core").joinpath("prompts.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def _kind(view: FileView) -> str:
    if view.whole_file:
        return "whole"
    return "diff" if view.marked else "windows"


def _edit_format(view: FileView) -> str:
    copy_rule = _tables()["views"][f"copy_{_kind(view)}"]
    return template("edit_format", "rules").substitute(copy_rule=copy_rule).replace(" \n", "\n")


def _system(task: str, view: FileView, fmt: str) -> str:
    path = _inline(view.path)
    frame = template("system", "frame")
    return frame.substitute(task=template(task, "task").substitute(path=path), path=path, format=fmt)


def elsewhere_text(code: str) -> str:
    """Return the section showing code from other files (``bot.core.crossref``), or "" when there is none."""
    if not code:
        return ""
    return template("views", "elsewhere").substitute() + "\n" + quote("code from other files", code) + "\n"


def _file(view: FileView) -> str:
    intro = template("views", _kind(view)).substitute(path=_inline(view.path))
    return intro + "\n" + quote(f"file {view.path}", view.text) + "\n"


def _pr_context(pr: PullRequestText | None) -> str:
    if pr is None:
        return ""
    parts = []
    if pr.title.strip():
        parts.append(quote("pull request title", pr.title))
    if pr.body.strip():
        parts.append(quote("pull request description", pr.body))
    if not parts:
        return ""
    return "The pull request, for context only:\n" + "\n".join(parts) + "\n"


def _inline(text: str) -> str:
    """Return ``text`` safe inside a one-line backtick span: no newlines, control characters or backticks."""
    return re.sub(r"[\x00-\x1f\x7f`\u2028\u2029]", "_", text)[:300]


def _messages(system: str, user: str) -> Messages:
    return _messages_of(("system", system), ("user", user))


def _messages_of(*turns: tuple[str, str]) -> Messages:
    # The one place text leaves the core for the model: redact here so no caller can forget.
    return [{"role": role, "content": redact(content).text} for role, content in turns]
