"""The worker runtime with a real Redis, real RQ and real ``spark worker`` processes."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from rq import Queue, get_current_job
from rq.job import Job, JobStatus

from bot.adapters.redacting import RedactingPort
from bot.cancel import Cancelled, CancelToken, cancel_pr
from bot.intake.enqueue import QUEUED_KEY, DeliveryQueue
from bot.intake.routing import REVIEW, JobSpec
from bot.redis_server import PrivateRedis
from bot.refs import PullRequestRef
from bot.settings import Settings
from sandbox.github import GitHubSandbox
from tests.conftest import Spawn
from workers import context
from workers.context import JobContext, job_log_fields
from workers.reaper import DROPPED_GRACE_SECONDS, recover_dropped, recover_orphans
from workers.runtime import QUEUE_NAMES, work

ROOT = Path(__file__).resolve().parents[2]
PR_KEY = "1:octo/demo#1"


# Jobs: importable by the worker subprocesses as tests.workers.test_runtime.<name>. --------------------------


def _conn() -> redis.Redis:
    job = get_current_job()
    assert job is not None
    conn: redis.Redis = job.connection
    return conn


def record(name: str) -> str:
    """Append ``name`` and this process's pid to the ``ran`` list."""
    _conn().rpush("ran", f"{name}:{os.getpid()}")
    return name


def slow(name: str, seconds: float) -> str:
    """Mark the start, sleep, then record ``name`` (a job a shutdown must let finish)."""
    conn = _conn()
    conn.rpush("started", name)
    time.sleep(seconds)
    conn.rpush("ran", name)
    return name


def pause_and_record(name: str) -> str:
    """Sleep a little, then ``record`` (so a pool's processes both get work)."""
    time.sleep(0.3)
    return record(name)


def hang_first_time(name: str) -> str:
    """Hang on the first attempt (to be killed), finish on the next."""
    conn = _conn()
    attempt = conn.incr(f"attempts:{name}")
    conn.rpush("started", name)
    if attempt == 1:
        time.sleep(60)
    conn.rpush("ran", name)
    return name


def cancellable(pr_key: str) -> str:
    """Work in small steps until cancelled; record when the cancel was noticed."""
    conn = context.process().redis
    token = CancelToken.start(conn, pr_key, "fix", order=1)
    conn.rpush("started", "cancellable")
    deadline = time.time() + 20
    try:
        while time.time() < deadline:
            token.check()
            time.sleep(0.01)
    except Cancelled as exc:
        conn.set("noticed_at", repr(time.time()))
        return exc.reason
    return "not cancelled"


def context_probe(pr: dict[str, Any]) -> dict[str, Any]:
    """Rebuild a JobContext the way flows do and report what it holds."""
    ctx = JobContext.build(pr, kind="fix", order=5)
    with ctx.timings.span("github"):
        head = ctx.github.pull(ctx.repo, ctx.pr.number).head_sha
    return {
        "head": head,
        "job_id": ctx.job_id,
        "queue_wait": ctx.timings.queue_wait,
        "spans": sorted(ctx.timings.as_ms()),
        # The installation's warm client, seen through the job's own secret values.
        "cached_client": isinstance(ctx.github, RedactingPort)
        and ctx.github.inner is context.process().github.installation(ctx.pr.installation_id),
        "order": ctx.cancel.order,
        "cancelled": ctx.cancel.cancelled(),
    }


# Fixtures ---------------------------------------------------------------------------------------------------


def wait_for(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def queues(conn: redis.Redis) -> tuple[Queue, Queue]:
    interactive, review = (Queue(name, connection=conn) for name in QUEUE_NAMES)
    return interactive, review


def texts(conn: redis.Redis, key: str) -> list[str]:
    return [item.decode() for item in conn.lrange(key, 0, -1)]


# Tests ------------------------------------------------------------------------------------------------------


def test_interactive_queue_is_drained_before_reviews(
    redis_conn: redis.Redis, redis_server: PrivateRedis
) -> None:
    interactive, review = queues(redis_conn)
    for i in range(3):
        review.enqueue(record, f"review-{i}")
    for i in range(3):
        interactive.enqueue(record, f"command-{i}")
    settings = Settings.load(env={"REDIS_URL": redis_server.url}, env_file=None)
    assert work(settings, burst=True) == 0
    ran = [item.split(":")[0] for item in texts(redis_conn, "ran")]
    assert ran == ["command-0", "command-1", "command-2", "review-0", "review-1", "review-2"]


def test_sigterm_lets_the_running_job_finish_then_exits_cleanly(
    redis_conn: redis.Redis, spawn_worker: Spawn
) -> None:
    interactive, _ = queues(redis_conn)
    job = interactive.enqueue(slow, "long", 1.0)
    queued_after = interactive.enqueue(record, "not-taken")
    proc = spawn_worker()
    wait_for(lambda: texts(redis_conn, "started") == ["long"])
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0
    assert texts(redis_conn, "ran") == ["long"]
    assert job.get_status(refresh=True) == JobStatus.FINISHED
    # The worker stopped after the current job: the next one is still queued for another worker.
    assert queued_after.get_status(refresh=True) == JobStatus.QUEUED


def test_second_sigterm_requeues_the_running_job(redis_conn: redis.Redis, spawn_worker: Spawn) -> None:
    interactive, _ = queues(redis_conn)
    job = interactive.enqueue(hang_first_time, "requeued")
    proc = spawn_worker()
    wait_for(lambda: texts(redis_conn, "started") == ["requeued"])
    proc.send_signal(signal.SIGTERM)
    time.sleep(1.2)  # RQ ignores a repeated signal within one second
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=15)
    assert job.get_status(refresh=True) == JobStatus.QUEUED
    assert interactive.job_ids == [job.id]
    assert interactive.started_job_registry.count == 0


def test_a_killed_workers_job_is_rerun_by_the_next_worker(
    redis_conn: redis.Redis, spawn_worker: Spawn
) -> None:
    interactive, _ = queues(redis_conn)
    job = interactive.enqueue(hang_first_time, "orphan")
    first = spawn_worker()
    wait_for(lambda: texts(redis_conn, "started") == ["orphan"])
    # While its worker lives, the job is not an orphan.
    assert recover_orphans(redis_conn, QUEUE_NAMES) == []
    first.kill()
    first.wait()
    spawn_worker()
    wait_for(lambda: job.get_status(refresh=True) == JobStatus.FINISHED)
    assert texts(redis_conn, "ran") == ["orphan"]
    assert int(redis_conn.get("attempts:orphan") or 0) == 2


def test_a_live_worker_reaps_a_dead_peers_job(redis_conn: redis.Redis, spawn_worker: Spawn) -> None:
    interactive, _ = queues(redis_conn)
    job = interactive.enqueue(hang_first_time, "peer")
    victim = spawn_worker()
    wait_for(lambda: texts(redis_conn, "started") == ["peer"])
    survivor = spawn_worker()
    time.sleep(0.5)  # the survivor's start-up recovery finds nothing to do
    victim.kill()
    victim.wait()
    wait_for(lambda: job.get_status(refresh=True) == JobStatus.FINISHED, timeout=20)
    assert survivor.poll() is None
    assert int(redis_conn.get("attempts:peer") or 0) == 2


def test_a_running_job_notices_a_cancel_within_a_second(redis_conn: redis.Redis, spawn_worker: Spawn) -> None:
    interactive, _ = queues(redis_conn)
    job = interactive.enqueue(cancellable, PR_KEY)
    spawn_worker()
    wait_for(lambda: texts(redis_conn, "started") == ["cancellable"])
    flagged_at = time.time()
    cancel_pr(redis_conn, PR_KEY)
    wait_for(lambda: job.get_status(refresh=True) == JobStatus.FINISHED)
    assert "stopped" in str(job.return_value())
    assert float(redis_conn.get("noticed_at") or 0) - flagged_at < 1.0


def test_a_job_rebuilds_its_context_from_dict_arguments(
    redis_conn: redis.Redis, redis_server: PrivateRedis
) -> None:
    with GitHubSandbox() as github:
        installation_id = github.create_installation("octo")
        github.create_repo("octo/demo", {"a.py": "x = 1\n"}, installation_id=installation_id)
        number = github.open_pull_request("octo/demo", "feature", {"a.py": "x = 2\n"})
        pr = PullRequestRef(installation_id, "octo", "demo", number, delivery_id="d-1")
        interactive, _ = queues(redis_conn)
        job = interactive.enqueue(context_probe, pr=pr.as_dict())
        settings = Settings.load(
            env={
                "REDIS_URL": redis_server.url,
                "GITHUB_APP_ID": str(github.app_id),
                "GITHUB_PRIVATE_KEY": github.private_key_pem,
                "GITHUB_API_URL": github.url,
                "CEREBRAS_API_KEY": "unused",
            },
            env_file=None,
        )
        time.sleep(0.05)
        work(settings, burst=True)
        result = job.return_value()
        assert result is not None, job.latest_result()
        assert result["head"] == github.head_sha("octo/demo", number)
        assert result["job_id"] == job.id
        assert result["queue_wait"] >= 0.05
        assert result["spans"] == ["github_ms", "queue_wait_ms"]
        assert result["cached_client"] is True
        assert result["order"] == 5 and result["cancelled"] is False
        assert job_log_fields(job) == {
            "job_id": job.id,
            "delivery_id": "d-1",
            "installation": installation_id,
            "repo": "octo/demo",
            "pr": number,
        }


def test_a_pool_of_processes_shares_the_work_and_exits_in_burst(
    redis_conn: redis.Redis, spawn_worker: Spawn
) -> None:
    interactive, _ = queues(redis_conn)
    jobs = [interactive.enqueue(pause_and_record, f"pooled-{i}") for i in range(6)]
    proc = spawn_worker("--processes", "2", "--burst")
    assert proc.wait(timeout=30) == 0
    assert all(Job.fetch(j.id, connection=redis_conn).get_status() == JobStatus.FINISHED for j in jobs)
    names, pids = zip(*(item.split(":") for item in texts(redis_conn, "ran")), strict=True)
    assert sorted(names) == sorted(f"pooled-{i}" for i in range(6))
    assert len(set(pids)) == 2


def test_a_supervisor_whose_workers_keep_dying_gives_up(spawn_worker: Spawn) -> None:
    """A worker that dies at start (here: Redis is gone) is restarted after a growing pause, then all stop."""
    with PrivateRedis() as doomed:
        proc = spawn_worker("--processes", "2", REDIS_URL=doomed.url)
        conn = redis.Redis.from_url(doomed.url)
        wait_for(lambda: len(conn.smembers("rq:workers")) == 2)
        pids = [int(conn.hget(key, "pid") or 0) for key in conn.smembers("rq:workers")]
        conn.close()
    # Running workers ride out a Redis outage; one that is restarted now dies at once, again and again.
    os.kill(pids[0], signal.SIGKILL)
    started = time.monotonic()
    # Without the give-up rule this supervisor would respawn the dying worker forever.
    assert proc.wait(timeout=120) == 1
    # The pauses between restarts grow (0.5, 1, 2, 4 s): no tight respawn loop.
    assert time.monotonic() - started > 5


def test_workers_stop_when_their_supervisor_is_killed(redis_conn: redis.Redis, spawn_worker: Spawn) -> None:
    """A SIGKILLed supervisor leaves no orphan workers behind: each notices and stops."""
    proc = spawn_worker("--processes", "2")
    wait_for(lambda: len(redis_conn.smembers("rq:workers")) == 2)
    pids = [int(redis_conn.hget(key, "pid") or 0) for key in redis_conn.smembers("rq:workers")]
    proc.kill()
    proc.wait()

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A zombie (exited, not yet reaped by init) counts as gone.
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"

    wait_for(lambda: all(gone(pid) for pid in pids), timeout=15)


def test_a_job_popped_but_never_started_is_queued_again(redis_conn: redis.Redis) -> None:
    # As the intake queues them: both jobs are recorded in QUEUED_KEY with the time they were queued.
    queue = DeliveryQueue(redis_conn)
    spec = JobSpec("workers.jobs.review", REVIEW, {"pr": {"number": 7}, "trigger": "opened"})
    queue.enqueue("dropped", [spec])
    queue.enqueue("waiting", [spec])
    queue.enqueue("done", [spec])
    review = Queue(REVIEW, connection=redis_conn)
    # A worker popped "dropped" and lost Redis before starting it; "done" ran; "waiting" is still queued.
    assert redis_conn.lpop(review.key) == b"dropped"
    assert redis_conn.lrem(review.key, 1, "done") == 1
    redis_conn.hset("rq:job:done", "status", "finished")
    later = time.time() + DROPPED_GRACE_SECONDS + 1

    # Within the grace period nothing is looked at.
    assert recover_dropped(redis_conn, set(), time.time()) == ([], set())
    # First sweep after it: "dropped" is only a suspect (a worker could be starting it right now).
    requeued, suspects = recover_dropped(redis_conn, set(), later)
    assert (requeued, suspects) == ([], {"dropped"})
    assert redis_conn.zscore(QUEUED_KEY, "done") is None, "a job that moved on leaves the set"
    # Still missing on the next sweep: queued again, at the front.
    requeued, suspects = recover_dropped(redis_conn, suspects, later + 5)
    assert (requeued, suspects) == (["dropped"], set())
    assert redis_conn.lrange(review.key, 0, -1) == [b"dropped", b"waiting"]
    assert Job.fetch("dropped", connection=redis_conn).get_status() == JobStatus.QUEUED
    # A job waiting in its queue is looked at again only a grace period later.
    assert redis_conn.zscore(QUEUED_KEY, "waiting") == later


def test_a_suspect_that_started_meanwhile_is_not_run_twice(redis_conn: redis.Redis) -> None:
    DeliveryQueue(redis_conn).enqueue("slow-start", [JobSpec("workers.jobs.review", REVIEW, {})])
    assert redis_conn.lpop(Queue(REVIEW, connection=redis_conn).key) == b"slow-start"
    later = time.time() + DROPPED_GRACE_SECONDS + 1
    _, suspects = recover_dropped(redis_conn, set(), later)
    assert suspects == {"slow-start"}
    redis_conn.hset("rq:job:slow-start", "status", "started")
    assert recover_dropped(redis_conn, suspects, later + 5) == ([], set())
    assert redis_conn.llen(Queue(REVIEW, connection=redis_conn).key) == 0
