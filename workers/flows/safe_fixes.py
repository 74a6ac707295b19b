"""The "Apply safe fixes" button: the review keeps each file as its verified suggestions would leave it, and
the button commits them all in one commit and resolves their threads."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from bot import keys
from bot.adapters.github_port import Committed, PushRefused
from bot.core import policy
from bot.core.anchors import apply_suggestions, read_suggestion
from bot.core.assembly import FileResult, ReviewDraft
from bot.core.policy import check_target_path
from bot.core.render import code
from bot.core.session import COMMITTED, Entry, entry_id
from bot.core.verify import verify
from bot.core.wording import plural
from workers.context import JobContext
from workers.flows.pushes import refused_reason
from workers.memory import own_commits
from workers.memory import session as sessions
from workers.memory.ledger import mark_resolved, own_finding, review_threads

# The identifier of the check run's button (its requested_action event names it).
APPLY_ACTION = "apply_fixes"


def store_safe_fixes(
    ctx: JobContext, head_sha: str, draft: ReviewDraft, results: Sequence[FileResult]
) -> None:
    """Keep each file as every inline suggestion would leave it, for the "Apply safe fixes" button."""
    heads = {r.path: r.head_text for r in results if r.head_text is not None}
    files: dict[str, str] = {}
    for path in {c.path for c in draft.comments if read_suggestion(c.body) is not None}:
        head = heads.get(path)
        if head is None or check_target_path(path) is not None:
            continue
        suggestions = [c for c in draft.comments if c.path == path and read_suggestion(c.body) is not None]
        fixed = apply_suggestions(head, suggestions)
        # Each fix was verified alone; all of them together must still parse, or the button leaves it out.
        if verify(path, fixed, before=head).ok:
            files[path] = fixed
    if not files:
        # Keep what an earlier review of this head stored: its check run's button still points at it.
        return
    fingerprints = [c.fingerprint for c in draft.comments if c.fingerprint and c.path in files]
    ctx.redis.set(
        _safe_fixes_key(ctx, head_sha),
        orjson.dumps({"files": files, "fingerprints": fingerprints}),
        ex=keys.SAFE_FIXES.seconds,
    )


def _safe_fixes_key(ctx: JobContext, head_sha: str) -> str:
    return keys.SAFE_FIXES.format(ctx.pr.key, head_sha)


def apply_safe_fixes(ctx: JobContext) -> str:
    """Commit the verified suggestions of the review of the current head in one commit ("Apply safe fixes").

    The commit goes through ``createCommitOnBranch`` with the reviewed head as ``expectedHeadOid`` (GitHub
    signs it and refuses it if the branch moved); the threads of the applied suggestions are resolved.
    """
    gh = ctx.github
    pull = gh.pull(ctx.repo, ctx.pr.number)
    raw = ctx.redis.get(_safe_fixes_key(ctx, pull.head_sha))
    stored = orjson.loads(raw) if raw is not None else {"files": {}}
    # The path rules of every write, applied again at the commit: the button never writes a refused path.
    files = {str(k): str(v) for k, v in stored["files"].items() if check_target_path(str(k)) is None}
    if not files:
        gh.upsert_comment(
            ctx.repo,
            ctx.pr.number,
            _safe_fixes_reply(ctx, pull.head_sha),
            f"There are no verified suggestions to apply on the current head ({pull.head_sha[:7]}): the "
            "branch moved since the review, or the review had none. Re-run the check to review the new head.",
        )
        return "nothing to apply"
    refusal = policy.push_refusal(pull)
    if refusal is not None:
        gh.upsert_comment(
            ctx.repo,
            ctx.pr.number,
            _safe_fixes_reply(ctx, pull.head_sha),
            f"Nothing was committed: I {refusal}.",
        )
        return "refused"
    fingerprints = {str(fp) for fp in stored.get("fingerprints", [])}
    with own_commits.committing(ctx.redis, ctx.pr.key):
        result = gh.commit_on_branch(
            pull.head_repo,
            pull.head_ref,
            expected_head=pull.head_sha,
            headline="Apply Spark's suggested fixes",
            body=f"Applied the verified suggestions of Spark's review of {pull.head_sha[:7]}.",
            additions={path: text.encode("utf-8", "surrogateescape") for path, text in files.items()},
        )
        if isinstance(result, Committed):
            # The push of this commit comes back as a synchronize event; the review skips Spark's own.
            own_commits.made(ctx.redis, ctx.pr.key, pull, result.oid, list(files))
    if isinstance(result, PushRefused):
        gh.upsert_comment(
            ctx.repo,
            ctx.pr.number,
            _safe_fixes_reply(ctx, pull.head_sha),
            f"Nothing was committed: I {refused_reason(result, pull)}. The suggestions stay in the review; "
            "commit them from there.",
        )
        return "refused"
    if not isinstance(result, Committed):
        gh.upsert_comment(
            ctx.repo,
            ctx.pr.number,
            _safe_fixes_reply(ctx, pull.head_sha),
            "The branch moved while the suggestions were being applied; nothing was committed. "
            "Re-run the check to review the new head.",
        )
        return "branch moved"
    ctx.redis.delete(_safe_fixes_key(ctx, pull.head_sha))
    # In the session, so `/spark undo` can revert it and a follow-up fix knows of it.
    entry = Entry(
        id=entry_id("safe-fixes", result.oid),
        command="safe-fixes",
        author="",
        text="Apply Spark's suggested fixes",
        outcome=COMMITTED,
        files=tuple(sorted(files)),
        sha=result.oid,
        parent=pull.head_sha,
    )
    sessions.record(ctx.redis, ctx.pr.key, entry)
    resolved = 0
    for thread in review_threads(ctx):
        fp = own_finding(ctx, thread)
        if fp in fingerprints and not thread.is_resolved and gh.resolve_thread(thread.id):
            mark_resolved(ctx, fp)
            resolved += 1
    gh.upsert_comment(
        ctx.repo,
        ctx.pr.number,
        _safe_fixes_reply(ctx, pull.head_sha),
        f"Applied {plural(len(fingerprints), 'verified suggestion')} to "
        f"{', '.join(code(p) for p in sorted(files))} in {result.url or result.oid}; "
        f"{plural(resolved, 'thread')} resolved.",
    )
    return "committed"


def _safe_fixes_reply(ctx: JobContext, head_sha: str) -> str:
    """Return the marker key of the button's reply on ``head_sha``: nobody else can predict it."""
    return ctx.private_key(f"safe-fixes-{head_sha}")
