"""``/spark fix``: a verified commit on the pull request's branch about a second after the comment.

The critical path is kept to four sequential GitHub round trips around the model call:
1. at once: 👀 on the comment, the commenter's permission, the pull request, its diff;
2. at once: the target files at the head, the repository config at the base;
   (the model streams the edit; the core applies and verifies it)
3. ``createCommitOnBranch`` with ``expectedHeadOid`` (GitHub signs it and refuses it if the branch moved);
4. at once: the reply and 🚀.
A re-run of the same job (a worker died) first looks for its own earlier commit and reply, so the visible
result happens once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from bot import keys
from bot.adapters.cerebras import ModelError
from bot.adapters.github_port import (
    BranchMoved,
    Committed,
    GitHubError,
    GitHubPort,
    PullInfo,
    PushRefused,
    RateLimited,
    Unreadable,
)
from bot.cancel import STOPPED, Cancelled
from bot.core import markers, policy
from bot.core.anchors import anchor_edit
from bot.core.answers import EditBlock
from bot.core.commands import HELP_LINES
from bot.core.config import ConfigError, RepoConfig, describe
from bot.core.diff import format_patch, parse_diff
from bot.core.edits import decode_source, encode_source
from bot.core.fixes import (
    FileChange,
    check_notes,
    commit_message,
    fix_reply,
    format_timings,
    judge_answers,
    not_applied,
)
from bot.core.ignore import DEFAULT_MAX_BYTES
from bot.core.limits import BODY_MAX_CHARS, split_patches
from bot.core.prompts import PullRequestText, ThreadText, fix_messages, thread_fix_messages
from bot.core.render import code, postable, prose
from bot.core.secrets import redact_diff, redact_file
from bot.core.session import COMMITTED, SUPERSEDED, Entry, entry_id, history_text
from bot.core.targets import choose_targets, left_out_note, refusal_message
from bot.core.types import Diff, FileDiff, ReviewComment
from bot.core.window import FileView, excerpt, fix_view
from bot.core.wording import plural
from bot.refs import CommandRef
from workers import own_commits
from workers import session as sessions
from workers.context import JobContext
from workers.flows.edit import EditOutcome, escalation_note, propose_edit
from workers.flows.pool import submit
from workers.flows.repo_config import load_repo_config
from workers.flows.steering import verifier

STARTED_KEY = keys.FIX_STARTED.prefix
DONE_KEY = keys.FIX_DONE.prefix
# createCommitOnBranch answered 5xx: try again (expectedHeadOid keeps it from committing twice).
COMMIT_ATTEMPTS = 3
COMMIT_BACKOFF = 0.2
RECORD_TTL = keys.FIX_DONE.seconds
THREAD_CONTEXT_LINES = 3
# GitHub refuses a comment body over 65,536 characters; leave room for the rest of the reply.
# Room a reply keeps beside its patch blocks for the overflow note, the timings line and the marker.
PATCH_NOTE_ROOM = 1_000


class FixFailed(Exception):
    """The fix cannot be made; ``message`` tells the user what went wrong and how to recover."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class FixRun:
    """One ``/spark fix`` job: its context, command and what it has learned so far."""

    ctx: JobContext
    command: CommandRef
    rerun: bool
    started: float
    encodings: dict[str, str]
    # Said in every reply after the targets are chosen (named files left out over the limit).
    notes: list[str] = field(default_factory=list)
    # The pull request's session as the prompt shows it: earlier fixes, answers, superseded requests.
    history: str = ""

    @property
    def gh(self) -> GitHubPort:
        """Return the installation client."""
        return self.ctx.github

    @property
    def on_thread(self) -> bool:
        """Return whether the command came from a review thread."""
        return self.command.kind == "review_comment"

    def key(self) -> str:
        """Return the hidden-marker key of this command's reply."""
        return self.ctx.private_key(f"fix-{self.command.comment_id}")

    @property
    def entry(self) -> str:
        """Return the id of this command's entry in the pull request's session."""
        return entry_id("fix", self.command.comment_id)

    def outcome(self, outcome: str, **fields: Any) -> None:
        """Record what came of this fix in the session (only once the fix started: a refusal records none)."""
        sessions.update(self.ctx.redis, self.ctx.pr.key, self.entry, outcome=outcome, **fields)


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
    started = ctx.redis.set(STARTED_KEY + str(command.comment_id), ctx.job_id or "1", nx=True, ex=RECORD_TTL)
    run = FixRun(ctx, command, rerun=not started, started=began, encodings={})
    try:
        done = ctx.redis.get(DONE_KEY + str(command.comment_id))
        if done is not None:
            ctx.log.info("fix.already_done", commit=done)
            return "already done"
        pull = pull_f.result()
        outcome = _fix(run, pull, diff_f, permission)
        eyes.result()
        return outcome
    except Cancelled as exc:
        ctx.log.info("fix.cancelled", reason=exc.reason, by=exc.by)
        run.outcome(SUPERSEDED if exc.reason.startswith("superseded") else "stopped")
        message = cancelled_reply(exc, command.author)
        if message:
            _reply(run, message, reaction="confused")
        return "cancelled"
    except FixFailed as exc:
        ctx.log.info("fix.failed", reason=exc.message)
        run.outcome("failed")
        _reply(run, exc.message, reaction="confused")
        return "failed"
    except Unreadable as exc:
        ctx.log.info("fix.unreadable", path=exc.path, reason=exc.reason)
        run.outcome("failed")
        _reply(run, unreadable_reply(exc), reaction="confused")
        return "failed"
    except ModelError as exc:
        ctx.log.warning("fix.model_error", kind=exc.kind, detail=exc.detail)
        run.outcome("failed")
        _reply(
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
        _reply(
            run,
            f"GitHub refused a call ({exc.status}: {prose(exc.message)}). "
            "Comment `/spark fix` again to retry.",
            reaction="confused",
        )
        return "failed"


def _fix(run: FixRun, pull: PullInfo, diff_f: Future[Any], permission: Future[str]) -> str:
    ctx, command = run.ctx, run.command
    if pull.state != "open":
        raise FixFailed("This pull request is closed; there is nothing to fix.")
    diff = parse_diff(diff_f.result().text)
    instruction = command.text.strip()
    thread_path = command.path if run.on_thread else None
    early = choose_targets(instruction, diff, thread_path=thread_path)
    # Round trip 2: the files at the head and the config at the base, side by side (and the head's file list
    # when the user named a file the diff does not have).
    with ctx.timings.span("github_read"):
        texts = {p: submit(_read_target, run.gh, pull.base_repo, p, pull.head_sha) for p in early.paths}
        tree_f = submit(run.gh.tree_paths, pull.base_repo, pull.head_sha) if early.unresolved else None
        config_f = submit(load_repo_config, run.gh, pull.base_repo, pull.base_ref)
        config = config_f.result().config
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
    run.notes = [left_out_note(choice)] if choice.left_out else []
    # Allowed: only now may this fix supersede an older one still running, and obey others' asks.
    ctx.cancel.claim(by=command.author)
    ctx.cancel.verify = verifier(run.gh, ctx.repo, pull.author, config)
    if run.rerun and (_already_committed(run, pull) or _already_suggested(run, pull)):
        return "already done"
    _start_session(run, instruction)
    with ctx.timings.span("github_read"):
        for path in choice.paths:
            if path not in texts:  # named outside the diff, or the config excluded the first pick
                texts[path] = submit(_read_target, run.gh, pull.base_repo, path, pull.head_sha)
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
        committed = _commit(run, pull, diff, config, changes, outcomes, instruction)
        if not isinstance(committed, PushRefused):
            return committed
        why = refused_reason(committed, pull)
    return _suggest(run, pull, diff, changes, why)


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
        path: submit(_propose_one, run, path, text, diff.file(path), pr_text, instruction, models, originals)
        for path, (text, _) in originals.items()
    }
    outcomes = {path: future.result() for path, future in futures.items()}
    run.notes += [
        escalation_note(path, o.escalation) for path, o in outcomes.items() if o.escalation is not None
    ]
    # Blocks an answer addressed to another target are judged with that file's own answers, as one whole.
    for path, outcome in outcomes.items():
        routed = _routed_to(path, outcomes)
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
    models: tuple[str, str | None],
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

    fast, deep = models
    return propose_edit(
        run.ctx,
        path,
        text,
        build,
        make_view,
        model=fast,
        targets=tuple(originals),
        deep_model=deep,
    )


def _changes(outcomes: dict[str, EditOutcome], originals: dict[str, tuple[str, str]]) -> list[FileChange]:
    return [
        FileChange.of(path, originals[path][0], outcome.attempt.text)
        for path, outcome in outcomes.items()
        if outcome.attempt.ok and outcome.attempt.text is not None
    ]


def _commit(
    run: FixRun,
    pull: PullInfo,
    diff: Diff,
    config: RepoConfig,
    changes: list[FileChange],
    outcomes: dict[str, EditOutcome],
    instruction: str,
) -> str | PushRefused:
    """Commit the changes, or return GitHub's refusal (a protection rule, a ruleset, no permission).

    A 5xx or a lost answer is retried; a refusal is not (it would only be refused again). On a moved branch
    the same answers are re-applied to the new head once. ``expectedHeadOid`` makes retrying safe: if a
    5xx hid a success, the retry finds the branch moved and the head commit carrying this command's
    trailer, which counts as done.
    """
    ctx, command = run.ctx, run.command
    headline, body = commit_message(
        instruction or "Apply the requested fix", command.author, _comment_url(run), [c.path for c in changes]
    )
    head = pull.head_sha
    moved = False
    for attempt_no in range(COMMIT_ATTEMPTS):
        additions = {c.path: encode_source(c.after, run.encodings.get(c.path, "utf-8")) for c in changes}
        try:
            with (
                ctx.timings.span("commit", on_error="commit_refused"),
                own_commits.committing(ctx.redis, ctx.pr.key),
            ):
                result = run.gh.commit_on_branch(
                    pull.head_repo,
                    pull.head_ref,
                    expected_head=head,
                    headline=headline,
                    body=body,
                    additions=additions,
                )
                if isinstance(result, Committed):
                    # The push of this commit comes back as a synchronize event; the review skips Spark's own.
                    own_commits.record(ctx.redis, result.oid)
        except RateLimited:
            raise
        except GitHubError as exc:
            if pull.is_fork and exc.status in (401, 403, 404, 422):
                ctx.log.info("fix.fork_not_writable", status=exc.status)
                return PushRefused("permissions", (exc.message,), exc.message)
            if exc.maybe_done and attempt_no + 1 < COMMIT_ATTEMPTS:
                ctx.log.info("fix.commit_retry", status=exc.status, attempt=attempt_no + 1)
                time.sleep(COMMIT_BACKOFF * (attempt_no + 1))
                continue
            raise
        if isinstance(result, PushRefused):
            ctx.log.info("fix.push_refused", guard=result.guard, rules=list(result.rules))
            ctx.timings.relabel("commit", "commit_refused")
            return result
        if isinstance(result, Committed):
            # Before the reply: a follow-up written after reading it finds this fix in the session.
            _record_commit(run, changes, result.oid, head)
            timings = _timings(run)
            # Files of a multi-file request whose answer failed are named, so nothing is silently dropped.
            unchanged = [
                (
                    path,
                    "; ".join(o.attempt.failed or o.attempt.errors[:1])
                    or "the model found nothing to change",
                )
                for path, o in outcomes.items()
                if path not in {c.path for c in changes}
            ]
            reply = fix_reply(changes, result.url or result.oid, timings, unchanged)
            _reply(run, reply, reaction="rocket")
            _mark_done(run, result.oid)
            ctx.log.info("fix.committed", commit=result.oid, **timings)
            return "committed"
        assert isinstance(result, BranchMoved)
        fresh = run.gh.pull(ctx.repo, ctx.pr.number)
        if fresh.head_sha == head:
            break
        if _already_committed(run, fresh):
            return "committed"
        if moved:
            break
        # Someone else pushed: re-apply the same answers to the new head once, with no new model call.
        moved = True
        changes = _reapply(run, fresh, changes, outcomes)
        if not changes:
            break
        head = fresh.head_sha
        pull = fresh
    raise FixFailed(
        f"The branch {code(pull.head_ref)} moved while I was working and my fix no longer applies to its "
        "new head. Nothing was committed; comment `/spark fix` again."
    )


def _start_session(run: FixRun, instruction: str) -> None:
    """Record this fix in the pull request's session and read the history its prompt shows."""
    command = run.command
    entry = Entry(
        id=run.entry, command="fix", author=command.author, text=instruction, order=command.comment_id
    )
    session = sessions.start(run.ctx.redis, run.ctx.pr.key, entry)
    run.history = history_text(session, session.get(entry.id) or entry)


def _record_commit(run: FixRun, changes: list[FileChange], oid: str, parent: str) -> None:
    """Record the commit in the session: the files, the diff (secrets redacted, as the model saw them)."""
    patch = "".join(
        format_patch(c.path, redact_file(c.path, c.before).text, redact_file(c.path, c.after).text)
        for c in changes
    )
    run.outcome(COMMITTED, files=tuple(c.path for c in changes), diff=patch, sha=oid, parent=parent)


def _routed_to(path: str, outcomes: dict[str, EditOutcome]) -> list[EditBlock]:
    """Return the blocks other targets' answers addressed to ``path``."""
    return [block for other in outcomes.values() for block in other.attempt.routed if block.path == path]


def _reapply(
    run: FixRun, pull: PullInfo, changes: list[FileChange], outcomes: dict[str, EditOutcome]
) -> list[FileChange]:
    """Judge the earlier answers against the files at the new head; all must still apply."""
    fresh: list[FileChange] = []
    for change in changes:
        data = _read_target(run.gh, pull.base_repo, change.path, pull.head_sha)
        if data is None:
            return []
        text, _ = decode_source(data.encode("utf-8", "surrogateescape"))
        shown = redact_file(change.path, text).text
        # Every answer of the fix, first and retry, judged again as one whole against the new head.
        attempt = judge_answers(
            change.path,
            text,
            shown,
            outcomes[change.path].answers,
            targets=tuple(outcomes),
            routed=_routed_to(change.path, outcomes),
        )
        if not attempt.ok or attempt.text is None:
            return []
        fresh.append(FileChange.of(change.path, text, attempt.text))
    return fresh


def _suggest(run: FixRun, pull: PullInfo, diff: Diff, changes: list[FileChange], why: str) -> str:
    """Post the fix as ```suggestion blocks where anchors allow; the rest goes in the reply as a patch.

    GitHub takes suggestions only on lines of the diff, so a change to a file the pull request did not touch
    (a file the user named) is a patch in the reply, never dropped.
    """
    comments: list[ReviewComment] = []
    patches: list[str] = []
    for change in changes:
        file_diff = diff.file(change.path)
        if file_diff is None:
            patches.append(format_patch(change.path, change.before, change.after))
            continue
        anchored = anchor_edit(change.path, change.before, change.after, file_diff, message="Suggested fix:")
        comments.extend(anchored.suggestions)
        if anchored.leftover_patch:
            patches.append(anchored.leftover_patch)
    if not all(postable(text) for text in [*(c.body for c in comments), *patches]):
        raise FixFailed(
            "The fix holds a value that looks like a secret; posted, it would be redacted, and committing "
            "the suggestion would write the placeholder. Nothing was posted: make this change by hand, and "
            "keep the value out of the file (an environment variable or a secret store)."
        )
    run.ctx.cancel.check()
    if comments:
        with run.ctx.timings.span("suggestions"):
            run.gh.review(
                run.ctx.repo,
                run.ctx.pr.number,
                commit_sha=pull.head_sha,
                # The marker lets a re-run of this job (its worker died) find the review, not post it again.
                body=markers.append(
                    f"I {why}, so here is the fix as suggestions you can commit.", "reply", run.key()
                ),
                comments=comments,
            )
    timings = _timings(run)
    files = ", ".join(code(c.path) for c in changes)
    parts = [f"I {why}, so I did not commit the fix for {files}."]
    if comments:
        parts.append(f"Posted {plural(len(comments), 'suggestion')} in a review.")
    overflow: list[str] = []
    if patches:
        parts.append("Changes that cannot be suggestions (outside the diff); apply with `git apply`:")
        # A comment holds at most 65,536 characters: what does not fit follows in comments, in order.
        room = BODY_MAX_CHARS - sum(len(p) + 2 for p in parts) - PATCH_NOTE_ROOM
        blocks, overflow = split_patches(patches, room)
        parts.extend(blocks)
        if overflow:
            parts.append(
                "The rest of the patch did not fit in this comment (GitHub takes at most 65,536 characters); "
                f"it is in the {plural(len(overflow), 'comment')} that follow, in order."
            )
    parts.append(f"<sub>{format_timings(timings)}</sub>")
    run.outcome("suggested")
    _reply(run, "\n\n".join(parts), reaction="rocket")
    for n, part in enumerate(overflow, 1):
        text = f"Patch of the suggested fix, continued (part {n} of {len(overflow)}):\n\n{part}"
        run.gh.upsert_comment(run.ctx.repo, run.ctx.pr.number, f"{run.key()}-patch-{n}", text)
    _mark_done(run, "suggested")
    return "suggested"


def _read_target(gh: GitHubPort, repo: str, path: str, ref: str) -> str | None:
    """Read a file to fix: a regular text file within the review's size limit (else ``Unreadable``)."""
    return gh.file_text(repo, path, ref, max_bytes=DEFAULT_MAX_BYTES)


def unreadable_reply(exc: Unreadable) -> str:
    """Return the reply for a target Spark must not edit (a symlink, a submodule, a file too large)."""
    if "symbolic link" in exc.reason:
        hint = " Name the file it points to instead."
    elif "submodule" in exc.reason:
        hint = " Fix it in the submodule's own repository."
    elif exc.reason == "a directory":
        hint = " Name a file inside it."
    else:
        hint = " Make this change by hand."
    return f"I cannot edit {code(exc.path)}: it is {prose(exc.reason)}. Nothing was committed.{hint}"


def refused_reason(refused: PushRefused, pull: PullInfo) -> str:
    """Return why GitHub refused Spark's push, naming the guard and each rule it broke."""
    rules = "; ".join(refused.rules) or refused.message
    if refused.guard == "permissions":
        return f"was not allowed to push to {code(pull.head_repo)} ({prose(rules)})"
    return f"could not push to {code(pull.head_ref)}: its {refused.guard} refused the commit ({prose(rules)})"


def _already_committed(run: FixRun, pull: PullInfo) -> bool:
    """On a re-run, return whether the head commit is this command's fix (the earlier run got that far)."""
    # Through the base repository: a fork's head commit is served there, while the fork may be private.
    head = run.gh.commit(pull.base_repo, pull.head_sha)
    if _comment_url(run) not in head.message:
        return False
    own_commits.record(run.ctx.redis, pull.head_sha)
    # The first run died before recording its commit (or its diff): the session learns the SHA now.
    entry = sessions.load(run.ctx.redis, run.ctx.pr.key).get(run.entry)
    if entry is None or entry.sha != pull.head_sha:
        run.outcome(COMMITTED, sha=pull.head_sha)
    _reply(run, f"Pushed a fix in {head.html_url or pull.head_sha}", reaction="rocket")
    _mark_done(run, pull.head_sha)
    return True


def _already_suggested(run: FixRun, pull: PullInfo) -> bool:
    """On a re-run for a fork, return whether this command's review was posted (then reply, if not yet)."""
    if not policy.closed_fork(pull):
        return False
    if run.gh.find_review(run.ctx.repo, run.ctx.pr.number, run.key()) is None:
        return False
    _reply(run, "Posted the fix as suggestions in a review (this branch is in a fork).", reaction="rocket")
    _mark_done(run, "suggested")
    return True


def _mark_done(run: FixRun, result: str) -> None:
    """Record that this command's visible result (commit or review, and the reply) is complete.

    Written only after the reply: a worker killed between the commit and the reply leaves no record, so
    the re-run finds its own commit on the branch and replies.
    """
    run.ctx.redis.set(DONE_KEY + str(run.command.comment_id), result, ex=RECORD_TTL)


def cancelled_reply(exc: Cancelled, requester: str) -> str:
    """Return what a cancelled fix tells its requester: who stopped it (empty when they did it themselves).

    Their own ``/spark stop`` or newer ``/spark fix`` answers them already; anyone else's must be named.
    """
    if exc.by and exc.by == requester:
        return ""
    if exc.reason.startswith("superseded"):
        who = f" from {exc.by}" if exc.by else ""
        return f"@{requester}, this fix was superseded by a newer `/spark fix`{who}. Nothing was committed."
    if exc.reason == STOPPED:
        if exc.by:
            return (
                f"@{requester}, {exc.by} stopped this fix with `/spark stop`. Nothing was committed; "
                "comment `/spark fix` again to retry."
            )
        return f"@{requester}, this fix was stopped: the pull request was closed. Nothing was committed."
    return f"Stopped this fix: {exc.reason}. Comment `/spark fix` again."


def _comment_url(run: FixRun) -> str:
    repo, number, cid = run.ctx.repo, run.ctx.pr.number, run.command.comment_id
    anchor = f"discussion_r{cid}" if run.on_thread else f"issuecomment-{cid}"
    return f"https://github.com/{repo}/pull/{number}#{anchor}"


def _timings(run: FixRun) -> dict[str, float]:
    # Since the webhook was queued: the wait in the queue plus this job's own time.
    return run.ctx.timings.as_ms(total=run.ctx.timings.total(run.started))


def _reply(run: FixRun, text: str, *, reaction: str) -> None:
    """Reply once (a re-run edits its earlier reply) and react; errors here are logged, not raised."""
    ctx, command = run.ctx, run.command
    text = "\n\n".join([text, *run.notes])
    body = markers.append(text, "reply", run.key())
    try:
        react = submit(ctx.github.react, ctx.repo, command.comment_id, reaction, review_comment=run.on_thread)
        if run.on_thread and command.thread_id is not None:
            if not (run.rerun and _replied_in_thread(run)):
                _post_thread_reply(run, command.thread_id, body)
        elif run.rerun:
            ctx.github.upsert_comment(ctx.repo, ctx.pr.number, run.key(), text)
        else:
            _post_reply(run, text, body)
        react.result()
    except RateLimited:
        raise
    except GitHubError as exc:
        ctx.log.warning("fix.reply_failed", status=exc.status, message=exc.message)


def _post_thread_reply(run: FixRun, thread_id: int, body: str) -> None:
    """Reply in the review thread; after a 5xx or a lost answer, only if the thread does not show it."""
    ctx = run.ctx
    try:
        ctx.github.reply_to_review_comment(ctx.repo, ctx.pr.number, thread_id, body)
    except GitHubError as exc:
        if not exc.maybe_done or isinstance(exc, RateLimited):
            raise
        ctx.log.info("fix.reply_retry", status=exc.status, unanswered=exc.unanswered)
        if not _replied_in_thread(run):
            ctx.github.reply_to_review_comment(ctx.repo, ctx.pr.number, thread_id, body)


def _post_reply(run: FixRun, text: str, body: str) -> None:
    """Post the conversation reply; after a 5xx or a lost answer (maybe posted) retry through its marker."""
    ctx = run.ctx
    try:
        ctx.github.comment(ctx.repo, ctx.pr.number, body)
        return
    except GitHubError as exc:
        if not exc.maybe_done or isinstance(exc, RateLimited):
            raise
        ctx.log.info("fix.reply_retry", status=exc.status, unanswered=exc.unanswered)
    for attempt in range(COMMIT_ATTEMPTS - 1):
        time.sleep(COMMIT_BACKOFF * (attempt + 1))
        try:
            # Finds the reply if the 5xx hid a success, so the user sees exactly one.
            ctx.github.upsert_comment(ctx.repo, ctx.pr.number, run.key(), text)
            return
        except GitHubError as exc:
            if not exc.maybe_done or attempt == COMMIT_ATTEMPTS - 2:
                raise


def _replied_in_thread(run: FixRun) -> bool:
    """Return whether an earlier run of this job already replied in the review thread."""
    comments = run.gh.review_comments(run.ctx.repo, run.ctx.pr.number)
    return any(
        c.in_reply_to_id == run.command.thread_id
        and run.gh.is_own(c.author)
        and markers.carries(c.body, "reply", run.key())
        for c in comments
    )


def help_text(config: RepoConfig, unknown: str = "", errors: Sequence[ConfigError] = ()) -> str:
    """Return the ``/spark help`` reply: the commands, the repository's current config and its problems."""
    intro = f"I don't know the command {code(unknown)}.\n\n" if unknown else ""
    problems = "".join(f"\n- {code(str(error))}" for error in errors)
    if problems:
        problems = "\n\n**Configuration problems** (each bad key is dropped; the rest applies):" + problems
    return (
        f"{intro}**Spark commands** (in a pull request comment or a review thread):\n\n"
        + "".join(f"- {line}\n" for line in HELP_LINES.values())
        + "\n"
        f"**Configuration** (`.github/spark.yml` on the base branch):\n\n{describe(config)}{problems}"
    )
