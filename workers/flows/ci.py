"""A failed check on a pull request's head: what failed read once, shown on Spark's CI check run with the
Fix CI offer, fixed by itself in auto mode (once per head, never twice for Spark's own commit), and a check
that Spark's own commit broke said once with ``/spark undo`` offered.

Round trips, on a head Spark has seen (its review of the push noted it, with what the config at the base
said of failed checks): 1. at once, side by side: the offer on Spark's CI check run (the failed checks known
so far, this one "being read", the Fix CI button), the pull request, the check's annotations, the job's log
(an Actions job: its redirect, then the download), the file list at the head, the config at the base (read
again: it decides), and in auto mode the fix's own reads (the diff, the files the pull request changes, the
head's check runs, the repository index) and the annotations and logs of the head's other failed checks the
intake notes while that round trip is out (a workflow's jobs fail together); 2. the logs' downloads and, in
auto mode, the files the annotations name; then, in offer mode, the check run again with what was located;
in auto mode the model, the commit (round trip 3), and then the check run. The live config or pull request
can still take the offer back (``ci.fix: off`` since, ``ci.checks``, a newer head): the check run then says
why and carries no button.
On a head Spark has not seen, the offer waits for the config: 1. the reads; 2. the offer from the
annotations, while the log still downloads; 3. the check run again with what the log located.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import orjson
import redis

from bot import keys
from bot.adapters.github_port import CheckInfo, GitHubError, GitHubPort, PullDiff, PullInfo
from bot.core import ci
from bot.core.ci_failures import Failure
from bot.core.ci_log import LogExcerpt, LogReader
from bot.core.config import RepoConfig
from bot.core.policy import check_target_path
from bot.core.render import code
from bot.index.context import open_index
from bot.index.warm import Ready
from bot.redis_server import as_text
from bot.refs import CheckRef, check_run_external_id
from workers.context import JobContext
from workers.flows.edit import read_target
from workers.flows.parallel import submit
from workers.flows.read_ahead import ReadAhead
from workers.memory import last_seen, own_commits

# What a log's download may cost a job at most; past it the excerpt read so far is used.
MAX_LOG_BYTES = 200 * 1024 * 1024
# GitHub's App that runs Actions jobs: a check run of its is a job whose log can be read.
ACTIONS_APP = "github-actions"
# The kind of a fix asked from Spark's CI check run (its Fix CI button, or auto mode), not from a comment.
CHECK_RUN = "check_run"
# Auto mode reads this many of the files the pull request changes ahead, before the failures name any: the
# files a failure blames are nearly always among them, and a large pull request's are not all read on a guess.
AHEAD_FILES = 10
# How long the first round trip's reads wait for the offer to be on its way (its lock taken) at most.
SENDING_WAIT = 0.02
# And then how long they leave the offer alone on its way out (its request built and sent, rather than queued
# behind a dozen requests being built in the same process).
HEAD_START = 0.003
# How often auto mode looks for the head's other failed checks while its first round trip is out.
GATHER_POLL = 0.005


def read_log(gh: GitHubPort, repo: str, job_id: int) -> tuple[LogExcerpt | None, str]:
    """The job's log read as it streams, or None and why it could not be read."""
    reader = LogReader()
    try:
        for chunk in gh.job_log(repo, job_id):
            reader.feed(chunk)
            if reader.fed > MAX_LOG_BYTES:
                break
    except GitHubError as exc:
        if exc.status == 403:
            return None, "no `actions: read`: read from its annotations"
        if exc.status == 410:
            return None, "its log has expired: read from its annotations"
        if exc.status == 404:
            return None, "its log is gone: read from its annotations"
        raise
    return reader.finish(), ""


def _report_json(report: ci.CheckReport) -> bytes:
    return orjson.dumps(
        {
            "name": report.name,
            "id": report.check_run_id,
            "conclusion": report.conclusion,
            "failures": [
                [f.tool, f.path, f.line, f.message, f.column, f.via, f.test] for f in report.failures
            ],
            "evidence": list(report.evidence),
            "source": report.source,
            "note": report.note,
        }
    )


def _report_of(raw: bytes | str) -> ci.CheckReport:
    data = orjson.loads(raw)
    failures = tuple(
        Failure(tool, path, line, message, column, via, test)
        for tool, path, line, message, column, via, test in data["failures"]
    )
    return ci.CheckReport(
        data["name"],
        data["id"],
        data["conclusion"],
        failures,
        tuple(data["evidence"]),
        data["source"],
        data["note"],
    )


def stored_reports(conn: redis.Redis, pr_key: str, head: str) -> list[ci.CheckReport]:
    """The failed checks read on this head, in the order they failed."""
    stored = conn.hgetall(keys.CI_REPORTS.format(pr_key, head))
    return [_report_of(raw) for name, raw in sorted(stored.items()) if not as_text(name).startswith("_")]


def _store(conn: redis.Redis, pr_key: str, head: str, report: ci.CheckReport) -> list[ci.CheckReport]:
    key = keys.CI_REPORTS.format(pr_key, head)
    with conn.pipeline() as pipe:
        pipe.hset(key, report.name, _report_json(report))
        pipe.expire(key, keys.CI_REPORTS.seconds)
        pipe.execute()
    return stored_reports(conn, pr_key, head)


@dataclass(frozen=True, slots=True)
class Sibling:
    """Another check failed on the same head, its annotations and log read beside this job's own."""

    check: CheckRef
    notes: Future[list[ci.Annotation]]
    log: Future[tuple[LogExcerpt | None, str]] | None


@dataclass(frozen=True, slots=True)
class CiReads:
    """What a failed check's job read that the fix auto mode starts takes over rather than reads again: the
    pull request, the config and the files read ahead at its head, its file list, and (where the offer left
    in the first round trip) its diff, the head's check runs and the repository index, under way."""

    pull: PullInfo
    ahead: ReadAhead[str | None]
    tree: tuple[list[str], bool]
    diff: Future[PullDiff] | None = None
    checks: Future[list[CheckInfo]] | None = None
    index: Future[Ready] | None = None
    # The head's other failed checks the intake noted while the first round trip was out, by check run id.
    siblings: dict[int, Sibling] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CiOutcome:
    """What a failed check's job came to; with ``reads`` when auto mode's fix is to run now."""

    result: str
    reads: CiReads | None = None
    # The check run's last update, made once auto mode's fix is done.
    after: Callable[[], None] | None = None


def run_ci_failure(ctx: JobContext, check: CheckRef) -> str:
    """Read a failed check once, show it on Spark's CI check run, and fix it where the config says so."""
    outcome = read_ci_failure(ctx, check)
    if outcome.after is not None:
        outcome.after()
    return outcome.result


def remembered_mode(seen: last_seen.Seen | None, head: str, name: str, own: bool) -> str | None:
    """The mode (``offer``, ``auto``) the config last read at the base gives a check failing on ``head``,
    where Spark saw that head; None where it did not, or that config leaves the check alone."""
    if seen is None or not head or seen.head_sha != head or seen.ci_fix not in ("offer", "auto"):
        return None
    if not ci.selects_check(name, seen.ci_checks):
        return None
    # Auto mode never fixes Spark's own commit: that head gets the offer.
    return "offer" if own else seen.ci_fix


def read_ci_failure(ctx: JobContext, check: CheckRef) -> CiOutcome:
    """Read a failed check once, show it on Spark's CI check run; say whether auto mode's fix runs now.

    On a head Spark has seen, whose base's config it read since (``workers.memory.last_seen``), the offer
    leaves in the first round trip beside the reads (and, in auto mode, the fix's own reads): the live
    config, the pull request and the check's own results then confirm it, or it is withdrawn.
    """
    gh, repo, conn, pr = ctx.github, ctx.repo, ctx.redis, ctx.pr
    seen_once = conn.set(
        keys.CI_READ.format(pr.installation_id, repo, check.check_run_id),
        "1",
        nx=True,
        ex=keys.CI_READ.seconds,
    )
    if not seen_once:
        return CiOutcome("already read")
    head = pr.head_sha
    remembered = last_seen.recall(conn, pr.key)
    own = own_commits.is_own(conn, pr.key, head, wait=0)
    early = remembered_mode(remembered, head, check.name, own)
    if early is not None and ctx.cancel.cancelled():
        early = None  # a newer push or a close since the webhook: no offer from memory
    known = [r for r in stored_reports(conn, pr.key, head) if r.name != check.name]
    with ctx.timings.span("github_read"):
        offered: Future[None] | None = None
        if early is not None:
            sending = threading.Event()
            offered = submit(
                show_offer,
                ctx,
                head,
                [*known, ci.pending(check.name, check.check_run_id, check.conclusion)],
                early,
                fixable=True,
                sending=sending,
            )
            # The offer leaves first: its lock, its Redis reads and its request are not queued behind a dozen
            # reads being built in this process (a few milliseconds; the bound if another job holds the lock).
            if sending.wait(SENDING_WAIT):
                time.sleep(HEAD_START)
        # The log first: it takes two round trips (the redirect, then the download).
        log_f: Future[tuple[LogExcerpt | None, str]] | None = (
            submit(read_log, gh, repo, check.check_run_id) if check.actions_job else None
        )
        notes_f = submit(gh.check_annotations, repo, check.check_run_id)
        auto = early == "auto" and remembered is not None
        # A workflow's jobs fail together: the other checks the intake notes failed on this head while this
        # round trip is out are read in it too (their logs next), so the fix takes them in without rounds of
        # its own.
        siblings: dict[int, Sibling] = {}
        known_names = {report.name for report in known}
        patterns = remembered.ci_checks if remembered is not None else ()
        if auto:
            _gather(ctx, check, known_names, patterns, siblings)
        pull_f = submit(gh.pull, repo, pr.number)
        tree_f = submit(gh.tree_paths, repo, head)
        # The config at the base last seen and, where auto mode's fix will follow, the files the pull request
        # changes at this head: the fix's reads leave now too, rather than after the offer.
        ahead = ReadAhead.start(
            gh,
            remembered,
            remembered.paths[:AHEAD_FILES] if auto and remembered is not None else (),
            partial(read_target, gh),
        )
        diff_f = submit(gh.pull_diff, repo, pr.number) if auto else None
        checks_f = submit(gh.check_runs, repo, head) if auto else None
        index_f = (
            open_index(gh, ctx.settings, conn, remembered.base_repo, head)
            if auto and remembered is not None
            else None
        )
        while auto:
            _gather(ctx, check, known_names, patterns, siblings)
            if pull_f in wait([pull_f], timeout=GATHER_POLL).done:
                _gather(ctx, check, known_names, patterns, siblings)
                break
    try:
        with ctx.timings.span("github_read"):
            pull = pull_f.result()
            config = ahead.repo_config(gh, pull).config
        last_seen.remember(conn, pr.key, pull, None, remembered, config=config)
        stop = _left_alone(config, check.name, pull, head)
        if stop is not None:
            if offered is not None:
                offered.result()
                _withdraw(ctx, head, known, config, stop)
            return CiOutcome(stop[0])
        tree = tree_f.result()
        notes = notes_f.result()
        mode = "offer" if own and config.ci_fix == "auto" else config.ci_fix
        annotated = ci.read_check(check.name, check.check_run_id, check.conclusion, notes, None, tree[0])
        if mode == "auto":
            # The files the annotations name are read while the log downloads.
            ahead.start_more(pull, annotated.files)
        if offered is None and log_f is not None and not log_f.done():
            # The offer goes out now, from the annotations, while the log still downloads; the log's details
            # follow in the same check run.
            show_offer(ctx, head, [*known, annotated], mode, fixable=True)
        excerpt, note = log_f.result() if log_f is not None else (None, "")
        report = ci.read_check(
            check.name, check.check_run_id, check.conclusion, notes, excerpt, tree[0], note=note
        )
        reports = _store(conn, pr.key, head, report)
        if note.startswith("no `actions: read`") and conn.set(
            keys.CI_GRANT_TOLD.format(pr.installation_id), "1", nx=True, ex=keys.CI_GRANT_TOLD.seconds
        ):
            gh.comment(repo, pr.number, ci.GRANT_ACTIONS)
        targets = ci.ci_targets(reports, lambda path: ci_refusal(config, path))
        if offered is not None:
            offered.result()
        fixable = bool(targets.paths)
        result = (
            auto_fix(ctx, pull, reports, own)
            if config.ci_fix == "auto" and fixable
            else "offered"
            if fixable
            else "nothing to fix"
        )
        if result != "auto":
            show_offer(ctx, head, reports, mode, fixable=fixable, config=config)
            if own:
                _regressions(ctx, pull, reports)
            return CiOutcome(result)
        # Auto mode's fix goes first: the check run, which already says Spark is fixing these, names the
        # files and lines once the commit is made (a write before it would only delay it). A check run not
        # written yet is written now: the fix is asked from it.
        reads = CiReads(pull, ahead, tree, diff_f, checks_f, index_f, siblings)
        update = partial(show_offer, ctx, head, reports, mode, fixable=fixable, config=config)
        if conn.hget(keys.CI_REPORTS.format(pr.key, head), "_run") is None:
            update()
            return CiOutcome(result, reads)
        return CiOutcome(result, reads, update)
    except BaseException:
        _settle(offered)
        raise


def _gather(
    ctx: JobContext, check: CheckRef, known: set[str], patterns: Sequence[str], siblings: dict[int, Sibling]
) -> None:
    """Start reading each other check the intake noted failed on this head that is not read or under way."""
    gh, repo = ctx.github, ctx.repo
    for raw in ctx.redis.hvals(keys.CI_FAILED.format(ctx.pr.head_key)):
        try:
            other = CheckRef.from_dict(orjson.loads(raw))
        except (orjson.JSONDecodeError, TypeError):
            continue
        if (
            other.check_run_id == check.check_run_id
            or other.check_run_id in siblings
            or other.name in known
            or not ci.selects_check(other.name, patterns)
        ):
            continue
        siblings[other.check_run_id] = Sibling(
            other,
            submit(gh.check_annotations, repo, other.check_run_id),
            submit(read_log, gh, repo, other.check_run_id) if other.actions_job else None,
        )


def _settle(write: Future[None] | None) -> None:
    """Let a write under way end (its own error aside) before the job's error is raised: a check run is
    never left being written behind a failed job."""
    if write is not None:
        wait([write])


def _left_alone(config: RepoConfig, name: str, pull: PullInfo, head: str) -> tuple[str, str] | None:
    """Why this failed check gets no offer (the outcome, and the words of a withdrawn offer), or None."""
    if config.ci_fix == "off":
        return "off", "`ci.fix` is `off` in `.github/spark.yml`"
    if not ci.selects_check(name, config.ci_checks):
        return "not selected", f"`ci.checks` in `.github/spark.yml` does not name {code(name)}"
    if pull.state != "open":
        return "stale", "the pull request is closed"
    if pull.head_sha != head:
        return "stale", f"the pull request's head moved on from {head[:7]}"
    return None


def _withdraw(
    ctx: JobContext, head: str, known: list[ci.CheckReport], config: RepoConfig, stop: tuple[str, str]
) -> None:
    """Take back an offer made from memory that the live config or pull request does not allow.

    A check the config does not select leaves the others already read on the head as they were; anything
    else leaves no offer at all.
    """
    if stop[0] == "not selected" and known:
        targets = ci.ci_targets(known, lambda path: ci_refusal(config, path))
        show_offer(ctx, head, known, config.ci_fix, fixable=bool(targets.paths), config=config)
        return
    show_offer(ctx, head, [], "", fixable=False, output=ci.withdrawn(stop[1]))


def ci_refusal(config: RepoConfig, path: str) -> str | None:
    """Why Spark may not edit ``path`` (a workflow, outside the repository, excluded by the config)."""
    reason = check_target_path(path)
    if reason is None and not config.selects(path):
        reason = f"{path!r} is excluded by `.github/spark.yml`"
    return reason


def show_offer(
    ctx: JobContext,
    head: str,
    reports: list[ci.CheckReport],
    mode: str,
    *,
    fixable: bool,
    output: dict[str, str] | None = None,
    sending: threading.Event | None = None,
    config: RepoConfig | None = None,
) -> None:
    """Spark's CI check run on the head: every failed check so far, the Fix CI button in offer mode (or
    ``output`` alone, no button: an offer withdrawn). ``sending`` is set once the write is about to leave.

    Jobs of the same head's checks run side by side: under a lock, each write shows ``reports`` with every
    other report stored on the head by then, so the last write is never a list older than another's; with
    ``config``, whether a fix is offered is decided on that whole list.
    """
    conn = ctx.redis
    key = keys.CI_REPORTS.format(ctx.pr.key, head)
    withdrawn = output is not None
    try:
        with conn.lock(
            keys.CI_LOCK.format(ctx.pr.key, head), timeout=keys.CI_LOCK.seconds, blocking_timeout=30
        ):
            run = conn.hget(key, "_run")
            if output is None:
                latest = {report.name: report for report in stored_reports(conn, ctx.pr.key, head)}
                latest.update({report.name: report for report in reports})
                reports = [latest[name] for name in sorted(latest)]
                if config is not None:
                    fixable = bool(ci.ci_targets(reports, lambda path: ci_refusal(config, path)).paths)
            actions = [ci.FIX_BUTTON] if fixable and mode == "offer" and not withdrawn else []
            fields: dict[str, Any] = {
                "status": "completed",
                "conclusion": "skipped" if withdrawn else "neutral",
                "output": output if output is not None else ci.offer(reports, mode=mode, fixable=fixable),
                "actions": actions,
            }
            if sending is not None:
                sending.set()
            _write_run(ctx, head, key, run, fields)
    finally:
        if sending is not None:
            sending.set()


def _write_run(ctx: JobContext, head: str, key: str, run: bytes | str | None, fields: dict[str, Any]) -> None:
    """Create Spark's CI check run on the head (noting its id), or update the one there is."""
    conn, gh, repo = ctx.redis, ctx.github, ctx.repo
    if run is None:
        external = check_run_external_id(ctx.pr.number, f"ci:{head}")
        created = gh.create_check_run(repo, head, ci.CHECK_NAME, external_id=external, **fields)
        conn.hset(key, "_run", created)
        conn.expire(key, keys.CI_REPORTS.seconds)
    else:
        gh.update_check_run(repo, int(run), **fields)


def _regressions(ctx: JobContext, pull: PullInfo, reports: list[ci.CheckReport]) -> None:
    """A check that passed before Spark's commit and fails on it: said once, with /spark undo offered."""
    gh, repo, conn = ctx.github, ctx.repo, ctx.redis
    parents = gh.commit(repo, pull.head_sha).parents
    if not parents:
        return
    before = {run.name: run.conclusion for run in gh.check_runs(repo, parents[0])}
    after = {report.name: report.conclusion for report in reports}
    for name in ci.regressions(before, after):
        if conn.set(
            keys.CI_REGRESSION.format(ctx.pr.key, pull.head_sha, name),
            "1",
            nx=True,
            ex=keys.CI_REGRESSION.seconds,
        ):
            gh.comment(
                repo,
                pull.number,
                f"`{name}` passed before Spark's commit {pull.head_sha[:7]} and fails on it. "
                "Comment `/spark undo` to revert that commit.",
            )


def auto_fix(ctx: JobContext, pull: PullInfo, reports: list[ci.CheckReport], own: bool) -> str:
    """``ci.fix: auto``: at most one fix per head, never for a failure on Spark's own commit; a check its fix
    was for that fails again is said once, with ``/spark undo`` offered."""
    conn, pr = ctx.redis, ctx.pr
    if own:
        fixed_before = [as_text(name) for name in conn.smembers(keys.CI_FIXED.format(pr.key))]
        notice = ci.stop_notice(fixed_before, [r.name for r in reports])
        if notice is not None and conn.set(
            keys.CI_STOPPED.format(pr.key, pull.head_sha), "1", nx=True, ex=keys.CI_STOPPED.seconds
        ):
            ctx.github.comment(ctx.repo, pull.number, notice)
        return "stopped" if notice is not None else "offered"
    if not conn.set(keys.CI_AUTO.format(pr.key, pull.head_sha), "1", nx=True, ex=keys.CI_AUTO.seconds):
        return "already fixing"
    return "auto"


def asks_ci(instruction: str) -> bool:
    """Whether a ``/spark fix`` asks for the failed checks (``/spark fix ci``)."""
    return instruction.strip().lower().rstrip(".!") == "ci"


def ci_reports(
    ctx: JobContext,
    pull: PullInfo,
    config: RepoConfig,
    instruction: str,
    reads: CiReads | None = None,
) -> list[ci.CheckReport]:
    """The failed checks a ``/spark fix`` fixes: for ``ci`` (a comment, the button, auto mode), every failed
    check of the head, those not read yet read now; for a bare ``/spark fix``, those Spark already read on the
    head; for anything else, none. ``reads``: what the CI job that started this fix read already."""
    if not asks_ci(instruction) and instruction.strip():
        return []
    reports = stored_reports(ctx.redis, ctx.pr.key, pull.head_sha)
    if not asks_ci(instruction):
        return reports
    return collect_reports(ctx, pull, config, {report.name for report in reports}, reads) or reports


def collect_reports(
    ctx: JobContext,
    pull: PullInfo,
    config: RepoConfig,
    known: set[str],
    reads: CiReads | None = None,
) -> list[ci.CheckReport]:
    """Read the head's failed checks not in ``known`` now (checks Spark may act on; never its own runs);
    return every report of the head. The head's check runs and file list come from ``reads`` where they were
    read at this head already."""
    gh, repo = ctx.github, ctx.repo
    early = reads if reads is not None and reads.pull.head_sha == pull.head_sha else None
    with ctx.timings.span("github_read"):
        listed = (
            early.checks.result()
            if early is not None and early.checks is not None
            else gh.check_runs(repo, pull.head_sha)
        )
        failed = [
            run
            for run in listed
            if run.conclusion in ci.FAILING
            and run.name != ci.CHECK_NAME
            and not run.external_id.startswith("spark-pr-")
            and run.name not in known
            and ci.selects_check(run.name, config.ci_checks)
        ]
        if not failed:
            return []
        tree_f = submit(gh.tree_paths, repo, pull.head_sha) if early is None else None
        siblings = early.siblings if early is not None else {}
        reads_of = [
            (run, siblings[run.id].notes, siblings[run.id].log)
            if run.id in siblings
            else (
                run,
                submit(gh.check_annotations, repo, run.id),
                submit(read_log, gh, repo, run.id) if run.app == ACTIONS_APP else None,
            )
            for run in failed
        ]
        tree = tree_f.result()[0] if tree_f is not None else early.tree[0] if early is not None else []
        reports: list[ci.CheckReport] = []
        for run, notes_f, log_f in reads_of:
            excerpt, note = log_f.result() if log_f is not None else (None, "")
            report = ci.read_check(
                run.name, run.id, run.conclusion or "", notes_f.result(), excerpt, tree, note=note
            )
            reports = _store(ctx.redis, ctx.pr.key, pull.head_sha, report)
    return reports


def remember_ci_fix(ctx: JobContext, reports: list[ci.CheckReport]) -> None:
    """Spark committed a fix of these checks: auto mode will not try them again on its own commit."""
    key = keys.CI_FIXED.format(ctx.pr.key)
    with ctx.redis.pipeline() as pipe:
        pipe.delete(key)
        pipe.sadd(key, *[report.name for report in reports])
        pipe.expire(key, keys.CI_FIXED.seconds)
        pipe.execute()
