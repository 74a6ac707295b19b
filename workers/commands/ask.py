"""``/spark ask`` and replies in Spark's threads: an answer with permalinks, at most once per comment.

The critical path is two sequential GitHub round trips around the model call:
1. at once: 👀 on the comment, the pull request, its diff (and the thread's comments, in a thread), and,
   read ahead on what Spark last saw of the pull request (``workers.memory.last_seen``), the files to show
   at its head and the repository config at its base;
   (the model answers; the core resolves its quotes to lines and renders the reply)
2. the reply.
A read ahead is kept only where the pull request agrees (same head, same base); the files it could not
guess (never seen, a new push, a path the question names for the first time) are read once the pull request
and its diff are in: a third round trip, as every answer took before. The budget is counted after the reads.
The answer's comment id is recorded under the command comment's id; a re-run (RQ retry, redelivery) finds the
record, or its marked reply on GitHub, and posts nothing again.
The pure parts are ``bot.core.ask``; the hour's budgets ``workers.memory.budgets``.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from bot import keys
from bot.adapters.cerebras import ModelError
from bot.adapters.github_port import GitHubError, PullDiff, PullInfo, RateLimited, Unreadable
from bot.cancel import STOPPED, Cancelled
from bot.core import crossref, markers
from bot.core import session as conversation
from bot.core.ask import MAX_FILES, diff_text, parse_answer, render_answer
from bot.core.config import RepoConfig
from bot.core.diff import parse_diff
from bot.core.edits import decode_source
from bot.core.ignore import DEFAULT_MAX_BYTES
from bot.core.prompts import PullRequestText, ThreadText, ask_messages, prompt_tokens
from bot.core.render import code, prose
from bot.core.secrets import redact_diff, redact_file
from bot.core.targets import named_paths
from bot.core.types import Diff
from bot.core.window import CoverageStatus, FileView, excerpt, fix_view
from bot.core.wording import plural
from bot.index.context import PullIndex, open_index, ready_index
from bot.refs import CommandRef
from workers.commands.command import Command
from workers.context import JobContext
from workers.flows.parallel import submit
from workers.flows.read_ahead import ReadAhead
from workers.memory import last_seen
from workers.memory import session as sessions
from workers.memory.budgets import spend_question
from workers.memory.last_seen import Seen
from workers.reply import Reply

HELP = (
    "`/spark ask <question>`: answer a question about this pull request's code, with links to the lines "
    "(anyone who can comment; also a plain reply in one of Spark's review threads)"
)


@dataclass(frozen=True, slots=True)
class Thread:
    """A review thread a question was asked in: its first comment and everyone's comments, oldest first."""

    root_id: int
    root_author: str
    root_body: str
    comments: tuple[tuple[str, str], ...]
    # 👎 reactions on Spark's comments in the thread (the rollup GitHub embeds in each comment).
    thumbs_down: int = 0


@dataclass
class AskRun:
    """One answer being made: its context, the command, the question, and what it learned on the way."""

    ctx: JobContext
    command: CommandRef
    question: str
    thread: Thread | None
    started: float
    rerun: bool = False
    notes: list[str] = field(default_factory=list)
    # Said before the answer (a 👎 just read as a dismissal).
    preface: str = ""
    # What the prompt shows of the pull request's session with Spark.
    history: str = ""
    # Files of the repository the answer was shown code from (the index's), as shown: quotes link to them.
    elsewhere: dict[str, str] = field(default_factory=dict)

    @property
    def on_thread(self) -> bool:
        """Return whether the question was asked in a review thread."""
        return self.command.kind == "review_comment" and self.command.thread_id is not None

    def entry(self) -> conversation.Entry:
        """Return this command's entry in the pull request's session (answered, once it is)."""
        command = self.command
        return conversation.Entry(
            id=conversation.entry_id(command.name, command.comment_id),
            command=command.name,
            author=command.author,
            text=self.question,
            order=command.comment_id,
        )

    def reply(self) -> Reply:
        """Return the reply to this question: in its thread or the conversation, once."""
        return Reply(self.ctx, self.command, "ask", rerun=self.rerun)


def run_ask(
    ctx: JobContext,
    command: CommandRef,
    *,
    question: str | None = None,
    thread: Thread | None = None,
    pull: PullInfo | None = None,
    config: RepoConfig | None = None,
    preface: str = "",
) -> str:
    """Answer ``command`` (``/spark ask``, or a reply in Spark's thread when ``question`` is given)."""
    began = time.perf_counter()
    gh, repo, number = ctx.github, ctx.repo, ctx.pr.number
    run = AskRun(ctx, command, (command.text if question is None else question).strip(), thread, began)
    run.preface = preface
    # Round trip 1 leaves before anything else, Redis included: 👀 is the user's first sign of life (a
    # re-run sends it again, which GitHub takes as the same reaction, and reads what it then does not use).
    with ctx.timings.span("github_read"):
        eyes = submit(
            gh.react, repo, command.comment_id, "eyes", review_comment=command.kind == "review_comment"
        )
        pull_f = submit(gh.pull, repo, number) if pull is None else None
        diff_f = submit(gh.pull_diff, repo, number)
        thread_f = submit(load_thread, ctx, command.thread_id) if run.on_thread and thread is None else None
        ahead = read_ahead(run, last_seen.recall(ctx.redis, ctx.pr.key), pull, config is None)
    # While round trip 1 is out: earlier questions, answers and fixes on this pull request, for a follow-up
    # ("and what about the caller?").
    run.history = conversation.history_text(sessions.load(ctx.redis, ctx.pr.key), run.entry())
    if already_answered(ctx, command.comment_id):
        ctx.log.info("ask.already_answered")
        return "already answered"
    run.rerun = not ctx.redis.set(
        keys.ASK_STARTED.format(command.comment_id), ctx.job_id or "1", nx=True, ex=keys.ASK_STARTED.seconds
    )
    try:
        if pull is None:
            assert pull_f is not None
            pull = pull_f.result()
        if thread_f is not None:
            run.thread = thread_f.result()
        outcome = _answer(run, pull, diff_f, config, ahead)
        eyes.result()
        return outcome
    except Cancelled as exc:
        ctx.log.info("ask.cancelled", reason=exc.reason, by=exc.by)
        if exc.by != command.author:
            who = (
                f"{exc.by} stopped it with `/spark stop`" if exc.by and exc.reason == STOPPED else exc.reason
            )
            _post(run, f"@{command.author}, I did not finish this answer: {prose(who)}.")
        return "cancelled"
    except ModelError as exc:
        ctx.log.warning("ask.model_error", kind=exc.kind, detail=exc.detail)
        _post(run, f"The model call failed: {prose(exc.user_message)} Ask again to retry.")
        return "failed"
    except RateLimited:
        raise  # the job is deferred until GitHub's wait is over, then runs again (see workers/jobs.py)
    except GitHubError as exc:
        ctx.log.warning("ask.github_error", status=exc.status, message=exc.message)
        if exc.status == 404:
            return "gone"
        _post(run, f"GitHub refused a call ({exc.status}: {prose(exc.message)}). Ask again to retry.")
        return "failed"


def already_answered(ctx: JobContext, comment_id: int) -> bool:
    """Return whether this command comment's answer was posted (its comment id is recorded)."""
    return ctx.redis.exists(keys.ASK_ANSWERED.format(comment_id)) > 0


def _answer(
    run: AskRun, pull: PullInfo, diff_f: Future[PullDiff], config: RepoConfig | None, ahead: ReadAhead[Shown]
) -> str:
    ctx, command = run.ctx, run.command
    # The repository's index at the head: who uses and where is defined what the question names.
    indexing = open_index(ctx.github, ctx.settings, ctx.redis, pull.base_repo, pull.head_sha)
    diff = redacted(parse_diff(diff_f.result().text))
    changed = diff.readable_paths()
    paths, missing = _paths(run.question, changed, command.path if run.on_thread else None)
    last_seen.remember(ctx.redis, ctx.pr.key, pull, changed, ahead.seen)
    # The reads ahead that hold; the rest now (a second read round trip, only when the guess fell short).
    with ctx.timings.span("github_read"):
        texts = {p: ahead.file(pull, p) for p in paths}
        if config is None:
            config = ahead.repo_config(ctx.github, pull).config
        read = {p: f.result() for p, f in texts.items()}
    ctx.log.info("ask.read", ahead=len(ahead.held(pull).keys() & read.keys()), files=len(read))
    shown = {p: r for p, r in read.items() if isinstance(r, str)}
    run.notes += _unread_notes(read, missing, pull.head_sha[:7])
    # The budget is counted in Redis while the prompt is built; the model is asked only within it.
    spending = submit(over_budget, ctx, command, config)
    ctx.cancel.check()
    index = ready_index(indexing, ctx.settings, pull.base_repo, pull.base_sha, ctx.github.secrets)
    messages = _messages(run, pull, diff, shown, index)
    spent = spending.result()
    if spent is not None:
        if spent:
            _post(run, spent, budget=True)
        return "over budget"
    model = config.model_fast or ctx.settings.spark_model_fast
    with ctx.timings.span("model"):
        completion = ctx.complete(messages, model, "ask", config)
    ctx.cancel.check()
    rendered = render_answer(
        parse_answer(completion.text),
        {**run.elsewhere, **shown},
        repo=pull.base_repo,
        sha=pull.head_sha,
        timings=_timings(run),
        web=ctx.settings.github_url,
        notes=[*run.notes, *ctx.timings.notes],
    )
    body = "\n\n".join(p for p in (run.preface, rendered.body) if p)
    _post(run, body)
    # The session keeps the answer: a follow-up (`/spark fix` "do what you said", a question) is shown it.
    sessions.record(
        ctx.redis, ctx.pr.key, replace(run.entry(), outcome=conversation.ANSWERED, answer=rendered.body)
    )
    ctx.log.info("ask.answered", cited=rendered.cited, dropped=rendered.dropped, **_timings(run))
    return "answered"


def redacted(diff: Diff) -> Diff:
    """Return the diff as the model may see it (secrets redacted on both sides)."""
    return Diff(tuple(redact_diff(f) for f in diff.files))


def read_ahead(run: AskRun, seen: Seen | None, pull: PullInfo | None, config: bool) -> ReadAhead[Shown]:
    """Start reading, at the head and base last seen (or of ``pull``, when known), what the answer will show.

    The files are those ``_paths`` would pick if the pull request still changed the paths last seen.
    """
    if pull is not None:
        seen = Seen(pull.head_sha, pull.base_repo, pull.base_ref, seen.paths if seen is not None else ())
    paths, _ = _paths(
        run.question, list(seen.paths) if seen else [], run.command.path if run.on_thread else None
    )
    return ReadAhead.start(run.ctx.github, seen, paths, partial(_read, run.ctx), config=config)


def _paths(question: str, changed: list[str], thread_path: str | None) -> tuple[list[str], list[str]]:
    """Return the files to show (the thread's, those the question names, then the changed ones) and named
    ones that are nowhere to be read (outside the repository)."""
    named = named_paths(question, changed)
    missing = [p for p in named if p.startswith(("/", "~", "../")) or ".." in p.split("/")]
    wanted = [p for p in [thread_path, *named, *changed] if p and p not in missing]
    return list(dict.fromkeys(wanted))[:MAX_FILES], missing


def _unread_notes(read: dict[str, Shown], missing: list[str], sha: str) -> list[str]:
    """Say which files the answer could not be shown, and why."""
    notes = [f"{code(p)} is not in this repository at {sha}; I could not read it." for p in missing]
    for path, result in read.items():
        if isinstance(result, Unreadable):
            notes.append(f"I did not read {code(result.path)}: it is {prose(result.reason)}.")
        elif result is None:
            notes.append(f"{code(path)} is not at {sha}; I could not read it.")
    return notes


# A file as read for the model: its redacted text, None when it is not there, or why it cannot be shown.
Shown = str | Unreadable | None


def _read(ctx: JobContext, repo: str, sha: str, path: str) -> Shown:
    """Return ``path`` at ``sha`` as the model may see it (redacted), None when absent, or why not shown."""
    try:
        data = ctx.github.file_text(repo, path, sha, max_bytes=DEFAULT_MAX_BYTES)
    except Unreadable as exc:
        return exc
    if data is None:
        return None
    text, _ = decode_source(data.encode("utf-8", "surrogateescape"))
    return redact_file(path, text).text


def _messages(
    run: AskRun, pull: PullInfo, diff: Diff, shown: dict[str, str], index: PullIndex
) -> list[dict[str, str]]:
    """Build the prompt: the thread first, the diff, each file in an equal share of the room, then the uses
    and definitions of what the question names, from the repository's index."""
    ctx, command = run.ctx, run.command
    limits = ctx.limits
    changes, cut = diff_text(diff)
    if cut:
        run.notes.append("The pull request's diff was too long to show whole; I saw its beginning.")
    pr_text = PullRequestText(pull.title, pull.body)
    about: tuple[str, ThreadText] | None = None
    focus: dict[str, tuple[tuple[int, int], ...]] = {}
    if run.on_thread and command.path and command.line is not None:
        start = command.start_line or command.line
        text = shown.get(command.path, "")
        comments = run.thread.comments if run.thread is not None else ()
        about = (command.path, ThreadText(excerpt(text, start, command.line), comments))
        focus[command.path] = ((start, command.line),)
    # The user's own comment, quoted as data ("/spark ask <question>"); a thread reply as they wrote it.
    question = f"/spark ask {run.question}" if command.name == "ask" else run.question
    history = run.history
    overhead = prompt_tokens(ask_messages(question, changes, (), pr_text, about, history))
    budget = crossref.context_budget(limits.budget(overhead), crossref.FIX_TOKENS)
    elsewhere = index.for_question(run.question, budget)
    if index.note and crossref.asked(run.question):
        run.notes.append(f"I answered without code from other files: {index.note.split(';')[0]}.")
    redacted = {p: redact_file(p, t) for p, t in index.texts(elsewhere.shown).items()}
    run.elsewhere = {p: r.text for p, r in redacted.items()}
    if index.secrets is not None:
        index.secrets.add(v for r in redacted.values() for v in r.values)
    if elsewhere.text:
        overhead = prompt_tokens(ask_messages(question, changes, (), pr_text, about, history, elsewhere.text))
    share = limits.budget(overhead) // max(1, len(shown))
    views: list[FileView] = []
    for path, text in shown.items():
        view = fix_view(path, text, share, file=diff.file(path), focus=focus.get(path, ()))
        if view.coverage.status is not CoverageStatus.REVIEWED:
            run.notes.append(f"I saw only part of {view.coverage.describe()}.")
        views.append(view)
    return ask_messages(question, changes, views, pr_text, about, history, elsewhere.text)


def load_thread(ctx: JobContext, thread_id: int | None) -> Thread | None:
    """Return the review thread whose first comment is ``thread_id``, with its comments, or None."""
    if thread_id is None:
        return None
    comments = ctx.github.review_comments(ctx.repo, ctx.pr.number)
    root = next((c for c in comments if c.id == thread_id), None)
    if root is None:
        return None
    members = [root, *(c for c in comments if c.in_reply_to_id == thread_id)]
    return Thread(
        root_id=root.id,
        root_author=root.author,
        root_body=root.body,
        # Spark's own comments lose their hidden markers: the model needs the words only.
        comments=tuple((c.author, markers.strip(c.body).strip()) for c in members),
        thumbs_down=sum(c.thumbs_down for c in members if ctx.github.is_own(c.author)),
    )


def _timings(run: AskRun) -> dict[str, float]:
    # Since the webhook was queued: the wait in the queue plus this job's own time.
    return run.ctx.timings.as_ms(total=run.ctx.timings.total(run.started))


def _post(run: AskRun, text: str, *, budget: bool = False) -> None:
    """Post the answer once and record its comment id (a re-run finds the record, or the marked reply).

    The polite "budget spent" reply is not an answer: a later re-run may still answer once the hour is over.
    """
    posted = run.reply().post(text, variant="budget" if budget else "")
    if posted is not None and not budget:
        run.ctx.redis.set(
            keys.ASK_ANSWERED.format(run.command.comment_id), posted.id, ex=keys.ASK_ANSWERED.seconds
        )


def over_budget(ctx: JobContext, command: CommandRef, config: RepoConfig) -> str | None:
    """Count the question against the hour's budgets; return None within them, else the polite reply to post
    ("" when it was posted already in this window: one per user and pull request, not one per comment)."""
    spent = spend_question(
        ctx.redis,
        ctx.pr.installation_id,
        ctx.pr.key,
        command.author,
        command.comment_id,
        (config.ask_user_budget, config.ask_pr_budget),
    )
    if spent is None:
        return None
    ctx.log.info("ask.over_budget", scope="user" if spent.user else "pr", told=spent.tell)
    if not spent.tell:
        return ""
    minutes = max(1, round(spent.seconds_left / 60))
    if spent.user:
        what = (
            f"you have used the {config.ask_user_budget} questions each person may ask Spark in an hour "
            "(`ask.user_budget` in `.github/spark.yml`)"
        )
    else:
        what = (
            f"this pull request has used the {config.ask_pr_budget} questions it may take in an hour "
            "(`ask.pr_budget` in `.github/spark.yml`)"
        )
    return (
        f"Sorry @{command.author}, {what}. I will answer again in about {plural(minutes, 'minute')}; "
        "until then I will not reply to each question."
    )


def handle(pr: dict[str, Any], ref: CommandRef) -> str:
    """``/spark ask``: an answer with permalinks, once, within the hour's budgets (anyone who can comment)."""
    # Never superseding: two questions on one pull request are both answered (a stop still cancels).
    return run_ask(JobContext.build(pr, kind="ask", claim=False, heard=ref.text), ref)


COMMAND = Command("ask", HELP, handle)
