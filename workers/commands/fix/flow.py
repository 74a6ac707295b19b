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
On a head Spark has seen, by a commenter whose fix passed the permission check here before, the model is
asked before round trip 1 leaves, on what this machine has of that head (``workers.commands.fix.ahead``); its
answers are used only where the head is still that head and every request built from GitHub's answers is the
one asked (``workers.commands.fix.asks``): the model then costs no round trip of its own.
A re-run of the same job (a worker died) first looks for its own earlier commit and reply, so the visible
result happens once. Here is the flow and its answers from the model; the commit or the suggestions are
``workers.commands.fix.lands``, the wording of refusals ``workers.commands.fix.replies``, the reply itself
``workers.reply``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from bot import keys
from bot.adapters.cerebras import ModelError
from bot.adapters.github_port import GitHubError, PullInfo, PushRefused, RateLimited, Unreadable
from bot.cancel import Cancelled
from bot.core import ci, markers, policy
from bot.core.config import RepoConfig
from bot.core.diff import parse_diff
from bot.core.edits import decode_source
from bot.core.findings import read_finding_marker
from bot.core.fixes import FileChange, check_notes, not_applied
from bot.core.prompts import PullRequestText
from bot.core.render import code
from bot.core.session import SUPERSEDED
from bot.core.targets import (
    Refused,
    TargetChoice,
    choose_targets,
    likely_targets,
    refusal_message,
    target_notes,
)
from bot.index.context import local_store, open_index, ready_index
from bot.index.warm import Ready
from bot.metrics import FIXES_COMMITTED
from bot.refs import CommandRef
from workers.commands.ask import load_thread
from workers.commands.fix.ahead import Ahead
from workers.commands.fix.ahead import start as start_early
from workers.commands.fix.asks import (
    build_requests,
    judge_routed,
    propose_one,
    session_entry,
    shown_history,
)
from workers.commands.fix.lands import (
    Landed,
    already_committed,
    already_suggested,
    commit,
    mark_done,
    record_outcome,
    suggest,
)
from workers.commands.fix.replies import (
    FixFailed,
    cancelled_reply,
    github_failed_reply,
    model_failed_reply,
    permission_refusal,
    unreadable_reply,
)
from workers.context import JobContext
from workers.flows.ci import CHECK_RUN, CiReads, asks_ci, ci_refusal, ci_reports, remember_ci_fix
from workers.flows.edit import EditOutcome, escalation_note, read_target
from workers.flows.parallel import submit
from workers.flows.pushes import refused_reason
from workers.flows.read_ahead import ReadAhead
from workers.flows.steering import verifier
from workers.memory import fix_memory, last_seen
from workers.memory import session as sessions
from workers.reply import Reply

T = TypeVar("T")


def handle(pr: dict[str, Any], ref: CommandRef) -> str:
    """``/spark fix``: commit a verified fix (or suggest it) and reply."""
    # The comment id orders fixes: a newer `/spark fix` on the PR supersedes a running older one, but only
    # once run_fix has checked that its author may run it (it claims the token then).
    ctx = JobContext.build(pr, kind="fix", order=ref.comment_id, claim=False, heard=ref.text)
    # Alone in one of Spark's finding threads, `/spark fix` fixes that finding.
    result = run_fix(ctx, finding_instruction(ctx, ref))
    if result == "committed":
        FIXES_COMMITTED.inc()
    return result


def finding_instruction(ctx: JobContext, command: CommandRef) -> CommandRef:
    """Return ``/spark fix`` in one of Spark's finding threads with the finding as its instruction when the
    user added none (a fix anywhere else, or with words of its own, is returned as it is)."""
    if command.kind != "review_comment" or command.text.strip() or command.thread_id is None:
        return command
    thread = load_thread(ctx, command.thread_id)
    if thread is None or not ctx.github.is_own(thread.root_author):
        return command
    if read_finding_marker(thread.root_body) is None:
        return command
    finding = markers.strip(thread.root_body).strip()
    return replace(command, text=f"Fix this review finding: {finding}")


def run_fix(ctx: JobContext, command: CommandRef, reads: CiReads | None = None) -> str:
    """Run ``/spark fix``; return what happened (committed, suggested, refused, failed, cancelled, ...).

    ``reads``: what the CI job that started this fix (auto mode) read already, taken over rather than read
    again (its GitHub port is ``ctx``'s, so the secrets of what it read are known to every write).
    """
    began = time.perf_counter()
    repo, number, gh = ctx.repo, ctx.pr.number, ctx.github
    # Round trip 1 leaves before anything else, Redis included: 👀 is the user's first sign of life.
    with ctx.timings.span("github_read"):
        # A fix asked from Spark's CI check run (its button, or auto mode) has no comment to react to.
        eyes = (
            submit(
                gh.react, repo, command.comment_id, "eyes", review_comment=command.kind == "review_comment"
            )
            if command.kind != CHECK_RUN
            else None
        )
        seen = last_seen.recall(ctx.redis, ctx.pr.key) if reads is None else None
        # On a head Spark has seen, the model is asked now, on what this machine has of it
        # (``workers.commands.fix.ahead``). The rest of round trip 1 waits (a few ms, bounded) until that
        # request is out: those answers are needed only once the model's is in, and building them slows it.
        early = start_early(ctx, command, seen)
        if early is not None:
            early.wait_sent()
        # The Fix CI button is GitHub's to show (to people with write access); auto mode is the repository's
        # own configuration: neither is a person to check.
        permission = submit(gh.permission, repo, command.author) if command.kind != CHECK_RUN else None
        ahead: ReadAhead[str | None]
        indexing: Future[Ready] | None = None
        if reads is None:
            pull_f = submit(gh.pull, repo, number)
            diff_f = submit(gh.pull_diff, repo, number)
            thread_path = command.path if command.kind == "review_comment" else None
            ahead = ReadAhead.start(
                gh,
                seen,
                likely_targets(command.text, seen.paths if seen else (), thread_path),
                partial(read_target, gh),
            )
            # The repository's index at the head last seen, made ready (a compare, where it is not stored)
            # while the pull request is read.
            indexing = (
                open_index(gh, ctx.settings, ctx.redis, seen.base_repo, seen.head_sha) if seen else None
            )
        else:
            pull_f = _done(reads.pull)
            diff_f = reads.diff if reads.diff is not None else submit(gh.pull_diff, repo, number)
            ahead = reads.ahead
    started = ctx.redis.set(
        keys.FIX_STARTED.format(command.comment_id), ctx.job_id or "1", nx=True, ex=keys.FIX_STARTED.seconds
    )
    reply = Reply(ctx, command, "fix", rerun=not started)
    # What this fix read, kept for the next one once the reply is out.
    read: list[Callable[[], None]] = []
    # Said in every reply once the targets are chosen (named files left out, files not checked).
    notes: list[str] = []

    def said(text: str) -> str:
        # The notes, then what the model calls came to (a retry after a cut-off), under every reply.
        return "\n\n".join([text, *notes, *ctx.timings.notes])

    def fail(text: str) -> str:
        record_outcome(ctx, command, "failed")
        reply.post(said(text), reaction="confused")
        return "failed"

    try:
        done = ctx.redis.get(keys.FIX_DONE.format(command.comment_id))
        if done is not None:
            ctx.log.info("fix.already_done", commit=done)
            return "already done"
        pull = pull_f.result()
        landed = _fix(
            reply, pull, diff_f.result().text, permission, (ahead, indexing, early), notes, read, began, reads
        )
        reply.post(said(landed.reply), reaction="rocket")
        for n, part in enumerate(landed.overflow, 1):
            reply.post(part, variant=f"patch-{n}")
        mark_done(ctx, command, landed.done)
        if eyes is not None:
            eyes.result()
        return landed.outcome
    except Cancelled as exc:
        ctx.log.info("fix.cancelled", reason=exc.reason, by=exc.by)
        record_outcome(ctx, command, SUPERSEDED if exc.reason.startswith("superseded") else "stopped")
        message = cancelled_reply(exc, command.author)
        if message:
            reply.post(said(message), reaction="confused")
        return "cancelled"
    except FixFailed as exc:
        ctx.log.info("fix.failed", reason=exc.message)
        return fail(exc.message)
    except Unreadable as exc:
        ctx.log.info("fix.unreadable", path=exc.path, reason=exc.reason)
        return fail(unreadable_reply(exc))
    except ModelError as exc:
        ctx.log.warning("fix.model_error", kind=exc.kind, detail=exc.detail)
        return fail(model_failed_reply(exc))
    except RateLimited:
        raise  # the job is deferred until GitHub's wait is over, then runs again (see workers/jobs.py)
    except GitHubError as exc:
        ctx.log.warning("fix.github_error", status=exc.status, message=exc.message)
        if exc.status == 404:
            # The pull request (or repository) vanished: there is nowhere to reply.
            record_outcome(ctx, command, "failed")
            return "gone"
        return fail(github_failed_reply(exc))
    finally:
        # Answers asked early that were not used are never looked at: their streams are cut.
        if early is not None:
            early.stop()
        for keep in read:
            keep()


# What round trip 1 started besides the pull request: the reads ahead, the index of the head last seen, and
# the fix asked early.
Started = tuple["ReadAhead[str | None]", "Future[Ready] | None", Ahead | None]


def _fix(
    reply: Reply,
    pull: PullInfo,
    diff_text: str,
    permission: Future[str] | None,
    started: Started,
    notes: list[str],
    read: list[Callable[[], None]],
    began: float,
    reads: CiReads | None = None,
) -> Landed:
    """Choose the targets, ask the model and land the verified changes; add the reply's notes to ``notes``
    and to ``read`` what keeps this fix's reads for the next one."""
    ctx, command, gh = reply.ctx, reply.command, reply.ctx.github
    ahead, seen_index, asked_early = started
    if pull.state != "open":
        raise FixFailed("This pull request is closed; there is nothing to fix.")
    diff = parse_diff(diff_text)
    # The repository's index at the head, made ready while the targets are read: started by the CI job
    # already, where it read this head, or in round trip 1 at the head last seen, where that held.
    if reads is not None and reads.index is not None and reads.pull == pull:
        indexing = reads.index
    elif seen_index is not None and ahead.seen is not None and ahead.seen.matches_head(pull):
        indexing = seen_index
    else:
        indexing = open_index(gh, ctx.settings, ctx.redis, pull.base_repo, pull.head_sha)
    instruction = command.text.strip()
    thread_path = command.path if command.kind == "review_comment" else None
    early = choose_targets(instruction, diff, thread_path=thread_path)
    # The files at the head and the config at the base, read ahead where that held, else now, side by side
    # (and the head's file list when the user named a file the diff does not have).
    with ctx.timings.span("github_read"):
        texts = {p: ahead.file(pull, p) for p in early.paths}
        tree_f = submit(gh.tree_paths, pull.base_repo, pull.head_sha) if early.unresolved else None
        loaded = ahead.repo_config(gh, pull)
        config = loaded.config
        level = permission.result() if permission is not None else ""
    last_seen.remember(ctx.redis, ctx.pr.key, pull, diff.readable_paths(), ahead.seen, config=config)
    if permission is not None and not policy.permits(level, config.fix_permission):
        raise FixFailed(permission_refusal(command.author, config.fix_permission, level))
    if command.kind == CHECK_RUN and config.ci_fix == "off":
        # An offer made before the config turned `ci.fix` off (its button pressed since): nothing is fixed.
        raise FixFailed(
            "`ci.fix` is `off` in `.github/spark.yml`: Spark offers no fix of failed checks here. "
            "Comment `/spark fix ci` to have them fixed anyway."
        )
    tree, complete = tree_f.result() if tree_f is not None else (None, True)
    reports = ci_reports(ctx, pull, config, instruction, reads) if thread_path is None else []
    if not reports and asks_ci(instruction):
        raise FixFailed(
            f"No check has failed on the head ({pull.head_sha[:7]}), so there is no CI failure to fix."
        )
    asked: dict[str, str] = {}
    if reports:
        choice, asked = _ci_choice(reports, config, notes)
        # The commit's headline and the session's record: which checks this fixes.
        instruction = "fix failed checks: " + ", ".join(report.name for report in reports)
    else:
        choice = choose_targets(
            instruction,
            diff,
            thread_path=thread_path,
            tree=tree,
            tree_complete=complete,
            selects=config.selects,
        )
    if choice.refused:
        raise FixFailed(refusal_message(choice))
    if not choice.paths:
        raise FixFailed(
            "I found no file in this pull request that I may edit "
            "(workflow files, deleted files and paths excluded by `.github/spark.yml` are off limits)."
        )
    notes[:0] = target_notes(choice)
    # Allowed: only now may this fix supersede an older one still running, and obey others' asks.
    ctx.cancel.claim(by=command.author)
    ctx.cancel.verify = verifier(gh, ctx.repo, pull.author, config)
    if reply.rerun:
        found = already_committed(reply, pull) or already_suggested(reply, pull)
        if found is not None:
            return replace(found, outcome="already done")
    entry = session_entry(command, instruction)
    history = shown_history(sessions.start(ctx.redis, ctx.pr.key, entry), entry)
    with ctx.timings.span("github_read"):
        for path in choice.paths:
            if path not in texts:  # named outside the diff, or the config excluded the first pick
                texts[path] = ahead.file(pull, path)
    originals: dict[str, tuple[str, str]] = {}
    files: dict[str, str] = {}
    for path in choice.paths:
        data = texts[path].result()
        if data is None:
            raise FixFailed(f"{code(path)} does not exist at the pull request's head {pull.head_sha[:7]}.")
        files[path] = data
        originals[path] = decode_source(data.encode("utf-8", "surrogateescape"))
    encodings = {path: encoding for path, (_, encoding) in originals.items()}
    # Kept for the next fix to start from. The Fix CI button and auto mode are no person whose permission
    # was checked: only a commenter who passed the check is remembered as one who may start early.
    author = command.author if permission is not None else None
    read.append(partial(_keep, ctx, pull, diff_text, loaded.data, files, author))
    ctx.cancel.check()
    # The model's figures (time to first token, time, tokens) are counted per call in ctx.timings.
    index = ready_index(indexing, ctx.settings, pull.base_repo, pull.base_sha, ctx.github.secrets)
    if index.note:
        notes.append(f"I fixed without code from other files: {index.note.split(';')[0]}.")
    pr_text = PullRequestText(pull.title, pull.body)
    requests = build_requests(
        ctx, command, pr_text, diff, config, originals, instruction, history, index, asked
    )
    # The answers asked early, where the head and every request are what GitHub's answers make them; else
    # the model is asked now.
    raw = asked_early.adopt(ctx, pull, requests) if asked_early is not None else None
    if raw is None:
        futures = {path: submit(propose_one, ctx, request) for path, request in requests.items()}
        raw = {path: future.result() for path, future in futures.items()}
    # Blocks an answer addressed to another target are judged with that file's own answers, as one whole.
    outcomes = judge_routed(raw, originals)
    notes += [escalation_note(p, o.escalation) for p, o in outcomes.items() if o.escalation is not None]
    changes = _changes(outcomes, originals)
    # Every reply says which changed file could not be checked, and why (no parser, or broken before).
    notes += check_notes({path: o.attempt for path, o in outcomes.items()})
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
        committed = commit(reply, pull, changes, outcomes, instruction, encodings, began)
        if not isinstance(committed, PushRefused):
            if reports and committed.outcome == "committed":
                remember_ci_fix(ctx, reports)
            return committed
        why = refused_reason(committed, pull)
    return suggest(reply, pull, diff, changes, why, began)


def _changes(outcomes: dict[str, EditOutcome], originals: dict[str, tuple[str, str]]) -> list[FileChange]:
    return [
        FileChange.of(path, originals[path][0], outcome.attempt.text)
        for path, outcome in outcomes.items()
        if outcome.attempt.ok and outcome.attempt.text is not None
    ]


def _keep(
    ctx: JobContext,
    pull: PullInfo,
    diff_text: str,
    config_data: Mapping[str, Any],
    files: dict[str, str],
    author: str | None,
) -> None:
    """Keep what this fix read for the next one to start from; a failure costs only that early start."""
    try:
        fix_memory.keep(
            ctx.redis,
            local_store(ctx.settings),
            ctx.pr.key,
            title=pull.title,
            body=pull.body,
            head_sha=pull.head_sha,
            base_sha=pull.base_sha,
            diff=diff_text,
            config_data=config_data,
            files=files,
            author=author,
        )
    except Exception as exc:  # the fix itself is done; the next one starts as it always did
        ctx.log.warning("fix.memory_not_kept", error=type(exc).__name__)


def _ci_choice(
    reports: list[ci.CheckReport], config: RepoConfig, notes: list[str]
) -> tuple[TargetChoice, dict[str, str]]:
    """The files the failed checks point to, those Spark may not edit refused with the reason, and for each
    target what the model is told; the reply says where a failing test led to another file."""
    targets = ci.ci_targets(reports, lambda path: ci_refusal(config, path))
    if not targets.paths:
        if targets.refused:
            refused = tuple(Refused(path, reason) for path, reason in targets.refused)
            raise FixFailed(refusal_message(TargetChoice(refused=refused)))
        raise FixFailed(
            f"{ci.summary_line(reports)}. None of these failures points to a file in this repository, so "
            "there is nothing I can fix from them."
        )
    notes += [
        f"The failing test in {code(test)} ends in {code(product)}: I fixed {code(product)}."
        for test, product in targets.moved
    ]
    notes += [f"Not edited: {code(path)}: {reason}." for path, reason in targets.refused]
    instructions = {path: "ci\n\n" + ci.instruction(reports, path) for path in targets.paths}
    return TargetChoice(paths=targets.paths, named=True), instructions


def _done(value: T) -> Future[T]:
    """A read already made, as the future a flow waits on."""
    future: Future[T] = Future()
    future.set_result(value)
    return future
