"""Where a ``/spark fix`` lands: one verified commit on the branch, or ```suggestion blocks and patches when
Spark may not push there; the branch moving meanwhile; a re-run finding what its first run did.

Each returns what landed and the reply that says so (``Landed``); the flow posts the reply, then records the
command done (``mark_done``)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from bot import keys
from bot.adapters.github_port import (
    BranchMoved,
    Committed,
    GitHubError,
    GitHubPort,
    PullInfo,
    PushRefused,
    RateLimited,
)
from bot.core import markers, policy
from bot.core.anchors import anchor_edit
from bot.core.answers import EditBlock
from bot.core.diff import format_patch
from bot.core.edits import decode_source, encode_source
from bot.core.fixes import (
    FileChange,
    commit_message,
    fix_reply,
    format_timings,
    judge_answers,
)
from bot.core.limits import BODY_MAX_CHARS, split_patches
from bot.core.render import code, postable
from bot.core.secrets import redact_file
from bot.core.session import COMMITTED, entry_id
from bot.core.types import Diff, ReviewComment
from bot.core.wording import plural
from bot.refs import CommandRef
from workers.commands.fix.replies import FixFailed
from workers.context import JobContext
from workers.flows.edit import EditOutcome, read_target
from workers.memory import own_commits
from workers.memory import session as sessions
from workers.reply import Reply

# createCommitOnBranch answered 5xx: try again (expectedHeadOid keeps it from committing twice).
COMMIT_ATTEMPTS = 3
COMMIT_BACKOFF = 0.2
# GitHub refuses a comment body over 65,536 characters; leave room for the rest of the reply.
# Room a reply keeps beside its patch blocks for the overflow note, the timings line and the marker.
PATCH_NOTE_ROOM = 1_000


@dataclass(frozen=True, slots=True)
class Landed:
    """What a fix left on GitHub: the outcome, the reply that says so, the record of the command done
    (the commit SHA, or "suggested"), and patch parts that follow the reply in comments of their own."""

    outcome: str
    reply: str
    done: str
    overflow: tuple[str, ...] = ()


def commit(
    reply: Reply,
    pull: PullInfo,
    changes: list[FileChange],
    outcomes: dict[str, EditOutcome],
    instruction: str,
    encodings: dict[str, str],
    started: float,
) -> Landed | PushRefused:
    """Commit the changes, or return GitHub's refusal (a protection rule, a ruleset, no permission).

    A 5xx or a lost answer is retried; a refusal is not (it would only be refused again). On a moved branch
    the same answers are re-applied to the new head once. ``expectedHeadOid`` makes retrying safe: if a
    5xx hid a success, the retry finds the branch moved and the head commit carrying this command's
    trailer, which counts as done.
    """
    ctx, command, gh = reply.ctx, reply.command, reply.ctx.github
    headline, body = commit_message(
        instruction or "Apply the requested fix", command.author, reply.url, [c.path for c in changes]
    )
    head = pull.head_sha
    moved = False
    for attempt_no in range(COMMIT_ATTEMPTS):
        additions = {c.path: encode_source(c.after, encodings.get(c.path, "utf-8")) for c in changes}
        try:
            with (
                ctx.timings.span("commit", on_error="commit_refused"),
                own_commits.committing(ctx.redis, ctx.pr.key),
            ):
                result = gh.commit_on_branch(
                    pull.head_repo,
                    pull.head_ref,
                    expected_head=head,
                    headline=headline,
                    body=body,
                    additions=additions,
                )
                if isinstance(result, Committed):
                    # The push of this commit comes back as a synchronize event; the review skips Spark's own.
                    own_commits.made(ctx.redis, ctx.pr.key, pull, result.oid, list(additions))
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
            _record_commit(ctx, command, changes, result.oid, head)
            timings = ctx.timings.as_ms(total=ctx.timings.total(started))
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
            ctx.log.info("fix.committed", commit=result.oid, **timings)
            text = fix_reply(changes, result.url or result.oid, timings, unchanged)
            return Landed("committed", text, result.oid)
        assert isinstance(result, BranchMoved)
        fresh = gh.pull(ctx.repo, ctx.pr.number)
        if fresh.head_sha == head:
            break
        found = already_committed(reply, fresh)
        if found is not None:
            return found
        if moved:
            break
        # Someone else pushed: re-apply the same answers to the new head once, with no new model call.
        moved = True
        changes = _reapply(gh, fresh, changes, outcomes)
        if not changes:
            break
        head = fresh.head_sha
        pull = fresh
    raise FixFailed(
        f"The branch {code(pull.head_ref)} moved while I was working and my fix no longer applies to its "
        "new head. Nothing was committed; comment `/spark fix` again."
    )


def _record_commit(
    ctx: JobContext, command: CommandRef, changes: list[FileChange], oid: str, parent: str
) -> None:
    """Record the commit in the session: the files, the diff (secrets redacted, as the model saw them)."""
    patch = "".join(
        format_patch(c.path, redact_file(c.path, c.before).text, redact_file(c.path, c.after).text)
        for c in changes
    )
    files = tuple(c.path for c in changes)
    record_outcome(ctx, command, COMMITTED, files=files, diff=patch, sha=oid, parent=parent)


def record_outcome(ctx: JobContext, command: CommandRef, outcome: str, **fields: object) -> None:
    """Record what came of this fix in the session (only once the fix started: a refusal records none)."""
    sessions.update(ctx.redis, ctx.pr.key, entry_id("fix", command.comment_id), outcome=outcome, **fields)


def routed_to(path: str, outcomes: dict[str, EditOutcome]) -> list[EditBlock]:
    """Return the blocks other targets' answers addressed to ``path``."""
    return [block for other in outcomes.values() for block in other.attempt.routed if block.path == path]


def _reapply(
    gh: GitHubPort, pull: PullInfo, changes: list[FileChange], outcomes: dict[str, EditOutcome]
) -> list[FileChange]:
    """Judge the earlier answers against the files at the new head; all must still apply."""
    fresh: list[FileChange] = []
    for change in changes:
        data = read_target(gh, pull.base_repo, pull.head_sha, change.path)
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
            routed=routed_to(change.path, outcomes),
        )
        if not attempt.ok or attempt.text is None:
            return []
        fresh.append(FileChange.of(change.path, text, attempt.text))
    return fresh


def suggest(
    reply: Reply, pull: PullInfo, diff: Diff, changes: list[FileChange], why: str, started: float
) -> Landed:
    """Post the fix as ```suggestion blocks where anchors allow; the rest goes in the reply as a patch.

    GitHub takes suggestions only on lines of the diff, so a change to a file the pull request did not touch
    (a file the user named) is a patch in the reply, never dropped.
    """
    ctx = reply.ctx
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
    ctx.cancel.check()
    if comments:
        with ctx.timings.span("suggestions"):
            ctx.github.review(
                ctx.repo,
                ctx.pr.number,
                commit_sha=pull.head_sha,
                # The marker lets a re-run of this job (its worker died) find the review, not post it again.
                body=markers.append(
                    f"I {why}, so here is the fix as suggestions you can commit.", "reply", reply.key
                ),
                comments=comments,
            )
    timings = ctx.timings.as_ms(total=ctx.timings.total(started))
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
    record_outcome(ctx, reply.command, "suggested")
    continued = tuple(
        f"Patch of the suggested fix, continued (part {n} of {len(overflow)}):\n\n{part}"
        for n, part in enumerate(overflow, 1)
    )
    return Landed("suggested", "\n\n".join(parts), "suggested", continued)


def already_committed(reply: Reply, pull: PullInfo) -> Landed | None:
    """On a re-run, return the commit when the head is this command's fix (the earlier run got that far)."""
    ctx, command = reply.ctx, reply.command
    # Through the base repository: a fork's head commit is served there, while the fork may be private.
    head = ctx.github.commit(pull.base_repo, pull.head_sha)
    if reply.url not in head.message:
        return None
    own_commits.record(ctx.redis, pull.head_sha)
    # The first run died before recording its commit (or its diff): the session learns the SHA now.
    entry = sessions.load(ctx.redis, ctx.pr.key).get(entry_id("fix", command.comment_id))
    if entry is None or entry.sha != pull.head_sha:
        record_outcome(ctx, command, COMMITTED, sha=pull.head_sha)
    return Landed("committed", f"Pushed a fix in {head.html_url or pull.head_sha}", pull.head_sha)


def already_suggested(reply: Reply, pull: PullInfo) -> Landed | None:
    """On a re-run for a fork, return this command's review when it was posted (then reply, if not yet)."""
    if not policy.closed_fork(pull):
        return None
    if reply.ctx.github.find_review(reply.ctx.repo, reply.ctx.pr.number, reply.key) is None:
        return None
    return Landed(
        "suggested", "Posted the fix as suggestions in a review (this branch is in a fork).", "suggested"
    )


def mark_done(ctx: JobContext, command: CommandRef, result: str) -> None:
    """Record that this command's visible result (commit or review, and the reply) is complete.

    Written only after the reply: a worker killed between the commit and the reply leaves no record, so
    the re-run finds its own commit on the branch and replies.
    """
    ctx.redis.set(keys.FIX_DONE.format(command.comment_id), result, ex=keys.FIX_DONE.seconds)
