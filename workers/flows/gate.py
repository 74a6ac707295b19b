"""The merge gate's flows: its part of each review, a re-run of the "Spark" check on a head Spark already
reviewed, and the check on Spark's own commits; none of them calls the model.

The decision (conclusion, title, summary) is the pure core's (``bot.core.gate``); this module gathers what it
decides from: the findings Spark remembers (``workers.memory.gate``), the ledger and GitHub's threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from bot.adapters.github_port import PullDiff, PullInfo, ReviewCommentInfo, ReviewThread, Unreadable
from bot.core.assembly import FileResult
from bot.core.config import RepoConfig
from bot.core.gate import (
    GateFinding,
    Verdict,
    fixed_at_head,
    gate_status,
    review_verdict,
    with_fixed,
)
from bot.core.ignore import DEFAULT_MAX_BYTES
from bot.core.limits import fit_check_output
from bot.core.render import code
from bot.core.types import Diff, FileStatus
from bot.refs import check_run_external_id
from workers.context import JobContext
from workers.flows.parallel import submit
from workers.flows.repo_config import load_repo_config
from workers.memory import check_runs, last_seen
from workers.memory import gate as gate_memory
from workers.memory.ledger import review_comments, review_threads, sync_ledger, thread_states

# The review's check run, which the gate concludes.
CHECK_NAME = "Spark"
REEVALUATED = "Gate re-evaluated"


@dataclass(frozen=True, slots=True)
class GateRun:
    """The gate's part of one review: the findings Spark remembers, with those the head fixed marked."""

    ctx: JobContext
    remembered: tuple[GateFinding, ...]
    fixed: frozenset[str]

    @classmethod
    def start(
        cls,
        ctx: JobContext,
        diff: Diff,
        pull_diff: PullDiff,
        results: Sequence[FileResult],
        *,
        unlisted: int,
    ) -> GateRun:
        """Recall the gate's findings and tell which the head fixed (their code gone from the file read at
        the head, their file deleted, or no longer changed by the pull request)."""
        remembered = gate_memory.recall(ctx).findings
        texts = {r.path: r.head_text for r in results if r.head_text is not None}
        gone = {f.path for f in diff.files if f.status is FileStatus.DELETED}
        if not unlisted:
            # Every changed file is listed: a finding's file not among them is no longer changed.
            listed = {f.path for f in diff.files} | set(pull_diff.missing)
            gone |= {f.path for f in remembered if f.path not in listed}
        return cls(ctx, remembered, frozenset(fixed_at_head(remembered, texts, gone)))

    def findings(self, new: Sequence[GateFinding]) -> tuple[GateFinding, ...]:
        """Return every gating finding: those remembered (fixed ones marked) and the review's new ones."""
        known = {f.fingerprint for f in self.remembered}
        return with_fixed(self.remembered, self.fixed) + tuple(f for f in new if f.fingerprint not in known)

    def remember(self, new: Sequence[GateFinding], *, reviewed_head: str) -> None:
        """Record the new findings, those the head fixed, and whether the head's review completed."""
        fixed = tuple(f for f in with_fixed(self.remembered, self.fixed) if f.fingerprint in self.fixed)
        gate_memory.remember(self.ctx, (*fixed, *new), reviewed_head=reviewed_head)


@dataclass(frozen=True, slots=True)
class _Reads:
    """The pull request's threads and review comments, read while the pull request and config are."""

    threads: Future[list[ReviewThread]]
    comments: Future[list[ReviewCommentInfo] | None]

    @classmethod
    def start(cls, ctx: JobContext) -> _Reads:
        return cls(submit(review_threads, ctx), submit(review_comments, ctx))


def reevaluate(ctx: JobContext) -> str | None:
    """A re-run of the "Spark" check: with ``review.gate: high`` on the head whose review completed, the gate
    is evaluated again from what Spark remembers and GitHub's threads, and a new check run concludes it,
    without a model call. Return ``None`` where a review must run instead (the gate off: as before; another
    head; a review that did not complete)."""
    memory = gate_memory.recall(ctx)
    if not memory.reviewed_head or memory.reviewed_head != ctx.pr.head_sha:
        return None
    pull, config = _pull_and_config(ctx)
    if pull.state != "open" or pull.head_sha != memory.reviewed_head or config.gate == "off":
        return None
    reads = _Reads.start(ctx)
    note = (
        f"Re-run on {code(pull.head_sha[:7])}, which Spark already reviewed: the gate was evaluated again "
        "from the findings Spark remembers and the pull request's threads, without a new model call."
    )
    return _conclude_gate(ctx, pull, config, memory.findings, reads, note)


def on_own_commit(ctx: JobContext) -> str:
    """Spark's own commit is not reviewed again; with ``review.gate: high`` its head still gets the "Spark"
    check (a required check must report on every head), concluded from the findings Spark remembers, the
    files they are in read at the new head (a fix removes a finding's code), and GitHub's threads."""
    gh = ctx.github
    pull, config = _pull_and_config(ctx)
    if pull.state != "open" or (ctx.pr.head_sha and pull.head_sha != ctx.pr.head_sha):
        return "own commit"
    if config.gate == "off":
        return "own commit"
    reads = _Reads.start(ctx)
    memory = gate_memory.recall(ctx)
    paths = sorted({f.path for f in memory.findings if not f.fixed})
    texts_f = {
        path: submit(gh.file_text, pull.head_repo, path, pull.head_sha, max_bytes=DEFAULT_MAX_BYTES)
        for path in paths
    }
    texts: dict[str, str] = {}
    gone: set[str] = set()
    for path, future in texts_f.items():
        try:
            text = future.result()
        except Unreadable:
            continue  # not readable whole (a symlink, too large): its findings still stand
        if text is None:
            gone.add(path)
        else:
            texts[path] = text
    fixed = frozenset(fixed_at_head(memory.findings, texts, gone))
    findings = with_fixed(memory.findings, fixed)
    gate_memory.remember(ctx, [f for f in findings if f.fingerprint in fixed], reviewed_head=pull.head_sha)
    note = (
        f"{code(pull.head_sha[:7])} is Spark's own commit: it was not reviewed again. The gate was evaluated "
        "from the findings Spark remembers, their files at this head and the pull request's threads."
    )
    _conclude_gate(ctx, pull, config, findings, reads, note)
    return "own commit"


def _pull_and_config(ctx: JobContext) -> tuple[PullInfo, RepoConfig]:
    """Return the pull request and its config: read together at the base Spark last saw (one round trip),
    read again after the pull request where the base moved or was never seen."""
    gh = ctx.github
    seen = last_seen.recall(ctx.redis, ctx.pr.key)
    pull_f = submit(gh.pull, ctx.repo, ctx.pr.number)
    config_f = submit(load_repo_config, gh, seen.base_repo, seen.base_ref) if seen is not None else None
    pull = pull_f.result()
    if (
        config_f is not None
        and seen is not None
        and (seen.base_repo, seen.base_ref)
        == (
            pull.base_repo,
            pull.base_ref,
        )
    ):
        return pull, config_f.result().config
    return pull, load_repo_config(gh, pull.base_repo, pull.base_ref).config


def _conclude_gate(
    ctx: JobContext,
    pull: PullInfo,
    config: RepoConfig,
    findings: Sequence[GateFinding],
    reads: _Reads,
    note: str,
) -> str:
    """Create the "Spark" check run on the head, concluded as the gate decides; return its conclusion."""
    threads = reads.threads.result()
    ledger = sync_ledger(ctx, threads, reads.comments.result())
    status = gate_status(findings, ledger, thread_states(ctx, threads))
    verdict: Verdict = review_verdict(config.gate, "success", REEVALUATED, status)
    summary, text = fit_check_output(f"{verdict.section}\n\n{note}")
    output = {"title": verdict.title, "summary": summary, **({"text": text} if text else {})}
    fields: dict[str, Any] = {"status": "completed", "conclusion": verdict.conclusion, "output": output}
    external = check_run_external_id(pull.number, ctx.job_id or "")
    run, existed = check_runs.open_check_run(
        ctx.redis, ctx.github, ctx.repo, pull.head_sha, CHECK_NAME, external, ctx.job_id or "", **fields
    )
    if existed:  # a job that runs again concludes the run it made, never a second one
        ctx.github.update_check_run(ctx.repo, run, **fields)
    return f"gate {verdict.conclusion}"
