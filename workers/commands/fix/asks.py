"""What a ``/spark fix`` asks the model for each target, built from the fix's inputs, and the asking.

Every input a target's request is made of (the file's text, its diff, the pull request's words, the
instruction, the session's history, the code from other files the index gives, the config and the models)
is a field of one ``FileRequest``: two requests that compare equal ask the model the same thing, and what
they ask is all the answer was made from. The fix builds its requests here from what GitHub answered; a fix
asked early (``workers.commands.fix.ahead``) builds them here from what the last one read, and its answers
stand only where the two sets are equal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from bot.core import crossref
from bot.core.config import RepoConfig
from bot.core.fixes import judge_answers
from bot.core.prompts import Messages, PullRequestText, ThreadText, fix_messages, thread_fix_messages
from bot.core.secrets import redact_diff, redact_file
from bot.core.session import Entry, Session, entry_id, history_text
from bot.core.types import Diff, FileDiff
from bot.core.window import FileView, excerpt, fix_view
from bot.index.context import PullIndex
from bot.refs import CommandRef
from workers.commands.fix.lands import routed_to
from workers.context import JobContext
from workers.flows.edit import EditOutcome, Fitted, fit_edit, propose_edit


@dataclass(frozen=True, slots=True)
class FileRequest:
    """Everything one target's model request and the judging of its answers are made of."""

    path: str
    text: str
    targets: tuple[str, ...]
    # The fast model, and the deep one a failed edit is handed to (None: no escalation).
    models: tuple[str, str | None]
    config: RepoConfig
    file_diff: FileDiff | None
    pr_text: PullRequestText
    history: str
    instruction: str
    # "/spark fix <what was asked>", as the prompt quotes it (a CI fix: the failures pointing to the file).
    request: str
    # In a review thread on lines of this file: the thread and the lines it is about.
    thread: ThreadText | None = None
    focus: tuple[tuple[int, int], ...] = ()
    # The code from other files the repository index gives for this file (rendered).
    elsewhere: str = ""


def session_entry(command: CommandRef, instruction: str) -> Entry:
    """Return the session entry a fix records for ``command``."""
    return Entry(
        id=entry_id("fix", command.comment_id),
        command="fix",
        author=command.author,
        text=instruction,
        order=command.comment_id,
    )


def shown_history(session: Session, entry: Entry) -> str:
    """Return the history a fix's prompt shows once ``entry`` is in ``session`` (a re-run keeps the first)."""
    if session.get(entry.id) is None:
        session = session.with_entry(entry)
    return history_text(session, session.get(entry.id) or entry)


def build_requests(
    ctx: JobContext,
    command: CommandRef,
    pr_text: PullRequestText,
    diff: Diff,
    config: RepoConfig,
    originals: Mapping[str, tuple[str, str]],
    instruction: str,
    history: str,
    index: PullIndex,
    asked: Mapping[str, str],
) -> dict[str, FileRequest]:
    """Return the request for every target of ``originals`` (path -> (text, encoding))."""
    settings = ctx.settings
    models = (
        config.model_fast or settings.spark_model_fast,
        (config.model_deep or settings.spark_model_deep) if config.escalate else None,
    )
    targets = tuple(originals)
    requests: dict[str, FileRequest] = {}
    for path, (text, _) in originals.items():
        file_diff = diff.file(path)
        common = FileRequest(
            path, text, targets, models, config, file_diff, pr_text, history, instruction, request=""
        )
        if command.kind == "review_comment" and command.line is not None and path == command.path:
            start = command.start_line or command.line
            thread = ThreadText(
                # Cut from the redacted file: the thread's lines follow the file's rules (a whole .env file).
                excerpt(redact_file(path, text).text, start, command.line),
                ((command.author, f"/spark fix {instruction}".strip()),),
            )
            requests[path] = replace(common, thread=thread, focus=((start, command.line),))
            continue
        # Definitions of what the file uses and uses of what changes in it, in their share of the room.
        budget = crossref.context_budget(ctx.limits.budget(0), crossref.FIX_TOKENS)
        elsewhere = index.for_fix(path, file_diff, instruction, budget)
        # The user's own comment, quoted as data: "/spark fix <what they asked>"; for CI, the failures that
        # point to this file and the log lines that show them.
        request = f"/spark fix {asked.get(path) or instruction or 'the problems in this file'}"
        requests[path] = replace(common, request=request, elsewhere=elsewhere.text)
    return requests


def _prompt(
    asked: FileRequest,
) -> tuple[Callable[[FileView], Messages], Callable[[str, int], FileView]]:
    """Return what builds one target's messages around a view of the file, and what builds that view."""
    build: Callable[[FileView], Messages]
    thread = asked.thread
    if thread is not None:

        def build(view: FileView) -> Messages:
            return thread_fix_messages(view, thread, asked.instruction, asked.pr_text, asked.history)
    else:

        def build(view: FileView) -> Messages:
            return fix_messages(view, asked.request, asked.pr_text, asked.history, asked.elsewhere)

    shown_diff = redact_diff(asked.file_diff) if asked.file_diff is not None else None

    def make_view(shown: str, budget: int) -> FileView:
        return fix_view(asked.path, shown, budget, file=shown_diff, focus=asked.focus)

    return build, make_view


def fit(ctx: JobContext, asked: FileRequest) -> Fitted:
    """Return one target's first request, fitted to the model's room."""
    return fit_edit(ctx.limits, asked.path, asked.text, *_prompt(asked))


def propose_one(ctx: JobContext, asked: FileRequest, fitted: Fitted | None = None) -> EditOutcome:
    """Ask the model for one target's edit (with its retry and escalation) and judge the answers;
    ``fitted`` is its first request when fitted already (``fit``)."""
    build, make_view = _prompt(asked)
    fast, deep = asked.models
    return propose_edit(
        ctx,
        asked.path,
        asked.text,
        build,
        make_view,
        model=fast,
        config=asked.config,
        targets=asked.targets,
        deep_model=deep,
        fitted=fitted,
    )


def judge_routed(
    outcomes: Mapping[str, EditOutcome], originals: Mapping[str, tuple[str, str]]
) -> dict[str, EditOutcome]:
    """Return ``outcomes`` with each file's answers judged again together with the blocks other targets'
    answers addressed to it, as one whole."""
    judged = dict(outcomes)
    for path, outcome in outcomes.items():
        routed = routed_to(path, dict(outcomes))
        if routed:
            attempt = judge_answers(
                path,
                originals[path][0],
                outcome.shown,
                outcome.answers,
                targets=tuple(originals),
                routed=routed,
            )
            judged[path] = replace(outcome, attempt=attempt)
    return judged
