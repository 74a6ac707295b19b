"""RQ entry points, enqueued by dotted path from the web process (see the job table in docs/architecture.md).

With ``SPARK_RUN_LOG`` set (off by default), each job first appends its name and id to ``spark:jobs:ran``,
trimmed to that many runs and kept an hour: the reliability suite counts from it that every accepted delivery
was processed exactly once. Then it rebuilds its context and runs its flow.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson
import redis
import structlog
from rq import Retry, get_current_job

from bot import keys
from bot.adapters.cerebras import ModelError
from bot.adapters.github_port import GitHubError, RateLimited
from bot.cancel import Cancelled, cancel_key, cancel_pr
from bot.core.commands import THREAD_REPLY
from bot.metrics import FIXES_COMMITTED, timed_job
from bot.redis_server import as_text
from bot.refs import CommandRef, PullRequestRef
from workers.context import JobContext, process
from workers.flows.ask import run_ask
from workers.flows.describe import describe_on_open, run_describe
from workers.flows.fix import run_fix
from workers.flows.fix_replies import help_text
from workers.flows.repo_config import load_repo_config
from workers.flows.review import review_on_request, run_review
from workers.flows.safe_fixes import APPLY_ACTION, apply_safe_fixes
from workers.flows.steering import may_steer
from workers.flows.thread_chat import finding_instruction, run_reply
from workers.flows.undo import run_undo
from workers.limits import installation_of, pause_installation

# How many times a job may be deferred for GitHub's rate limits before it fails.
DEFER_LIMIT = 5
REVIEW_BUDGET_KEY = keys.REVIEW_BUDGET.prefix
REVIEW_BUDGET_SECONDS = keys.REVIEW_BUDGET.seconds
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
            _describe_new(pr)
        return result

    return _deferrable("review", work)


def _describe_new(pr: dict[str, Any]) -> None:
    """Summarise a new pull request in its description where ``describe.on_open`` asks for it.

    Its failure is logged, never the review's: the review of the same job has been posted by then.
    """
    ctx = JobContext.build(pr, kind="describe")
    try:
        ctx.log.info("describe.on_open", outcome=describe_on_open(ctx))
    except (Cancelled, ModelError, GitHubError) as exc:
        if isinstance(exc, RateLimited):
            raise
        ctx.log.warning("describe.on_open_failed", error=str(exc))


def command(pr: dict[str, Any], command: dict[str, Any]) -> str | Retry:
    """Run a ``/spark`` command from a PR comment or a review thread."""
    _record("command")
    ref = CommandRef.from_dict(command)
    return _deferrable(f"command_{ref.name}", lambda: _command(pr, ref))


def _command(pr: dict[str, Any], ref: CommandRef) -> str:
    # A name no handler knows was parsed as help; an old job's name that is gone answers with help too.
    return COMMANDS.get(ref.name, _help)(pr, ref)


def _fix(pr: dict[str, Any], ref: CommandRef) -> str:
    """``/spark fix``: commit a verified fix (or suggest it) and reply."""
    # The comment id orders fixes: a newer `/spark fix` on the PR supersedes a running older one, but only
    # once run_fix has checked that its author may run it (it claims the token then).
    ctx = JobContext.build(pr, kind="fix", order=ref.comment_id, claim=False, heard=ref.text)
    # Alone in one of Spark's finding threads, `/spark fix` fixes that finding.
    result = run_fix(ctx, finding_instruction(ctx, ref))
    if result == "committed":
        FIXES_COMMITTED.inc()
    return result


def _review(pr: dict[str, Any], ref: CommandRef) -> str:
    """``/spark review``: a full review of the head now, within its author's daily budget."""
    ctx = _steering(pr, ref)
    if ctx is None:
        return "refused"
    budget = _review_budget_spent(ctx, ref)
    if budget is not None:
        _answer(
            ctx,
            ref,
            f"Sorry @{ref.author}, you have used the {budget} `/spark review` run(s) each person may ask "
            "for on this pull request in a day (`review.command_budget` in `.github/spark.yml`). The "
            "automatic review still runs on every push; please try again tomorrow.",
        )
        return "over budget"
    ctx.github.react(ctx.repo, ref.comment_id, "eyes", review_comment=ref.kind == "review_comment")
    return review_on_request(ctx, ref)


def _stop(pr: dict[str, Any], ref: CommandRef) -> str:
    """``/spark stop``: cancel everything running on the pull request and say so."""
    ctx = _steering(pr, ref)
    if ctx is None:
        return "refused"
    cancel_pr(ctx.redis, ctx.pr.key, by=ref.author)
    _answer(ctx, ref, "Stopped: nothing more will be posted for the work that was running here.")
    return "stopped"


def _cancellable(
    kind: str, flow: Callable[[JobContext, CommandRef], str]
) -> Callable[[dict[str, Any], CommandRef], str]:
    """Return the handler that runs ``flow`` as a job of ``kind``; a cancelled run is logged, not failed."""

    def handle(pr: dict[str, Any], ref: CommandRef) -> str:
        ctx = JobContext.build(pr, kind=kind, claim=False, heard=ref.text)
        try:
            return flow(ctx, ref)
        except Cancelled as exc:
            ctx.log.info(f"{kind}.cancelled", reason=exc.reason, by=exc.by)
            return "cancelled"

    handle.__doc__ = flow.__doc__
    return handle


# ``/spark undo`` reverts Spark's last fix while the head is still that fix; ``/spark describe`` writes the
# pull request's summary in a marked section of its description.
_undo = _cancellable("undo", run_undo)
_describe = _cancellable("describe", run_describe)


def _help(pr: dict[str, Any], ref: CommandRef) -> str:
    """``/spark help`` (and any word Spark does not know): the commands and the repository's configuration."""
    ctx = JobContext.build(pr, kind="help")
    pull = ctx.github.pull(ctx.repo, ctx.pr.number)
    loaded = load_repo_config(ctx.github, pull.base_repo, pull.base_ref)
    _answer(ctx, ref, help_text(loaded.config, ref.unknown, loaded.errors))
    return "help"


# The handler of each ``/spark`` command (``bot.core.commands.CommandName``), by name.
def _ask(pr: dict[str, Any], ref: CommandRef) -> str:
    """``/spark ask``: an answer with permalinks, once, within the hour's budgets (anyone who can comment)."""
    # Never superseding: two questions on one pull request are both answered (a stop still cancels).
    return run_ask(JobContext.build(pr, kind="ask", claim=False, heard=ref.text), ref)


def _reply(pr: dict[str, Any], ref: CommandRef) -> str:
    """A person's reply in a review thread: answered when the thread is Spark's, or its finding dismissed."""
    return run_reply(JobContext.build(pr, kind="ask", claim=False, heard=ref.text), ref)


COMMANDS: dict[str, Callable[[dict[str, Any], CommandRef], str]] = {
    "fix": _fix,
    "ask": _ask,
    THREAD_REPLY: _reply,
    "review": _review,
    "stop": _stop,
    "help": _help,
    "undo": _undo,
    "describe": _describe,
}


def _steering(pr: dict[str, Any], ref: CommandRef) -> JobContext | None:
    """Start a command that steers Spark's work: claim the PR's token, or answer a refusal and return None."""
    ctx = JobContext.build(pr, kind=ref.name, claim=False)
    if not _may_steer(ctx, ref):
        _answer(
            ctx,
            ref,
            f"Sorry @{ref.author}, `/spark {ref.name}` is for the pull request's author and the "
            "repository's maintainers.",
        )
        return None
    ctx.cancel.claim(by=ref.author)
    return ctx


def _may_steer(ctx: JobContext, ref: CommandRef) -> bool:
    """Return whether the commenter may start or stop work: the PR's author, or who may run ``/spark fix``."""
    pull = ctx.github.pull(ctx.repo, ctx.pr.number)
    if ref.author == pull.author:
        return True
    config = load_repo_config(ctx.github, pull.base_repo, pull.base_ref).config
    return may_steer(ctx.github, ctx.repo, pull.author, config, ref.author, ref.name)


def _review_budget_spent(ctx: JobContext, ref: CommandRef) -> int | None:
    """Count this ``/spark review`` against its author's daily budget on the PR; return the budget if spent.

    Each run costs a model call per file. The count is kept per comment (a re-run of the same job counts
    once) in a hash that expires a day after the author's first run.
    """
    pull = ctx.github.pull(ctx.repo, ctx.pr.number)
    budget = load_repo_config(ctx.github, pull.base_repo, pull.base_ref).config.review_budget
    key = f"{REVIEW_BUDGET_KEY}{ctx.pr.key}:{ref.author}"
    with ctx.redis.pipeline() as pipe:
        pipe.hsetnx(key, str(ref.comment_id), "1")
        pipe.expire(key, REVIEW_BUDGET_SECONDS, nx=True)
        pipe.hlen(key)
        _, _, used = pipe.execute()
    return budget if int(used) > budget else None


def _answer(ctx: JobContext, ref: CommandRef, text: str) -> None:
    """Reply where the command was written: in its review thread, or in the conversation."""
    if ref.kind == "review_comment" and ref.thread_id is not None:
        ctx.github.reply_to_review_comment(ctx.repo, ctx.pr.number, ref.thread_id, text)
    else:
        key = ctx.private_key(f"{ref.name}-{ref.comment_id}")
        ctx.github.upsert_comment(ctx.repo, ctx.pr.number, key, text)


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
    return "recorded"


def check_run(pr: dict[str, Any], check_run_id: int, action: str, identifier: str) -> str | Retry:
    """Re-run Spark's check (rerequested) or act on its button (requested_action)."""
    _record("check_run")
    return _deferrable(f"check_run_{action}", lambda: _check_run(pr, action, identifier))


def _check_run(pr: dict[str, Any], action: str, identifier: str) -> str:
    if action == "rerequested":
        ref = PullRequestRef.from_dict(pr)
        if _newer_head(process().redis, ref.key, ref.head_sha):
            # "Re-run" on an old commit's check: starting a review job would supersede the one of the
            # newest head, and this one would then find its head stale. Leave the newest head's review be.
            return "stale"
        ctx = JobContext.build(ref, kind="review")
        return run_review(ctx, "rerequested", full=True)
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
