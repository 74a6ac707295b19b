"""Automatic review without noise: one review per head, suggestions on valid lines, nothing posted twice.

Flow: debounce pushes, open the "Spark" check run, read the config from the base branch, review each changed
file in parallel (one model call per file, only files whose content changed since the last reviewed head),
verify every proposed fix, assemble the review (pure core), post it only if the head did not move, record the
findings in the per-PR ledger, resolve Spark's threads whose finding is gone, and conclude the check run.
The ledger is ``workers.memory.ledger``; the "Apply safe fixes" button the check run offers is
``workers.flows.safe_fixes``.
"""

from __future__ import annotations

import hashlib
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from bot import keys
from bot.adapters.cerebras import ModelError
from bot.adapters.github_port import (
    GitHubError,
    PullDiff,
    PullInfo,
    RateLimited,
    ReviewCommentInfo,
    ReviewThread,
    Unreadable,
)
from bot.cancel import Cancelled
from bot.core import crossref, policy
from bot.core.anchors import read_suggestion
from bot.core.answers import parse_review_answer
from bot.core.assembly import (
    FileResult,
    ReviewDraft,
    ReviewLimits,
    assemble_review,
    coverage_section,
    preview,
    summarise,
)
from bot.core.config import ConfigResult
from bot.core.diff import parse_diff, split_lines, strip_ending
from bot.core.edits import apply_edits
from bot.core.fixes import judge_edit
from bot.core.ignore import DEFAULT_MAX_BYTES, skip_reason
from bot.core.limits import fit_check_output
from bot.core.policy import check_target_path
from bot.core.prompts import PullRequestText, fit_request, review_messages
from bot.core.render import code, postable, prose
from bot.core.secrets import redact_diff, redact_file
from bot.core.types import FileDiff, FileStatus, Finding
from bot.core.window import review_view, skipped
from bot.core.wording import plural
from bot.index.context import NO_INDEX, PullIndex, open_index, ready_index
from bot.index.warm import Ready
from bot.refs import check_run_external_id
from workers.context import JobContext
from workers.flows.parallel import submit
from workers.flows.repo_config import load_repo_config
from workers.flows.safe_fixes import APPLY_ACTION, store_safe_fixes
from workers.flows.steering import verifier
from workers.memory import last_seen, own_commits
from workers.memory.ledger import (
    record,
    resolve_gone,
    review_comments,
    review_threads,
    reviewed_hashes,
    sync_ledger,
)
from workers.timings import ms

CHECK_NAME = "Spark"
NO_PATCH = "GitHub sent no patch for it (a binary file, or a diff over GitHub's size limits)"
UNLISTED = "GitHub lists at most 3,000 files of a pull request"
# Files reviewed at once (each a read and a model call); Cerebras' per-minute quotas, not latency, bound this.
FILE_CONCURRENCY = 8


@dataclass
class ReviewRun:
    """One review job's state."""

    ctx: JobContext
    pull: PullInfo
    config: ConfigResult
    # What Spark last saw of the pull request (its head noted as the review began).
    seen: last_seen.Seen | None = None
    started: float = field(default_factory=time.perf_counter)
    # Files are reviewed on a thread pool; what they share is changed under this lock.
    lock: threading.Lock = field(default_factory=threading.Lock)
    model_failures: list[str] = field(default_factory=list)
    # The repository's index at the head (callers and definitions from other files), and what it left out.
    index: PullIndex = NO_INDEX
    context_notes: list[str] = field(default_factory=list)
    # Held by each file while it is reviewed: at most FILE_CONCURRENCY files at once.
    slots: threading.BoundedSemaphore = field(
        default_factory=lambda: threading.BoundedSemaphore(FILE_CONCURRENCY)
    )


def run_review(ctx: JobContext, trigger: str, *, full: bool = False) -> str:
    """Review the pull request's head; return what happened (posted, nothing new, skipped, stale, ...)."""
    gh = ctx.github
    if trigger == "synchronize":
        if ctx.pr.head_sha and own_commits.is_own(ctx.redis, ctx.pr.key, ctx.pr.head_sha):
            # Spark's own verified fix: reviewing it again would only cost a model call per file.
            return "own commit"
        if not _quiet_for(ctx, ctx.settings.spark_review_debounce_seconds):
            return "superseded"
    pull = gh.pull(ctx.repo, ctx.pr.number)
    if ctx.pr.head_sha and pull.head_sha != ctx.pr.head_sha:
        ctx.log.info("review.stale", head=pull.head_sha)
        return "stale"
    if pull.state != "open":
        return "closed"
    # Even when no review follows (auto review off), a question on this head can read ahead on it.
    seen = last_seen.remember(ctx.redis, ctx.pr.key, pull, None, last_seen.recall(ctx.redis, ctx.pr.key))
    config = load_repo_config(gh, pull.base_repo, pull.base_ref)
    ctx.cancel.verify = verifier(gh, ctx.repo, pull.author, config.config)
    automatic = trigger not in ("command", "rerequested")
    if automatic and not config.config.auto_review:
        return "auto review off"
    if automatic and pull.draft and not config.config.review_drafts:
        return "draft skipped"
    extra = (config.config.debounce_seconds or 0.0) - ctx.settings.spark_review_debounce_seconds
    if trigger == "synchronize" and extra > 0 and not _quiet_for(ctx, extra):
        return "superseded"
    run = ReviewRun(ctx, pull, config, seen)
    # What the review reads next does not depend on the check run: fetch it while the check is created,
    # so a review's critical path holds the model calls and a few round trips, not a dozen.
    reads = _Reads(
        index=open_index(gh, ctx.settings, ctx.redis, pull.base_repo, pull.head_sha),
        diff=submit(gh.pull_diff, ctx.repo, ctx.pr.number),
        threads=submit(review_threads, ctx),
        comments=submit(review_comments, ctx),
    )
    check_id = _open_check_run(ctx, pull.head_sha)
    try:
        return _review(run, check_id, reads, full=full or not automatic)
    except Cancelled as exc:
        _conclude(run, check_id, "cancelled", "Review stopped", f"Stopped: {exc.reason}. Nothing was posted.")
        return "cancelled"
    except ModelError as exc:
        _conclude(
            run, check_id, "neutral", "Model unavailable", f"The model call failed: {prose(exc.user_message)}"
        )
        return "failed"
    except RateLimited:
        raise  # deferred: the check stays in progress and the re-run of this job concludes it
    except Exception as exc:
        # Never leave the check spinning: say what broke, then let the job fail (and be retried) visibly.
        problem = f"The review failed: {type(exc).__name__}: {prose(str(exc))}"
        try:
            _conclude(run, check_id, "failure", "Review failed", problem)
        except GitHubError as closing:
            ctx.log.warning("review.conclude_failed", status=closing.status)
        raise


def _open_check_run(ctx: JobContext, head_sha: str) -> int:
    """Create the "Spark" check run in progress; a retried job (its worker died) reuses the one it made."""
    key = keys.REVIEW_CHECK.format(ctx.job_id, head_sha)
    if ctx.job_id:
        known = ctx.redis.get(key)
        if known is not None:
            ctx.github.update_check_run(ctx.repo, int(known), status="in_progress")
            return int(known)
    check_id = ctx.github.create_check_run(
        ctx.repo,
        head_sha,
        CHECK_NAME,
        status="in_progress",
        external_id=check_run_external_id(ctx.pr.number, ctx.job_id or ""),
    )
    if ctx.job_id:
        ctx.redis.set(key, check_id, ex=keys.REVIEW_CHECK.seconds)
    return check_id


def _quiet_for(ctx: JobContext, window: float) -> bool:
    """Wait out a quiet window after a push; return False when a newer push (or a stop) came meanwhile."""
    deadline = time.monotonic() + window
    while not ctx.cancel.cancelled():
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        time.sleep(min(0.1, left))
    ctx.log.info("review.debounced", reason=ctx.cancel.reason)
    return False


@dataclass(frozen=True, slots=True)
class _Reads:
    """GitHub reads started early, in parallel: the index, the diff, the review threads and comments."""

    index: Future[Ready]
    diff: Future[PullDiff]
    threads: Future[list[ReviewThread]]
    comments: Future[list[ReviewCommentInfo] | None]


def _review(run: ReviewRun, check_id: int, reads: _Reads, *, full: bool) -> str:
    ctx, pull, gh = run.ctx, run.pull, run.ctx.github
    config = run.config.config
    pull_diff = reads.diff.result()
    diff = parse_diff(pull_diff.text)
    last_seen.remember(ctx.redis, ctx.pr.key, pull, diff.readable_paths(), run.seen)
    reviewed_before = {} if full else reviewed_hashes(ctx)
    run.index = ready_index(reads.index, ctx.settings, pull.base_repo, pull.base_sha, ctx.github.secrets)
    futures = {f.path: submit(_review_file, run, f, reviewed_before) for f in diff.files}
    results: list[FileResult] = []
    hashes: dict[str, str] = {}
    threads = reads.threads.result()
    ledger = sync_ledger(ctx, threads, reads.comments.result())
    for path, future in futures.items():
        result, digest = future.result()
        results.append(result)
        if digest:
            hashes[path] = digest
    # A diff too large for GitHub comes file by file, without the patch of binary and very large files.
    results += [FileResult(path, coverage=skipped(path, NO_PATCH)) for path in pull_diff.missing]
    unlisted = max(0, pull.changed_files - pull_diff.listed) if pull_diff.source == "files" else 0
    ctx.cancel.check()
    limits = ReviewLimits(max_inline=config.max_inline_comments, min_severity=config.min_severity)
    draft = assemble_review(diff, results, ledger, limits)
    fresh = gh.pull(ctx.repo, ctx.pr.number)
    if fresh.head_sha != pull.head_sha:
        _conclude(run, check_id, "neutral", "Head moved", "A newer push arrived; this head was not reviewed.")
        return "stale"
    ctx.cancel.check()
    dry_run = config.dry_run
    posted = False
    if draft.finding_count and not dry_run:
        gh.review(
            ctx.repo,
            ctx.pr.number,
            commit_sha=pull.head_sha,
            body=draft.body,
            comments=draft.comments,
            key=ctx.private_key(f"review-{pull.head_sha}"),
        )
        posted = True
    resolved = 0
    if not dry_run:
        # A dry run writes nothing, not even to the ledger: turning it off must post what it only showed.
        record(ctx, draft, hashes, posted)
        resolved = resolve_gone(ctx, threads, results)
    store_safe_fixes(ctx, pull.head_sha, draft, results)
    summary = summarise(draft, _seconds(run)) + "\n\n"
    if unlisted:
        summary += f"**{plural(unlisted, 'more changed file')} not reviewed**: {UNLISTED}.\n\n"
    summary += coverage_section(draft.coverage)
    summary += _context_section(run)
    if resolved:
        summary += f"\nResolved {plural(resolved, 'earlier thread')} whose finding is gone."
    if run.config.errors:
        summary += (
            "\n\n**Configuration problems** (each bad key is dropped; the rest applies):\n"
            + "\n".join(f"- {code(str(e))}" for e in run.config.errors)
        )
    if dry_run:
        summary += "\n\n**Dry run**: nothing was posted. The review would have been:\n\n" + preview(draft)
    title = f"{plural(draft.finding_count, 'new finding')}" if draft.finding_count else "No new findings"
    conclusion = "neutral" if draft.finding_count else "success"
    if run.model_failures:
        title += f"; {plural(len(run.model_failures), 'file')} not reviewed (model unavailable)"
        conclusion = "neutral"
    if pull_diff.missing or unlisted:
        title += f"; {plural(len(pull_diff.missing) + unlisted, 'file')} not reviewed (diff too large)"
        conclusion = "neutral"
    _conclude(run, check_id, conclusion, title, summary, draft)
    if posted:
        return "posted"
    # Files the model could not answer for were not reviewed: that is not "nothing new".
    return "model failed" if run.model_failures else "nothing new"


def _review_file(run: ReviewRun, file: FileDiff, reviewed_before: dict[str, str]) -> tuple[FileResult, str]:
    """Review one file when one of the review's slots is free."""
    with run.slots:
        return _review_one(run, file, reviewed_before)


def _review_one(run: ReviewRun, file: FileDiff, reviewed_before: dict[str, str]) -> tuple[FileResult, str]:
    """Review one file: skip with a reason, or one model call whose findings are verified."""
    ctx, pull = run.ctx, run.pull
    config = run.config.config
    path = file.path
    if file.status is FileStatus.DELETED:
        return FileResult(path, coverage=skipped(path, "file deleted")), ""
    if not config.selects(path):
        return FileResult(path, coverage=skipped(path, "excluded by .github/spark.yml")), ""
    reason = skip_reason(path, is_binary=file.is_binary)
    if reason:
        return FileResult(path, coverage=skipped(path, reason)), ""
    try:
        text = ctx.github.file_text(pull.base_repo, path, pull.head_sha, max_bytes=DEFAULT_MAX_BYTES)
    except Unreadable as exc:
        # A symlink, a submodule or a file over the size limit: listed as not reviewed, with the reason.
        return FileResult(path, coverage=skipped(path, exc.reason)), ""
    except GitHubError as exc:
        # GitHub's retries are spent: this file is listed as not reviewed, the others still are.
        return FileResult(path, coverage=skipped(path, f"could not be read from GitHub ({exc})")), ""
    if text is None:
        return FileResult(path, coverage=skipped(path, "not found at the head")), ""
    digest = hashlib.sha1(text.encode("utf-8", "surrogateescape")).hexdigest()
    if reviewed_before.get(path) == digest:
        return FileResult(
            path, head_text=text, coverage=skipped(path, "unchanged since the last review")
        ), digest
    ctx.cancel.check()
    # What the model may see: the file and both sides of its diff, each by the file's rules.
    shown, shown_diff = redact_file(path, text).text, redact_diff(file)
    settings = ctx.settings
    # Callers of what the file's change touches and definitions of what it uses, in their share of the room.
    elsewhere = run.index.for_change(
        [file], crossref.context_budget(ctx.limits.budget(0), crossref.REVIEW_TOKENS)
    )
    if elsewhere.notes:
        with run.lock:
            run.context_notes += [f"{code(path)}: {note}" for note in elsewhere.notes]
    pr_text = PullRequestText(pull.title, pull.body)
    request = fit_request(
        lambda view: review_messages(
            view,
            pr_text,
            min_severity=config.min_severity,
            instructions=config.instructions,
            elsewhere=elsewhere.text,
        ),
        lambda budget: review_view(shown_diff, shown, budget),
        ctx.limits,
    )
    if not request.messages:
        return FileResult(path, head_text=text, coverage=request.coverage), ""
    model = config.model_deep or settings.spark_model_deep
    try:
        completion = ctx.complete(request.messages, model, "review", config)
    except ModelError as exc:
        # One file the model could not answer for is listed as not reviewed; the others still are.
        with run.lock:
            run.model_failures.append(path)
        reason = f"not reviewed: the model call failed ({exc.user_message})"
        return FileResult(path, head_text=text, coverage=skipped(path, reason)), ""
    answer = parse_review_answer(completion.text, path)
    findings = tuple(_finding(path, text, shown, f) for f in answer.findings)
    return FileResult(path, findings, text, request.coverage), digest


def _context_section(run: ReviewRun) -> str:
    """Say what code from other files the model was shown, and what it was not (nothing clipped silently)."""
    if run.index.note:
        return f"\n\n**Context from other files**: {prose(run.index.note)}."
    if not run.context_notes:
        return ""
    listed = "\n".join(f"- {note}" for note in sorted(run.context_notes))
    return "\n\n**Context from other files**, left out for the token budget:\n" + listed


def _finding(path: str, text: str, shown: str, proposed: Any) -> Finding:
    """Turn a parsed finding into a core ``Finding``; keep its fix only if it applies and still parses."""
    block = proposed.block
    if block is None:
        return Finding(path=path, title=proposed.title, body=proposed.body, severity=proposed.severity)
    replacement: str | None = None
    where: tuple[int, int] | tuple[None, None] = (None, None)
    if check_target_path(path) is not None:
        # The path rules of every write: a finding on a workflow file is reported, never suggested.
        return Finding(
            path=path, title=proposed.title, body=proposed.body, severity=proposed.severity, code=block.search
        )
    result = apply_edits(shown, (block,))
    # The fix's judge: applied once to what the model saw, mapped back onto the real file without touching
    # a redacted line, and verified.
    judged = judge_edit(path, text, shown, result.text) if result.ok and result.applied else None
    if judged is not None and judged.ok and judged.text is not None:
        applied = result.applied[0]
        # From the restored file: a redacted context line inside the block keeps its real text.
        written = split_lines(judged.text)[applied.start_line - 1 : applied.end_line]
        replacement = "".join(strip_ending(line) + "\n" for line in written)
        # The lines it replaced, where it applied: the suggestion goes exactly there.
        where = (applied.source_start, applied.source_end)
        if not postable(replacement):
            # Posting would redact it, and a click would commit the placeholder: no suggestion.
            replacement, where = None, (None, None)
    return Finding(
        path=path,
        title=proposed.title,
        body=proposed.body,
        severity=proposed.severity,
        code=block.search,
        line=where[0],
        end_line=where[1],
        replacement=replacement,
    )


def _seconds(run: ReviewRun) -> dict[str, float]:
    return run.ctx.timings.as_seconds(total=run.ctx.timings.total(run.started))


def _conclude(
    run: ReviewRun, check_id: int, conclusion: str, title: str, summary: str, draft: ReviewDraft | None = None
) -> None:
    """Complete the check run; offer "Apply safe fixes" when the review has suggestions."""
    stats = run.ctx.timings
    if stats.calls:
        summary += (
            f"\nModel: {plural(stats.calls, 'call')}, {plural(stats.completion_tokens, 'token')} "
            f"({stats.reasoning_tokens} of them reasoning), {stats.tokens_per_second:.0f} tok/s, "
            f"first token {ms(stats.first_token):.0f} ms, first content {ms(stats.first_content):.0f} ms"
        )
        summary += "".join(f"\n\n{note}" for note in stats.notes)
    # GitHub refuses a summary over 65,535 bytes: the rest goes to the run's text, marked as cut.
    summary, text = fit_check_output(summary)
    output = {"title": title, "summary": summary, **({"text": text} if text else {})}
    fields: dict[str, Any] = {"status": "completed", "conclusion": conclusion, "output": output}
    writable = policy.push_refusal(run.pull) is None
    if draft is not None and writable and any(read_suggestion(c.body) is not None for c in draft.comments):
        fields["actions"] = [
            {
                "label": "Apply safe fixes",
                "description": "Commit every suggestion",
                "identifier": APPLY_ACTION,
            }
        ]
    run.ctx.github.update_check_run(run.ctx.repo, check_id, **fields)
