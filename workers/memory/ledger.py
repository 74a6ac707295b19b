"""A pull request's review memory: what Spark posted and what became of it, and which contents it reviewed.

The ledger (``spark:ledger:*``) maps each finding's fingerprint to posted, resolved, answered or dismissed;
it is raised from what GitHub shows (threads resolved, answered, 👎'd), so a lost key forgets nothing that
GitHub still shows. The reviewed hashes (``spark:reviewed:*``) let a push's review skip files whose content
it has seen. Both expire a while after their last write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot import keys
from bot.adapters.github_port import GitHubError, ReviewCommentInfo, ReviewThread
from bot.core.assembly import FileResult, ReviewDraft
from bot.core.findings import fingerprint_of, read_finding_marker
from bot.core.ledger import LedgerState, ThreadReply, ledger_from_threads, merge_ledgers
from bot.core.window import CoverageStatus
from bot.redis_server import as_text
from workers.context import JobContext


def review_threads(ctx: JobContext) -> list[ReviewThread]:
    """Return the PR's review threads (empty, with a warning, when GitHub will not list them)."""
    try:
        return ctx.github.review_threads(ctx.repo, ctx.pr.number)
    except GitHubError as exc:
        ctx.log.warning("review.threads_failed", status=exc.status)
        return []


def review_comments(ctx: JobContext) -> list[ReviewCommentInfo] | None:
    """Return the PR's review comments, or None (with a warning) when GitHub will not list them."""
    try:
        return ctx.github.review_comments(ctx.repo, ctx.pr.number)
    except GitHubError as exc:
        ctx.log.warning("review.comments_failed", status=exc.status)
        return None


def sync_ledger(
    ctx: JobContext, threads: Sequence[ReviewThread], comments: Sequence[ReviewCommentInfo] | None
) -> dict[str, LedgerState]:
    """Return the PR's ledger: Redis's, raised by what GitHub shows (threads resolved, answered, 👎'd).

    GitHub's own markers are the truth that survives a lost Redis key; Redis remembers findings posted
    in a review body, which have no thread.
    """
    key = keys.LEDGER.format(ctx.pr.key)
    stored: dict[str, LedgerState] = {
        as_text(k): _state(as_text(v)) for k, v in ctx.redis.hgetall(key).items()
    }
    if comments is None:
        return stored
    resolved = {t.first_comment_id for t in threads if t.is_resolved}
    seen = ledger_from_threads(
        (
            ThreadReply(c.id, c.in_reply_to_id, c.author, c.body, c.thumbs_down, c.id in resolved)
            for c in comments
        ),
        ctx.github.own_login,
    )
    ledger = merge_ledgers(stored, seen)
    changed = {fp: state for fp, state in ledger.items() if stored.get(fp) != state}
    if changed:
        mapping: dict[Any, Any] = dict(changed)
        with ctx.redis.pipeline() as pipe:
            pipe.hset(key, mapping=mapping)
            pipe.expire(key, keys.LEDGER.seconds)
            pipe.execute()
    return ledger


def _state(value: str) -> LedgerState:
    if value in ("posted", "resolved", "answered", "dismissed"):
        return value  # type: ignore[return-value]
    return "posted"


def reviewed_hashes(ctx: JobContext) -> dict[str, str]:
    raw = ctx.redis.hgetall(keys.REVIEWED.format(ctx.pr.key))
    return {as_text(k): as_text(v) for k, v in raw.items()}


def record(ctx: JobContext, draft: ReviewDraft, hashes: Mapping[str, str], published: bool) -> None:
    """Remember what was posted (never post it again) and which file contents were reviewed."""
    with ctx.redis.pipeline() as pipe:
        if published and draft.fingerprints:
            pipe.hset(keys.LEDGER.format(ctx.pr.key), mapping=dict.fromkeys(draft.fingerprints, "posted"))
            pipe.expire(keys.LEDGER.format(ctx.pr.key), keys.LEDGER.seconds)
        if hashes:
            # redis-py's stub wants its own key union; a plain dict of str is what it sends.
            reviewed: dict[Any, Any] = dict(hashes)
            pipe.hset(keys.REVIEWED.format(ctx.pr.key), mapping=reviewed)
            pipe.expire(keys.REVIEWED.format(ctx.pr.key), keys.REVIEWED.seconds)
        pipe.execute()


def resolve_gone(ctx: JobContext, shown: Sequence[ReviewThread], results: Sequence[FileResult]) -> list[str]:
    """Resolve Spark's open threads whose lines a push changed and whose finding is no longer reported;
    return the findings of the threads resolved."""
    # Only files the model saw again can say a finding is gone; unchanged files keep their threads.
    rereviewed = {
        r.path for r in results if r.coverage is None or r.coverage.status is not CoverageStatus.SKIPPED
    }
    current = {fingerprint_of(f) for r in results for f in r.findings}
    resolved: list[str] = []
    for thread in shown:
        fp = own_finding(ctx, thread)
        if fp is None or thread.is_resolved or thread.path not in rereviewed or fp in current:
            continue
        if not thread.is_outdated:
            # The lines it points at are as they were: the model merely not repeating itself proves nothing.
            continue
        if ctx.github.resolve_thread(thread.id):
            mark_resolved(ctx, fp)
            resolved.append(fp)
    return resolved


def mark_resolved(ctx: JobContext, fp: str) -> None:
    """Record a finding's thread as resolved (the ledger may have expired meanwhile: it expires again)."""
    with ctx.redis.pipeline() as pipe:
        pipe.hset(keys.LEDGER.format(ctx.pr.key), fp, "resolved")
        pipe.expire(keys.LEDGER.format(ctx.pr.key), keys.LEDGER.seconds)
        pipe.execute()


def mark_dismissed(ctx: JobContext, fp: str) -> bool:
    """Record a finding dismissed (a "won't fix" or a 👎 in its thread); return whether it was not yet."""
    key = keys.LEDGER.format(ctx.pr.key)
    with ctx.redis.pipeline() as pipe:
        pipe.hget(key, fp)
        pipe.hset(key, fp, "dismissed")
        pipe.expire(key, keys.LEDGER.seconds)
        before, _, _ = pipe.execute()
    return as_text(before) != "dismissed"


def thread_states(ctx: JobContext, threads: Sequence[ReviewThread]) -> dict[str, bool]:
    """Return each finding of Spark's threads with whether GitHub shows its thread resolved."""
    states: dict[str, bool] = {}
    for thread in threads:
        fp = own_finding(ctx, thread)
        if fp is not None:
            # A finding in several threads (a suggestion over two hunks) is resolved when all of them are.
            states[fp] = states.get(fp, True) and thread.is_resolved
    return states


def own_finding(ctx: JobContext, thread: ReviewThread) -> str | None:
    """Return the finding a thread Spark opened carries; a thread anyone else opened carries none."""
    if not ctx.github.is_own(thread.first_comment_author):
        return None
    return read_finding_marker(thread.first_comment_body)
