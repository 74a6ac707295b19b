"""RQ entry points, enqueued by dotted path from the web process (see the job table in docs/architecture.md).

With ``SPARK_RUN_LOG`` set (off by default), each job first appends its name and id to ``spark:jobs:ran``,
trimmed to that many runs and kept an hour: the reliability suite counts from it that every accepted delivery
was processed exactly once. Then it rebuilds its context and runs its flow: a command's is the one
registered under its name (``workers.commands``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson
import redis
import structlog
from rq import Retry, get_current_job

from bot import keys
from bot.adapters.github_port import RateLimited
from bot.adapters.redacting import RedactingPort
from bot.cancel import cancel_key
from bot.core import ci
from bot.index.context import warm_repositories
from bot.metrics import FIXES_COMMITTED, timed_job
from bot.redis_server import as_text
from bot.refs import CheckRef, CommandRef, PullRequestRef
from workers.commands import command_for
from workers.commands.describe import describe_new
from workers.commands.fix.flow import run_fix
from workers.context import JobContext, process
from workers.flows.ci import CHECK_RUN, CiReads, read_ci_failure
from workers.flows.review import rerun_check, run_review
from workers.flows.safe_fixes import APPLY_ACTION, apply_safe_fixes
from workers.limits import installation_of, pause_installation
from workers.memory import last_seen

# How many times a job may be deferred for GitHub's rate limits before it fails.
DEFER_LIMIT = 5
log = structlog.get_logger("spark.jobs")


def _record(name: str) -> None:
    """Append this run to the opt-in run log (``SPARK_RUN_LOG``): its name, job id, worker and start time,
    never its arguments (a job run again by another worker after its first one died shows as such)."""
    job = get_current_job()
    if job is None:
        raise RuntimeError(f"workers.jobs.{name} must run inside an RQ job")
    keep = process().settings.spark_run_log
    if keep:
        with job.connection.pipeline() as pipe:
            entry = {"job": name, "job_id": job.id, "worker": job.worker_name, "at": time.time()}
            pipe.rpush(keys.JOBS_RAN.pattern, orjson.dumps(entry))
            pipe.ltrim(keys.JOBS_RAN.pattern, -keep, -1)
            pipe.expire(keys.JOBS_RAN.pattern, keys.JOBS_RAN.seconds)
            pipe.execute()


def _deferrable(kind: str, work: Callable[[], str]) -> str | Retry:
    """Run a job's work; when GitHub asks for a long wait, defer the job instead of sleeping in it.

    The installation is paused for the wait GitHub named (its jobs stay queued; other installations' run)
    and RQ queues this job again; it runs once the pause is over, as a re-run that finds what it already
    did. After ``DEFER_LIMIT`` deferrals the job fails visibly.
    """
    with timed_job(kind) as state:
        try:
            state["outcome"] = result = work()
            return result
        except RateLimited as exc:
            state["outcome"] = "deferred"
            job = get_current_job()
            installation = installation_of(job) if job is not None else None
            if installation is not None:
                pause_installation(process().redis, installation, exc.retry_after)
            log.warning("job_deferred", kind=kind, retry_after=exc.retry_after, status=exc.status)
            return Retry(max=DEFER_LIMIT)


def review(pr: dict[str, Any], trigger: str) -> str | Retry:
    """Review a pull request's head (automatic on open/push, or forced by ``/spark review``)."""
    _record("review")

    def work() -> str:
        result = run_review(JobContext.build(pr, kind="review"), trigger)
        if trigger == "opened":
            describe_new(pr)
        return result

    return _deferrable("review", work)


def command(pr: dict[str, Any], command: dict[str, Any]) -> str | Retry:
    """Run a ``/spark`` command from a PR comment or a review thread: the handler registered for it."""
    _record("command")
    ref = CommandRef.from_dict(command)
    return _deferrable(f"command_{ref.name}", lambda: _command(pr, ref))


def _command(pr: dict[str, Any], ref: CommandRef) -> str:
    # A name no command has was parsed as help; an old job's name that is gone answers with help too.
    return command_for(ref.name).run(pr, ref)


def installation(installation_id: int, action: str, account: str, repositories: list[str]) -> str:
    """Record or forget an installation and the repositories it covers."""
    _record("installation")
    with timed_job("installation"):
        return _installation(installation_id, action, repositories, account)


def _installation(installation_id: int, action: str, repositories: list[str], account: str) -> str:
    state = process()
    key = keys.INSTALLATION_REPOSITORIES.format(installation_id)
    if action in ("deleted", "suspend"):
        with state.redis.pipeline() as pipe:
            pipe.delete(key)
            pipe.hdel(keys.INSTALLATIONS.pattern, str(installation_id))
            pipe.execute()
        state.github.forget(installation_id)
        return "forgotten"
    with state.redis.pipeline() as pipe:
        pipe.hset(keys.INSTALLATIONS.pattern, str(installation_id), account)
        if repositories and action == "removed":
            pipe.srem(key, *repositories)
        elif repositories:
            pipe.sadd(key, *repositories)
        pipe.execute()
    if repositories and action != "removed":
        # Indexed in the background before their first pull request (the job does not wait for it).
        warm_repositories(
            state.github.installation(installation_id), state.settings, state.redis, repositories
        )
    return "recorded"


def check_run(
    pr: dict[str, Any], check_run_id: int, action: str, identifier: str, requester: str = ""
) -> str | Retry:
    """Re-run Spark's check (rerequested) or act on its button (requested_action)."""
    _record("check_run")
    if identifier == ci.FIX_ACTION:
        ref = PullRequestRef.from_dict(pr)
        return _deferrable("check_run_fix_ci", lambda: _fix_ci(ref, check_run_id, requester))
    return _deferrable(f"check_run_{action}", lambda: _check_run(pr, action, identifier))


def _check_run(pr: dict[str, Any], action: str, identifier: str) -> str:
    if action == "rerequested":
        ref = PullRequestRef.from_dict(pr)
        if _newer_head(process().redis, ref.key, ref.head_sha):
            # "Re-run" on an old commit's check: starting a review job would supersede the one of the
            # newest head, and this one would then find its head stale. Leave the newest head's review be.
            return "stale"
        ctx = JobContext.build(ref, kind="review")
        return rerun_check(ctx)
    if identifier != APPLY_ACTION:
        return f"unknown action {identifier!r}"
    # Its own kind: the button must not supersede a `/spark fix` running on the same PR.
    ctx = JobContext.build(pr, kind="safe-fixes")
    result = apply_safe_fixes(ctx)
    if result == "committed":
        FIXES_COMMITTED.inc()
    return result


def _newer_head(conn: redis.Redis, pr_key: str, head_sha: str) -> bool:
    """Return whether the intake has seen a newer head of the pull request than ``head_sha``."""
    newest = as_text(conn.hget(cancel_key(pr_key), "head"))
    return bool(head_sha and newest and newest != head_sha)


def ci_failure(pr: dict[str, Any], check: dict[str, Any]) -> str | Retry:
    """A check that failed on a pull request's head: read it, offer (or make) the fix."""
    _record("ci_failure")
    ref, failed = PullRequestRef.from_dict(pr), CheckRef.from_dict(check)
    return _deferrable("ci_failure", lambda: _ci_failure(ref, failed))


def _ci_failure(ref: PullRequestRef, check: CheckRef) -> str:
    if not ref.number:
        # From workflow_job, which names no pull request: the one whose head Spark saw there, else the one its
        # check run (the same id) names.
        number = last_seen.pull_of_head(process().redis, ref.installation_id, ref.full_name, ref.head_sha)
        if number is None:
            gh = process().github.installation(ref.installation_id)
            numbers = gh.check_run(ref.full_name, check.check_run_id).pull_numbers
            if not numbers:
                return "no pull request"
            number = numbers[0]
        ref = replace(ref, number=number)
    # Its own kind: reading a failure must not supersede a fix or a review running on the same pull request.
    ctx = JobContext.build(ref, kind="ci")
    outcome = read_ci_failure(ctx, check)
    try:
        if outcome.result != "auto":
            return outcome.result
        # `ci.fix: auto`: the fix runs now, as Spark's own request from its CI check run on this head, on what
        # this job read (through its GitHub port: the secrets of those reads are known to the fix's writes).
        run_id = ctx.redis.hget(keys.CI_REPORTS.format(ref.key, ref.head_sha), "_run")
        return _fix_ci(
            ref, int(run_id or check.check_run_id), ctx.github.own_login, outcome.reads, ctx.github
        )
    finally:
        if outcome.after is not None:
            outcome.after()


def _fix_ci(
    ref: PullRequestRef,
    check_run_id: int,
    requester: str,
    reads: CiReads | None = None,
    github: RedactingPort | None = None,
) -> str:
    """Fix the head's failed checks, asked from Spark's CI check run (its button, or auto mode)."""
    command = CommandRef(
        name="fix", text="ci", comment_id=check_run_id, author=requester or "spark", kind=CHECK_RUN
    )
    ctx = JobContext.build(ref, kind="fix", order=check_run_id, claim=False)
    if github is not None:
        ctx = replace(ctx, github=github)
    result = run_fix(ctx, command, reads)
    if result == "committed":
        FIXES_COMMITTED.inc()
    return result
