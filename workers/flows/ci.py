"""A failed check on a pull request's head: what failed read once, shown on Spark's CI check run with the
Fix CI offer, fixed by itself in auto mode (once per head, never twice for Spark's own commit), and a check
that Spark's own commit broke said once with ``/spark undo`` offered.

Round trips: 1. at once, side by side: the pull request, the check's annotations, the job's log (an Actions
job: its redirect, then the download), the file list at the head, and the config at the base last seen; 2. the
offer on Spark's CI check run from the annotations, while the log still downloads; 3. the check run again
with what the log located.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import orjson
import redis

from bot import keys
from bot.adapters.github_port import GitHubError, GitHubPort, PullInfo
from bot.core import ci
from bot.core.ci_failures import Failure
from bot.core.ci_log import LogExcerpt, LogReader
from bot.core.config import RepoConfig
from bot.core.policy import check_target_path
from bot.redis_server import as_text
from bot.refs import CheckRef, check_run_external_id
from workers.context import JobContext
from workers.flows.parallel import submit
from workers.flows.repo_config import load_repo_config
from workers.memory import last_seen, own_commits

# What a log's download may cost a job at most; past it the excerpt read so far is used.
MAX_LOG_BYTES = 200 * 1024 * 1024
# GitHub's App that runs Actions jobs: a check run of its is a job whose log can be read.
ACTIONS_APP = "github-actions"
# The kind of a fix asked from Spark's CI check run (its Fix CI button, or auto mode), not from a comment.
CHECK_RUN = "check_run"


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


def run_ci_failure(ctx: JobContext, check: CheckRef) -> str:
    """Read a failed check once, show it on Spark's CI check run, and fix it where the config says so."""
    gh, repo, conn, pr = ctx.github, ctx.repo, ctx.redis, ctx.pr
    seen = conn.set(
        keys.CI_READ.format(pr.installation_id, repo, check.check_run_id),
        "1",
        nx=True,
        ex=keys.CI_READ.seconds,
    )
    if not seen:
        return "already read"
    head = pr.head_sha
    with ctx.timings.span("github_read"):
        pull_f = submit(gh.pull, repo, pr.number)
        notes_f = submit(gh.check_annotations, repo, check.check_run_id)
        log_f: Future[tuple[LogExcerpt | None, str]] | None = (
            submit(read_log, gh, repo, check.check_run_id) if check.actions_job else None
        )
        tree_f = submit(gh.tree_paths, repo, head)
        remembered = last_seen.recall(conn, pr.key)
        config_f: Future[Any] | None = (
            submit(load_repo_config, gh, remembered.base_repo, remembered.base_ref) if remembered else None
        )
        pull = pull_f.result()
        if config_f is None or remembered is None or not remembered.matches_base(pull):
            config_f = submit(load_repo_config, gh, pull.base_repo, pull.base_ref)
        config: RepoConfig = config_f.result().config
    if config.ci_fix == "off":
        return "off"
    if not ci.selects_check(check.name, config.ci_checks):
        return "not selected"
    if pull.state != "open" or pull.head_sha != head:
        return "stale"
    tree, _ = tree_f.result()
    notes = notes_f.result()
    own = own_commits.is_own(conn, pr.key, head, wait=0)
    # Auto mode never fixes Spark's own commit: that head gets the offer.
    mode = "offer" if own and config.ci_fix == "auto" else config.ci_fix
    if log_f is not None and not log_f.done():
        # The offer goes out now, from the annotations, while the log still downloads; the log's details
        # follow in the same check run.
        early = ci.read_check(check.name, check.check_run_id, check.conclusion, notes, None, tree)
        known = [r for r in stored_reports(conn, pr.key, head) if r.name != check.name]
        show_offer(ctx, pull, [*known, early], mode, fixable=True)
    excerpt, note = log_f.result() if log_f is not None else (None, "")
    report = ci.read_check(check.name, check.check_run_id, check.conclusion, notes, excerpt, tree, note=note)
    reports = _store(conn, pr.key, head, report)
    if note.startswith("no `actions: read`") and conn.set(
        keys.CI_GRANT_TOLD.format(pr.installation_id), "1", nx=True, ex=keys.CI_GRANT_TOLD.seconds
    ):
        gh.comment(repo, pr.number, ci.GRANT_ACTIONS)
    targets = ci.ci_targets(reports, lambda path: ci_refusal(config, path))
    show_offer(ctx, pull, reports, mode, fixable=bool(targets.paths))
    if own:
        _regressions(ctx, pull, reports)
    if config.ci_fix != "auto" or not targets.paths:
        return "offered" if targets.paths else "nothing to fix"
    return auto_fix(ctx, pull, reports, own)


def ci_refusal(config: RepoConfig, path: str) -> str | None:
    """Why Spark may not edit ``path`` (a workflow, outside the repository, excluded by the config)."""
    reason = check_target_path(path)
    if reason is None and not config.selects(path):
        reason = f"{path!r} is excluded by `.github/spark.yml`"
    return reason


def show_offer(
    ctx: JobContext, pull: PullInfo, reports: list[ci.CheckReport], mode: str, *, fixable: bool
) -> None:
    """Spark's CI check run on the head: every failed check so far, the Fix CI button in offer mode.

    Jobs of the same head's checks run side by side; a lock makes each write the whole, latest list.
    """
    conn, gh, repo = ctx.redis, ctx.github, ctx.repo
    key = keys.CI_REPORTS.format(ctx.pr.key, pull.head_sha)
    output = ci.offer(reports, mode=mode, fixable=fixable)
    actions = [ci.FIX_BUTTON] if fixable and mode == "offer" else []
    with conn.lock(
        keys.CI_LOCK.format(ctx.pr.key, pull.head_sha), timeout=keys.CI_LOCK.seconds, blocking_timeout=30
    ):
        run = conn.hget(key, "_run")
        fields: dict[str, Any] = {
            "status": "completed",
            "conclusion": "neutral",
            "output": output,
            "actions": actions,
        }
        if run is None:
            external = check_run_external_id(pull.number, f"ci:{pull.head_sha}")
            created = gh.create_check_run(repo, pull.head_sha, ci.CHECK_NAME, external_id=external, **fields)
            conn.hset(key, "_run", created)
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


def ci_reports(ctx: JobContext, pull: PullInfo, config: RepoConfig, instruction: str) -> list[ci.CheckReport]:
    """The failed checks a ``/spark fix`` fixes: for ``ci`` (a comment, the button, auto mode), every failed
    check of the head, those not read yet read now; for a bare ``/spark fix``, those Spark already read on the
    head; for anything else, none."""
    if not asks_ci(instruction) and instruction.strip():
        return []
    reports = stored_reports(ctx.redis, ctx.pr.key, pull.head_sha)
    if not asks_ci(instruction):
        return reports
    return collect_reports(ctx, pull, config, {report.name for report in reports}) or reports


def collect_reports(
    ctx: JobContext, pull: PullInfo, config: RepoConfig, known: set[str]
) -> list[ci.CheckReport]:
    """Read the head's failed checks not in ``known`` now (checks Spark may act on; never its own runs);
    return every report of the head."""
    gh, repo = ctx.github, ctx.repo
    with ctx.timings.span("github_read"):
        failed = [
            run
            for run in gh.check_runs(repo, pull.head_sha)
            if run.conclusion in ci.FAILING
            and run.name != ci.CHECK_NAME
            and not run.external_id.startswith("spark-pr-")
            and run.name not in known
            and ci.selects_check(run.name, config.ci_checks)
        ]
        if not failed:
            return []
        tree_f = submit(gh.tree_paths, repo, pull.head_sha)
        reads = [
            (
                run,
                submit(gh.check_annotations, repo, run.id),
                submit(read_log, gh, repo, run.id) if run.app == ACTIONS_APP else None,
            )
            for run in failed
        ]
        tree, _ = tree_f.result()
        reports: list[ci.CheckReport] = []
        for run, notes_f, log_f in reads:
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
