"""Where a ``/spark fix`` lands: one verified commit on the branch, or ```suggestion blocks and patches when
Spark may not push there; the branch moving meanwhile; a re-run finding what its first run did."""

from __future__ import annotations

import time

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
from bot.core.config import RepoConfig
from bot.core.diff import format_patch
from bot.core.edits import decode_source, encode_source
from bot.core.fixes import (
    FileChange,
    commit_message,
    fix_reply,
    format_timings,
    judge_answers,
)
from bot.core.ignore import DEFAULT_MAX_BYTES
from bot.core.limits import BODY_MAX_CHARS, split_patches
from bot.core.render import code, postable, prose
from bot.core.secrets import redact_file
from bot.core.session import COMMITTED
from bot.core.types import Diff, ReviewComment
from bot.core.wording import plural
from workers import own_commits
from workers import session as sessions
from workers.flows.edit import EditOutcome
from workers.flows.fix_replies import FixFailed, send_reply
from workers.flows.fix_run import FixRun

DONE_KEY = keys.FIX_DONE.prefix
RECORD_TTL = keys.FIX_DONE.seconds
# createCommitOnBranch answered 5xx: try again (expectedHeadOid keeps it from committing twice).
COMMIT_ATTEMPTS = 3
COMMIT_BACKOFF = 0.2
# GitHub refuses a comment body over 65,536 characters; leave room for the rest of the reply.
# Room a reply keeps beside its patch blocks for the overflow note, the timings line and the marker.
PATCH_NOTE_ROOM = 1_000


def refused_reason(refused: PushRefused, pull: PullInfo) -> str:
    """Return why GitHub refused Spark's push, naming the guard and each rule it broke."""
    rules = "; ".join(refused.rules) or refused.message
    if refused.guard == "permissions":
        return f"was not allowed to push to {code(pull.head_repo)} ({prose(rules)})"
    return f"could not push to {code(pull.head_ref)}: its {refused.guard} refused the commit ({prose(rules)})"


def commit(
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
            send_reply(run, reply, reaction="rocket")
            _mark_done(run, result.oid)
            ctx.log.info("fix.committed", commit=result.oid, **timings)
            return "committed"
        assert isinstance(result, BranchMoved)
        fresh = run.gh.pull(ctx.repo, ctx.pr.number)
        if fresh.head_sha == head:
            break
        if already_committed(run, fresh):
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


def _record_commit(run: FixRun, changes: list[FileChange], oid: str, parent: str) -> None:
    """Record the commit in the session: the files, the diff (secrets redacted, as the model saw them)."""
    patch = "".join(
        format_patch(c.path, redact_file(c.path, c.before).text, redact_file(c.path, c.after).text)
        for c in changes
    )
    run.outcome(COMMITTED, files=tuple(c.path for c in changes), diff=patch, sha=oid, parent=parent)


def routed_to(path: str, outcomes: dict[str, EditOutcome]) -> list[EditBlock]:
    """Return the blocks other targets' answers addressed to ``path``."""
    return [block for other in outcomes.values() for block in other.attempt.routed if block.path == path]


def _reapply(
    run: FixRun, pull: PullInfo, changes: list[FileChange], outcomes: dict[str, EditOutcome]
) -> list[FileChange]:
    """Judge the earlier answers against the files at the new head; all must still apply."""
    fresh: list[FileChange] = []
    for change in changes:
        data = read_target(run.gh, pull.base_repo, pull.head_sha, change.path)
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


def suggest(run: FixRun, pull: PullInfo, diff: Diff, changes: list[FileChange], why: str) -> str:
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
    send_reply(run, "\n\n".join(parts), reaction="rocket")
    for n, part in enumerate(overflow, 1):
        text = f"Patch of the suggested fix, continued (part {n} of {len(overflow)}):\n\n{part}"
        run.gh.upsert_comment(run.ctx.repo, run.ctx.pr.number, f"{run.key()}-patch-{n}", text)
    _mark_done(run, "suggested")
    return "suggested"


def read_target(gh: GitHubPort, repo: str, ref: str, path: str) -> str | None:
    """Read a file to fix: a regular text file within the review's size limit (else ``Unreadable``)."""
    return gh.file_text(repo, path, ref, max_bytes=DEFAULT_MAX_BYTES)


def already_committed(run: FixRun, pull: PullInfo) -> bool:
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
    send_reply(run, f"Pushed a fix in {head.html_url or pull.head_sha}", reaction="rocket")
    _mark_done(run, pull.head_sha)
    return True


def already_suggested(run: FixRun, pull: PullInfo) -> bool:
    """On a re-run for a fork, return whether this command's review was posted (then reply, if not yet)."""
    if not policy.closed_fork(pull):
        return False
    if run.gh.find_review(run.ctx.repo, run.ctx.pr.number, run.key()) is None:
        return False
    send_reply(
        run, "Posted the fix as suggestions in a review (this branch is in a fork).", reaction="rocket"
    )
    _mark_done(run, "suggested")
    return True


def _mark_done(run: FixRun, result: str) -> None:
    """Record that this command's visible result (commit or review, and the reply) is complete.

    Written only after the reply: a worker killed between the commit and the reply leaves no record, so
    the re-run finds its own commit on the branch and replies.
    """
    run.ctx.redis.set(DONE_KEY + str(run.command.comment_id), result, ex=RECORD_TTL)


def _comment_url(run: FixRun) -> str:
    return run.command.url(run.ctx.settings.github_url, run.ctx.pr)


def _timings(run: FixRun) -> dict[str, float]:
    # Since the webhook was queued: the wait in the queue plus this job's own time.
    return run.ctx.timings.as_ms(total=run.ctx.timings.total(run.started))
