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
from dataclasses import dataclass, field, replace
from typing import Any

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
from bot.core.answers import ReviewFinding, parse_review_answer
from bot.core.assembly import (
    FileResult,
    Links,
    ReviewDraft,
    ReviewLimits,
    assemble_review,
    coverage_section,
    preview,
    summarise,
)
from bot.core.config import ConfigResult, RepoConfig
from bot.core.diff import parse_diff, split_lines, strip_ending
from bot.core.edits import apply_edits
from bot.core.fixes import judge_edit
from bot.core.gate import error_verdict, gate_status, published, review_verdict
from bot.core.ignore import DEFAULT_MAX_BYTES, skip_reason
from bot.core.limits import fit_check_output
from bot.core.policy import check_target_path
from bot.core.prompts import PullRequestText, fit_request, review_messages
from bot.core.render import code, postable, prose
from bot.core.secrets import redact_diff, redact_file
from bot.core.types import Diff, FileDiff, FileStatus, Finding
from bot.core.window import review_view, skipped
from bot.core.wording import plural
from bot.index.context import NO_INDEX, PullIndex, open_index, ready_index
from bot.index.warm import Ready
from bot.refs import check_run_external_id
from workers.context import JobContext
from workers.flows.gate import CHECK_NAME, GateRun, on_own_commit, reevaluate
from workers.flows.parallel import submit, submit_waiting
from workers.flows.read_ahead import ReadAhead
from workers.flows.repo_config import load_repo_config
from workers.flows.safe_fixes import APPLY_ACTION, store_safe_fixes
from workers.flows.steering import verifier
from workers.memory import check_runs, last_seen, own_commits
from workers.memory.ledger import (
    record,
    resolve_gone,
    review_comments,
    review_threads,
    reviewed_hashes,
    sync_ledger,
    thread_states,
)
from workers.timings import ms

NO_PATCH = "GitHub sent no patch for it (a binary file, or a diff over GitHub's size limits)"
UNLISTED = "GitHub lists at most 3,000 files of a pull request"


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
    # Findings that named a line of another file the model was not shown: dropped, and said so.
    dropped: list[str] = field(default_factory=list)
    # The "Spark" check run, created while the files are reviewed.
    check: Future[int] | None = None
    # The files whose model answer (or reason for none) is in, and the head's confirmation, asked as the last
    # one is (``answered``): the answers are judged and the review assembled while it is out.
    answered_paths: set[str] = field(default_factory=set)
    expected: int = 0
    fresh: Future[PullInfo] | None = None

    def answered(self, path: str) -> None:
        """Note that ``path`` needs the model no more; once every file does, confirm the head."""
        with self.lock:
            if path in self.answered_paths or self.fresh is not None:
                return
            self.answered_paths.add(path)
            if len(self.answered_paths) < self.expected:
                return
            gh = self.ctx.github
            self.fresh = submit(gh.pull, self.ctx.repo, self.ctx.pr.number)


def run_review(ctx: JobContext, trigger: str, *, full: bool = False) -> str:
    """Review the pull request's head; return what happened (posted, nothing new, skipped, stale, ...)."""
    gh = ctx.github
    if trigger == "synchronize":
        if ctx.pr.head_sha and own_commits.is_own(ctx.redis, ctx.pr.key, ctx.pr.head_sha):
            # Spark's own verified fix: reviewing it again would only cost a model call per file. With the
            # merge gate on, its head still gets the check, concluded from what Spark remembers.
            return on_own_commit(ctx)
        if not _quiet_for(ctx, ctx.settings.spark_review_debounce_seconds):
            return "superseded"
    recalled = last_seen.recall(ctx.redis, ctx.pr.key)
    # Round trip 1: the pull request and, unless the last review job found reviews off, what the review reads
    # next (its diff, threads and review comments; on a pull request seen before, the config at the base seen
    # and the files it changed at the head the webhook names): none of it waits for the pull request.
    pull_f = submit(gh.pull, ctx.repo, ctx.pr.number)
    reads = _Reads.start(ctx, recalled) if recalled is None or recalled.reviews is not False else None
    # The repository's index at the pushed head, in the base repository of the last look (on first contact,
    # the repository the webhook came from), unless the last review job found reviews off; the blobs it lacks
    # are taken from the files the review read at that head where those are in.
    index_repo = recalled.base_repo if recalled is not None else ctx.repo
    early_index = (
        open_index(gh, ctx.settings, ctx.redis, index_repo, ctx.pr.head_sha, reads.held if reads else None)
        if (recalled is None or recalled.reviews) and ctx.pr.head_sha
        else None
    )
    # Where the last review job went on to review and the webhook names the head, the "Spark" check shows
    # as in progress at once; a review that then stops here concludes it saying why.
    check = (
        submit(_open_check_run, ctx, ctx.pr.head_sha)
        if recalled is not None and recalled.reviews and ctx.pr.head_sha
        else None
    )
    pull = pull_f.result()
    stop = None
    if ctx.pr.head_sha and pull.head_sha != ctx.pr.head_sha:
        ctx.log.info("review.stale", head=pull.head_sha)
        stop = ("stale", "Head moved", "A newer push arrived; this head was not reviewed.")
    elif pull.state != "open":
        stop = ("closed", "Closed", "The pull request was closed; it was not reviewed.")
    if stop is not None:
        return _stopped(ctx, check, *stop)
    if reads is not None:
        # The files the diff names are read at the head while the config is: neither waits for the other.
        reads.start_files(pull, at_most=ctx.settings.spark_review_concurrency)
    config = (
        reads.ahead.repo_config(gh, pull)
        if reads is not None
        else load_repo_config(gh, pull.base_repo, pull.base_ref)
    )
    ctx.cancel.verify = verifier(gh, ctx.repo, pull.author, config.config)
    automatic = trigger not in ("command", "rerequested")
    if automatic and not config.config.auto_review:
        stop = (
            "auto review off",
            "Automatic review is off",
            "`.github/spark.yml` turns automatic review off.",
        )
    elif automatic and pull.draft and not config.config.review_drafts:
        stop = ("draft skipped", "Draft not reviewed", "`.github/spark.yml` does not review drafts.")
    # Even when no review follows (auto review off), a question on this head can read ahead on it.
    seen = last_seen.remember(
        ctx.redis, ctx.pr.key, pull, None, recalled, reviews=stop is None, config=config.config
    )
    extra = (config.config.debounce_seconds or 0.0) - ctx.settings.spark_review_debounce_seconds
    if stop is None and trigger == "synchronize" and extra > 0 and not _quiet_for(ctx, extra):
        stop = ("superseded", "Superseded", "A newer push arrived; this head was not reviewed.")
    if stop is not None:
        return _stopped(ctx, check, *stop)
    run = ReviewRun(ctx, pull, config, seen)
    if reads is None:
        reads = _Reads.start(ctx, None)
    index = (
        early_index
        if early_index is not None and index_repo == pull.base_repo
        else open_index(gh, ctx.settings, ctx.redis, pull.base_repo, pull.head_sha, reads.held)
    )
    # Else the check run is created while the files are read and reviewed: off the critical path as well.
    run.check = check or submit(_open_check_run, ctx, pull.head_sha)
    try:
        return _review(run, reads, index, full=full or not automatic)
    except Cancelled as exc:
        _conclude(run, "cancelled", "Review stopped", f"Stopped: {exc.reason}. Nothing was posted.")
        return "cancelled"
    except ModelError as exc:
        problem = f"The model call failed: {prose(exc.user_message)}"
        _conclude_error(run, "neutral", "Model unavailable", problem)
        return "failed"
    except RateLimited:
        raise  # deferred: the check stays in progress and the re-run of this job concludes it
    except Exception as exc:
        # Never leave the check spinning: say what broke, then let the job fail (and be retried) visibly.
        problem = f"The review failed: {type(exc).__name__}: {prose(str(exc))}"
        try:
            _conclude_error(run, "failure", "Review failed", problem)
        except GitHubError as closing:
            ctx.log.warning("review.conclude_failed", status=closing.status)
        raise


def _conclude_error(run: ReviewRun, conclusion: str, title: str, problem: str) -> None:
    """Conclude the check run of a review that broke: as the gate says (never success), saying why."""
    verdict = error_verdict(run.config.config.gate, conclusion, title, problem)
    summary = verdict.section or problem
    _conclude(run, verdict.conclusion, verdict.title, summary)


def rerun_check(ctx: JobContext) -> str:
    """A re-run of the "Spark" check: with the merge gate on, a head Spark already reviewed is evaluated
    again without a model call (``workers.flows.gate.reevaluate``); otherwise the head is reviewed again."""
    return reevaluate(ctx) or run_review(ctx, "rerequested", full=True)


def _stopped(ctx: JobContext, check: Future[int] | None, outcome: str, title: str, summary: str) -> str:
    """Conclude the check run opened at once, if there is one, as skipped (saying why); return ``outcome``."""
    if check is not None:
        output = {"title": title, "summary": summary}
        try:
            ctx.github.update_check_run(
                ctx.repo, check.result(), status="completed", conclusion="skipped", output=output
            )
        except GitHubError as exc:  # the review stops either way; the check says so when GitHub lets it
            ctx.log.warning("review.check_not_concluded", status=exc.status)
    return outcome


def _open_check_run(ctx: JobContext, head_sha: str) -> int:
    """Create the "Spark" check run in progress; a job that runs again (its worker died) reuses its own."""
    check_id, existed = check_runs.open_check_run(
        ctx.redis,
        ctx.github,
        ctx.repo,
        head_sha,
        CHECK_NAME,
        check_run_external_id(ctx.pr.number, ctx.job_id or ""),
        ctx.job_id or "",
        status="in_progress",
    )
    if existed:
        ctx.github.update_check_run(ctx.repo, check_id, status="in_progress")
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
    """GitHub reads started with the pull request: the diff, the review threads, the review comments, and
    (on a pull request seen before) the config at the base seen and the files seen at the webhook's head."""

    diff: Future[PullDiff]
    threads: Future[list[ReviewThread]]
    comments: Future[list[ReviewCommentInfo] | None]
    ahead: ReadAhead[str | None]
    # Each changed file's read at the head (``start_files``), by path; the diff parsed once.
    texts: dict[str, Future[str | None]] = field(default_factory=dict)
    parsed: list[Diff] = field(default_factory=list)

    def start_files(self, pull: PullInfo, config: RepoConfig | None = None, *, at_most: int = 0) -> Diff:
        """Parse the diff and start reading each file the review may read (once); return the diff.

        Before the config is in (``config`` None), only the first ``at_most`` files: a huge pull request's
        files, most of which the config may exclude, are not all read on a guess.
        """
        if not self.parsed:
            self.parsed.append(parse_diff(self.diff.result().text))
        diff = self.parsed[0]
        readable = [f for f in diff.files if _kind_readable(f) and (config is None or config.selects(f.path))]
        for file in readable[:at_most] if config is None else readable:
            if file.path not in self.texts:
                self.texts[file.path] = self.ahead.file(pull, file.path)
        return diff

    def held(self) -> list[str]:
        """Return the texts of the files read so far, whole (what the repository index may take its blobs
        from: it checks each against the blob's SHA)."""
        futures = [*list(self.ahead.files.values()), *list(self.texts.values())]
        done = [f.result() for f in futures if f.done() and not f.cancelled() and f.exception() is None]
        return [text for text in done if isinstance(text, str)]

    @classmethod
    def start(cls, ctx: JobContext, seen: last_seen.Seen | None) -> _Reads:
        """Start the reads; the files only where the webhook names the head (a push or an opened PR)."""
        gh = ctx.github
        at_head = replace(seen, head_sha=ctx.pr.head_sha) if seen is not None and ctx.pr.head_sha else None

        def read(repo: str, sha: str, path: str) -> str | None:
            return gh.file_text(repo, path, sha, max_bytes=DEFAULT_MAX_BYTES)

        return cls(
            diff=submit(gh.pull_diff, ctx.repo, ctx.pr.number),
            threads=submit(review_threads, ctx),
            comments=submit(review_comments, ctx),
            ahead=ReadAhead.start(
                gh, at_head, at_head.paths if at_head else (), read, config=seen is not None
            ),
        )


def _review(run: ReviewRun, reads: _Reads, index: Future[Ready], *, full: bool) -> str:
    ctx, pull, gh = run.ctx, run.pull, run.ctx.github
    config = run.config.config
    pull_diff = reads.diff.result()
    diff = reads.start_files(pull, config)
    last_seen.remember(ctx.redis, ctx.pr.key, pull, diff.readable_paths(), run.seen)
    reviewed_before = {} if full else reviewed_hashes(ctx)
    run.index = ready_index(index, ctx.settings, pull.base_repo, pull.base_sha, ctx.github.secrets)
    # Every file at once, each with its read (started ahead where the path was seen before, else now).
    size = ctx.settings.spark_review_concurrency
    run.expected = len({f.path for f in diff.files})
    futures = {
        f.path: submit_waiting(size, _review_file, run, f, reads.texts.get(f.path), reviewed_before)
        for f in diff.files
    }
    results: list[FileResult] = []
    hashes: dict[str, str] = {}
    threads = reads.threads.result()
    ledger = sync_ledger(ctx, threads, reads.comments.result())
    for path, future in futures.items():
        result, digest = future.result()
        results.append(result)
        if digest:
            hashes[path] = digest
    ctx.cancel.check()
    # Is the head still the one reviewed? Asked as the last answer was in (``ReviewRun.answered``); the
    # answers are judged and the review assembled meanwhile.
    with run.lock:
        fresh_f = run.fresh or submit(gh.pull, ctx.repo, ctx.pr.number)
    # A diff too large for GitHub comes file by file, without the patch of binary and very large files.
    results += [FileResult(path, coverage=skipped(path, NO_PATCH)) for path in pull_diff.missing]
    unlisted = max(0, pull.changed_files - pull_diff.listed) if pull_diff.source == "files" else 0
    limits = ReviewLimits(max_inline=config.max_inline_comments, min_severity=config.min_severity)
    links = Links(pull.base_repo, pull.head_sha, ctx.settings.github_url)
    draft = assemble_review(diff, results, ledger, limits, links)
    dry_run = config.dry_run
    summary = summarise(draft, _seconds(run)) + "\n\n"
    if unlisted:
        summary += f"**{plural(unlisted, 'more changed file')} not reviewed**: {UNLISTED}.\n\n"
    summary += coverage_section(draft.coverage)
    summary += _context_section(run)
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
    # The gate, decided while the head is confirmed (reads only): what this review publishes, what Spark
    # remembers, and what the head fixed.
    gaps = len(run.model_failures) + len(pull_diff.missing) + unlisted
    gating = GateRun.start(ctx, diff, pull_diff, results, unlisted=unlisted)
    new_gating = published(draft) if draft.finding_count and not dry_run else ()
    findings = gating.findings(new_gating)
    states = thread_states(ctx, threads)
    verdict = review_verdict(config.gate, conclusion, title, gate_status(findings, ledger, states), gaps=gaps)
    if verdict.section:
        summary = f"{verdict.section}\n\n{summary}"
    if fresh_f.result().head_sha != pull.head_sha:
        _conclude(run, "neutral", "Head moved", "A newer push arrived; this head was not reviewed.")
        return "stale"
    ctx.cancel.check()
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
    # Writes go one at a time (GitHub asks it): the check concludes in the round trip after the review.
    _conclude(run, verdict.conclusion, verdict.title, summary, draft)
    store_safe_fixes(ctx, pull.head_sha, draft, results)
    if not dry_run:
        # A dry run writes nothing, not even to the ledger: turning it off must post what it only showed.
        record(ctx, draft, hashes, posted)
        gating.remember(new_gating, reviewed_head="" if gaps else pull.head_sha)
        # Threads whose finding is gone are resolved after the check concluded: nothing waits for them.
        resolved = resolve_gone(ctx, threads, results)
        if resolved:
            note = f"\nResolved {plural(len(resolved), 'earlier thread')} whose finding is gone."
            if verdict.section:
                # Those threads no longer hold the gate.
                states.update(dict.fromkeys(resolved, True))
                status = gate_status(findings, ledger, states)
                redone = review_verdict(config.gate, conclusion, title, status, gaps=gaps)
                summary = summary.replace(verdict.section, redone.section, 1)
                verdict = redone
            _conclude(run, verdict.conclusion, verdict.title, summary + note, draft)
    if posted:
        return "posted"
    # Files the model could not answer for were not reviewed: that is not "nothing new".
    return "model failed" if run.model_failures else "nothing new"


def _kind_readable(file: FileDiff) -> bool:
    """Return whether a review may read ``file``: not deleted, not skipped for its kind (the config's globs
    are applied once it is in; a file they exclude is then left unread)."""
    return file.status is not FileStatus.DELETED and not skip_reason(file.path, is_binary=file.is_binary)


def _review_file(
    run: ReviewRun, file: FileDiff, read: Future[str | None] | None, reviewed_before: dict[str, str]
) -> tuple[FileResult, str]:
    """Review one file (``_review_one``); however it ends, it needs the model no more."""
    try:
        return _review_one(run, file, read, reviewed_before)
    finally:
        run.answered(file.path)


def _review_one(
    run: ReviewRun, file: FileDiff, read: Future[str | None] | None, reviewed_before: dict[str, str]
) -> tuple[FileResult, str]:
    """Review one file: skip with a reason, or one model call whose findings are verified."""
    ctx = run.ctx
    config = run.config.config
    path = file.path
    pull = run.pull
    if file.status is FileStatus.DELETED:
        return FileResult(path, coverage=skipped(path, "file deleted")), ""
    if not config.selects(path):
        return FileResult(path, coverage=skipped(path, "excluded by .github/spark.yml")), ""
    reason = skip_reason(path, is_binary=file.is_binary)
    if reason:
        return FileResult(path, coverage=skipped(path, reason)), ""
    assert read is not None, "every file the review reads has its read started"
    try:
        text = read.result()
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
    run.answered(path)
    answer = parse_review_answer(completion.text, path)
    findings = []
    for proposed in answer.findings:
        if proposed.at is not None and not _names(proposed.at[0], path):
            elsewhere_finding = _finding_elsewhere(proposed, elsewhere)
            if elsewhere_finding is None:
                ctx.log.info("review.finding_dropped", path=path, named=f"{proposed.at[0]}:{proposed.at[1]}")
                with run.lock:
                    run.dropped.append(f"{proposed.at[0]}:{proposed.at[1]}")
                continue
            findings.append(elsewhere_finding)
        else:
            findings.append(_finding(path, text, shown, proposed))
    return FileResult(path, tuple(findings), text, request.coverage), digest


def _context_section(run: ReviewRun) -> str:
    """Say what code from other files the model was shown, and what it was not (nothing clipped silently)."""
    dropped = ""
    if run.dropped:
        named = ", ".join(code(where) for where in sorted(run.dropped))
        dropped = (
            f"\n\n{plural(len(run.dropped), 'finding')} named a line of another file the model was not "
            f"shown ({named}): left out."
        )
    if run.index.note:
        return f"\n\n**Context from other files**: {prose(run.index.note)}.{dropped}"
    if not run.context_notes:
        return dropped
    listed = "\n".join(f"- {note}" for note in sorted(run.context_notes))
    return "\n\n**Context from other files**, left out for the token budget:\n" + listed + dropped


def _names(named: str, path: str) -> bool:
    """Return whether a path a finding named is ``path`` itself (or a trailing part of it)."""
    return named == path or path.endswith("/" + named)


def _finding_elsewhere(proposed: ReviewFinding, elsewhere: crossref.CrossContext) -> Finding | None:
    """Return a finding about lines of another file at the place it names, if the model was shown that
    line (else None: it is dropped). It is never a suggestion: any block it carries is left out."""
    assert proposed.at is not None
    located = crossref.shown_at(elsewhere, *proposed.at)
    if located is None:
        return None
    return Finding(
        path=located.path,
        title=proposed.title,
        body=proposed.body,
        severity=proposed.severity,
        code=located.code,
        line=located.start,
        end_line=located.end,
    )


def _finding(path: str, text: str, shown: str, proposed: ReviewFinding) -> Finding:
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
    run: ReviewRun, conclusion: str, title: str, summary: str, draft: ReviewDraft | None = None
) -> None:
    """Complete the check run; offer "Apply safe fixes" when the review has suggestions."""
    assert run.check is not None, "the check run is opened before the review can conclude"
    check_id = run.check.result()
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
