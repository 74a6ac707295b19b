"""``/spark fix``: a verified commit on the pull request's branch about a second after the comment.

The critical path is kept to three sequential GitHub round trips around the model call:
1. at once: 👀 on the comment, the commenter's permission, the pull request, its diff and, read ahead on
   what Spark last saw of the pull request (``workers.flows.read_ahead``), the files the request will likely
   target at its head and the repository config at its base;
   (the model streams the edit; the core applies and verifies it)
2. ``createCommitOnBranch`` with ``expectedHeadOid`` (GitHub signs it and refuses it if the branch moved);
3. at once: the reply and 🚀.
What was not read ahead, or was read at a head or base the pull request no longer has, is read once the pull
request and its diff are in: one more round trip, as every fix took before.
A re-run of the same job (a worker died) first looks for its own earlier commit and reply, so the visible
result happens once. Here is the flow and its answers from the model; the commit or the suggestions are
``workers.flows.fix_commit``, what the user reads ``workers.flows.fix_replies``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import replace
from functools import partial
from typing import Any

from bot import keys
from bot.adapters.cerebras import ModelError
from bot.adapters.github_port import (
    GitHubError,
    PullInfo,
    PushRefused,
    RateLimited,
    Unreadable,
)
from bot.cancel import Cancelled
from bot.core import policy
from bot.core.config import RepoConfig
from bot.core.diff import parse_diff
from bot.core.edits import decode_source
from bot.core.fixes import (
    FileChange,
    check_notes,
    judge_answers,
    not_applied,
)
from bot.core.prompts import PullRequestText, ThreadText, fix_messages, thread_fix_messages
from bot.core.render import code, prose
from bot.core.secrets import redact_diff, redact_file
from bot.core.session import SUPERSEDED, Entry, history_text
from bot.core.targets import choose_targets, likely_targets, refusal_message, target_notes
from bot.core.types import Diff, FileDiff
from bot.core.window import FileView, excerpt, fix_view
from bot.refs import CommandRef
from workers import last_seen
from workers import session as sessions
from workers.context import JobContext
from workers.flows.edit import EditOutcome, escalation_note, propose_edit
from workers.flows.fix_commit import (
    DONE_KEY,
    RECORD_TTL,
    already_committed,
    already_suggested,
    commit,
    read_target,
    refused_reason,
    routed_to,
    suggest,
)
from workers.flows.fix_replies import FixFailed, cancelled_reply, send_reply, unreadable_reply
from workers.flows.fix_run import FixRun
from workers.flows.parallel import submit
from workers.flows.read_ahead import ReadAhead
from workers.flows.steering import verifier

STARTED_KEY = keys.FIX_STARTED.prefix


def run_fix(ctx: JobContext, command: CommandRef) -> str:
    """Run ``/spark fix``; return what happened (committed, suggested, refused, failed, cancelled, ...)."""
    began = time.perf_counter()
    repo, number, gh = ctx.repo, ctx.pr.number, ctx.github
    # Round trip 1 leaves before anything else, Redis included: 👀 is the user's first sign of life.
    with ctx.timings.span("github_read"):
        eyes = submit(
            gh.react, repo, command.comment_id, "eyes", review_comment=command.kind == "review_comment"
        )
        permission = submit(gh.permission, repo, command.author)
        pull_f = submit(gh.pull, repo, number)
        diff_f = submit(gh.pull_diff, repo, number)
        seen = last_seen.recall(ctx.redis, ctx.pr.key)
        thread_path = command.path if command.kind == "review_comment" else None
        ahead = ReadAhead.start(
            gh,
            seen,
            likely_targets(command.text, seen.paths if seen else (), thread_path),
            partial(read_target, gh),
        )
    started = ctx.redis.set(STARTED_KEY + str(command.comment_id), ctx.job_id or "1", nx=True, ex=RECORD_TTL)
    run = FixRun(ctx, command, rerun=not started, started=began, encodings={})
    try:
        done = ctx.redis.get(DONE_KEY + str(command.comment_id))
        if done is not None:
            ctx.log.info("fix.already_done", commit=done)
            return "already done"
        pull = pull_f.result()
        outcome = _fix(run, pull, diff_f, permission, ahead)
        eyes.result()
        return outcome
    except Cancelled as exc:
        ctx.log.info("fix.cancelled", reason=exc.reason, by=exc.by)
        run.outcome(SUPERSEDED if exc.reason.startswith("superseded") else "stopped")
        message = cancelled_reply(exc, command.author)
        if message:
            send_reply(run, message, reaction="confused")
        return "cancelled"
    except FixFailed as exc:
        ctx.log.info("fix.failed", reason=exc.message)
        run.outcome("failed")
        send_reply(run, exc.message, reaction="confused")
        return "failed"
    except Unreadable as exc:
        ctx.log.info("fix.unreadable", path=exc.path, reason=exc.reason)
        run.outcome("failed")
        send_reply(run, unreadable_reply(exc), reaction="confused")
        return "failed"
    except ModelError as exc:
        ctx.log.warning("fix.model_error", kind=exc.kind, detail=exc.detail)
        run.outcome("failed")
        send_reply(
            run,
            f"The model call failed: {prose(exc.user_message)} Comment `/spark fix` again to retry.",
            reaction="confused",
        )
        return "failed"
    except RateLimited:
        raise  # the job is deferred until GitHub's wait is over, then runs again (see workers/jobs.py)
    except GitHubError as exc:
        ctx.log.warning("fix.github_error", status=exc.status, message=exc.message)
        run.outcome("failed")
        if exc.status == 404:
            # The pull request (or repository) vanished: there is nowhere to reply.
            return "gone"
        send_reply(
            run,
            f"GitHub refused a call ({exc.status}: {prose(exc.message)}). "
            "Comment `/spark fix` again to retry.",
            reaction="confused",
        )
        return "failed"


def _fix(
    run: FixRun,
    pull: PullInfo,
    diff_f: Future[Any],
    permission: Future[str],
    ahead: ReadAhead[str | None],
) -> str:
    ctx, command = run.ctx, run.command
    if pull.state != "open":
        raise FixFailed("This pull request is closed; there is nothing to fix.")
    diff = parse_diff(diff_f.result().text)
    last_seen.remember(ctx.redis, ctx.pr.key, pull, diff.readable_paths(), ahead.seen)
    instruction = command.text.strip()
    thread_path = command.path if run.on_thread else None
    early = choose_targets(instruction, diff, thread_path=thread_path)
    # The files at the head and the config at the base, read ahead where that held, else now, side by side
    # (and the head's file list when the user named a file the diff does not have).
    with ctx.timings.span("github_read"):
        texts = {p: ahead.file(pull, p) for p in early.paths}
        tree_f = submit(run.gh.tree_paths, pull.base_repo, pull.head_sha) if early.unresolved else None
        config = ahead.repo_config(run.gh, pull).config
        level = permission.result()
    if not policy.permits(level, config.fix_permission):
        need = config.fix_permission
        raise FixFailed(
            f"Sorry @{command.author}, `/spark fix` needs {need} permission on this repository "
            f"(you have {level}). Ask a maintainer to run it."
        )
    tree, complete = tree_f.result() if tree_f is not None else (None, True)
    choice = choose_targets(
        instruction, diff, thread_path=thread_path, tree=tree, tree_complete=complete, selects=config.selects
    )
    if choice.refused:
        raise FixFailed(refusal_message(choice))
    if not choice.paths:
        raise FixFailed(
            "I found no file in this pull request that I may edit "
            "(workflow files, deleted files and paths excluded by `.github/spark.yml` are off limits)."
        )
    run.notes = target_notes(choice)
    # Allowed: only now may this fix supersede an older one still running, and obey others' asks.
    ctx.cancel.claim(by=command.author)
    ctx.cancel.verify = verifier(run.gh, ctx.repo, pull.author, config)
    if run.rerun and (already_committed(run, pull) or already_suggested(run, pull)):
        return "already done"
    _start_session(run, instruction)
    with ctx.timings.span("github_read"):
        for path in choice.paths:
            if path not in texts:  # named outside the diff, or the config excluded the first pick
                texts[path] = ahead.file(pull, path)
    originals: dict[str, tuple[str, str]] = {}
    for path in choice.paths:
        data = texts[path].result()
        if data is None:
            raise FixFailed(f"{code(path)} does not exist at the pull request's head {pull.head_sha[:7]}.")
        originals[path] = decode_source(data.encode("utf-8", "surrogateescape"))
        run.encodings[path] = originals[path][1]
    ctx.cancel.check()
    # The model's figures (time to first token, time, tokens) are counted per call in ctx.timings.
    outcomes = _propose_all(run, pull, diff, config, originals, instruction)
    changes = _changes(outcomes, originals)
    # Every reply says which changed file could not be checked, and why (no parser, or broken before).
    run.notes += check_notes({path: o.attempt for path, o in outcomes.items()})
    if not changes:
        if all(o.attempt.no_changes for o in outcomes.values()):
            raise FixFailed(
                "The model found nothing to change for this request. Try saying more precisely what to fix."
            )
        reasons = not_applied({path: o.attempt for path, o in outcomes.items()})
        raise FixFailed(
            "I could not make a verified fix. Nothing was committed:\n\n"
            f"{reasons}\n\nTry rephrasing the request."
        )
    ctx.cancel.check()
    why = policy.push_refusal(pull)
    if why is None:
        committed = commit(run, pull, diff, config, changes, outcomes, instruction)
        if not isinstance(committed, PushRefused):
            return committed
        why = refused_reason(committed, pull)
    return suggest(run, pull, diff, changes, why)


def _propose_all(
    run: FixRun,
    pull: PullInfo,
    diff: Diff,
    config: RepoConfig,
    originals: dict[str, tuple[str, str]],
    instruction: str,
) -> dict[str, EditOutcome]:
    """Ask the model for every target at once (one file per call) and judge each answer."""
    settings = run.ctx.settings
    models = (
        config.model_fast or settings.spark_model_fast,
        (config.model_deep or settings.spark_model_deep) if config.escalate else None,
    )
    pr_text = PullRequestText(pull.title, pull.body)
    futures = {
        path: submit(
            _propose_one, run, path, text, diff.file(path), pr_text, instruction, (models, config), originals
        )
        for path, (text, _) in originals.items()
    }
    outcomes = {path: future.result() for path, future in futures.items()}
    run.notes += [
        escalation_note(path, o.escalation) for path, o in outcomes.items() if o.escalation is not None
    ]
    # Blocks an answer addressed to another target are judged with that file's own answers, as one whole.
    for path, outcome in outcomes.items():
        routed = routed_to(path, outcomes)
        if routed:
            attempt = judge_answers(
                path,
                originals[path][0],
                outcome.shown,
                outcome.answers,
                targets=tuple(originals),
                routed=routed,
            )
            outcomes[path] = replace(outcome, attempt=attempt)
    return outcomes


def _propose_one(
    run: FixRun,
    path: str,
    text: str,
    file_diff: FileDiff | None,
    pr_text: PullRequestText,
    instruction: str,
    chosen: tuple[tuple[str, str | None], RepoConfig],
    originals: dict[str, tuple[str, str]],
) -> EditOutcome:
    command = run.command
    focus: Sequence[tuple[int, int]] = ()
    build: Callable[[FileView], list[dict[str, str]]]
    if run.on_thread and command.line is not None and path == command.path:
        start = command.start_line or command.line
        focus = ((start, command.line),)
        thread = ThreadText(
            # Cut from the redacted file: the thread's lines follow the file's rules (a whole .env file).
            excerpt(redact_file(path, text).text, start, command.line),
            ((command.author, f"/spark fix {instruction}".strip()),),
        )

        def build(view: FileView) -> list[dict[str, str]]:
            return thread_fix_messages(view, thread, instruction, pr_text, run.history)
    else:

        def build(view: FileView) -> list[dict[str, str]]:
            # The user's own comment, quoted as data: "/spark fix <what they asked>".
            request = f"/spark fix {instruction or 'the problems in this file'}"
            return fix_messages(view, request, pr_text, run.history)

    shown_diff = redact_diff(file_diff) if file_diff is not None else None

    def make_view(shown: str, budget: int) -> FileView:
        return fix_view(path, shown, budget, file=shown_diff, focus=focus)

    (fast, deep), config = chosen
    return propose_edit(
        run.ctx,
        path,
        text,
        build,
        make_view,
        model=fast,
        config=config,
        targets=tuple(originals),
        deep_model=deep,
    )


def _changes(outcomes: dict[str, EditOutcome], originals: dict[str, tuple[str, str]]) -> list[FileChange]:
    return [
        FileChange.of(path, originals[path][0], outcome.attempt.text)
        for path, outcome in outcomes.items()
        if outcome.attempt.ok and outcome.attempt.text is not None
    ]


def _start_session(run: FixRun, instruction: str) -> None:
    """Record this fix in the pull request's session and read the history its prompt shows."""
    command = run.command
    entry = Entry(
        id=run.entry, command="fix", author=command.author, text=instruction, order=command.comment_id
    )
    session = sessions.start(run.ctx.redis, run.ctx.pr.key, entry)
    run.history = history_text(session, session.get(entry.id) or entry)
