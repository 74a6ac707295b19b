"""Requeue what a dead or failed worker left behind: its started job, or a job it popped but never started.

Delivery is at-least-once; the flows make their writes idempotent. Checked against RQ 2.12, its own
maintenance does not serve:

- ``StartedJobRegistry.cleanup`` (each worker runs it through ``clean_registries`` every ten minutes) acts
  only once an entry expires, the job's timeout plus a minute after its start, and then fails the job
  (``AbandonedJobError``) unless it has retries left. ``recover_orphans`` requeues a job as soon as its
  worker is provably gone instead (a ``SimpleWorker`` sends no heartbeats during a job).
- ``BaseRegistry.requeue`` removes the entry by job id, but the started registry holds ``job:execution``
  entries: it raises ``InvalidJobOperation`` for every started job. The reaper removes the entry itself.
- RQ records a job between pop and start only with one queue (``IntermediateQueue``, BLMOVE); a worker of
  two queues pops with BLPOP, and RQ's clean-up of that list fails the job. ``recover_dropped`` finds such
  jobs through ``QUEUED_KEY``, which the intake writes, and queues them again.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Sequence
from typing import cast

import redis
import structlog
from rq import Queue, Worker
from rq.exceptions import NoSuchJobError
from rq.executions import Execution
from rq.job import Job
from rq.registry import StartedJobRegistry

from bot.intake.enqueue import QUEUED_KEY
from bot.processes import alive
from bot.redis_server import as_text

REAP_INTERVAL_SECONDS = 5.0
# How long a queued job is left alone before the reaper checks that it is still in its queue.
DROPPED_GRACE_SECONDS = 10.0

log = structlog.get_logger("spark.worker")


def worker_gone(conn: redis.Redis, worker_name: str, *, hostname: str | None = None) -> bool:
    """Return True when the named RQ worker is provably dead: its key expired, or same host and a dead pid."""
    if not worker_name:
        return False
    worker = Worker.find_by_key(Worker.redis_worker_namespace_prefix + worker_name, connection=conn)
    if worker is None or worker.death_date is not None:
        return True
    if worker.hostname != (hostname or socket.gethostname()) or worker.pid is None:
        return False
    return not alive(worker.pid)


def recover_orphans(conn: redis.Redis, queue_names: Sequence[str]) -> list[str]:
    """Requeue (at the front) every started job whose worker is gone; return the requeued job ids.

    Removing the registry entry is the claim: when several workers reap at once, only the one whose ZREM
    succeeded requeues, so an orphan runs again exactly once more.
    """
    requeued: list[str] = []
    for name in queue_names:
        queue = Queue(name, connection=conn)
        registry = StartedJobRegistry(queue=queue)
        for job_id, execution_id in registry.get_job_and_execution_ids(cleanup=False):
            try:
                execution = Execution.fetch(execution_id, job_id, connection=conn)
                worker_name = execution.worker_name
            except ValueError:  # the execution hash expired with its worker
                worker_name = ""
                execution = None
            if worker_name and not worker_gone(conn, worker_name):
                continue
            if not worker_name and execution is not None:
                continue  # an execution without a worker is being prepared right now
            if not conn.zrem(registry.key, f"{job_id}:{execution_id}"):
                continue  # another reaper claimed it
            try:
                job = Job.fetch(job_id, connection=conn)
            except NoSuchJobError:  # the job hash is gone: nothing left to run
                continue
            queue.enqueue_job(job, at_front=True)
            conn.zadd(QUEUED_KEY, {job_id: time.time()})
            requeued.append(job_id)
            log.warning("orphan_requeued", job_id=job_id, queue=name, dead_worker=worker_name)
    return requeued


def recover_dropped(conn: redis.Redis, suspects: set[str], now: float) -> tuple[list[str], set[str]]:
    """Requeue jobs taken off their queue that never started; return them and the suspects for next time.

    A job queued over ``DROPPED_GRACE_SECONDS`` ago (``QUEUED_KEY``) whose status is still "queued" but
    that is in no queue was popped by a worker that failed, or lost Redis, before starting it. It is requeued
    only when it was already missing on the previous sweep (``suspects``): a worker takes milliseconds from
    the pop to the start, so a job caught in between is not run twice. Jobs that moved on leave
    ``QUEUED_KEY``.
    """
    stale = cast(list[bytes], conn.zrangebyscore(QUEUED_KEY, "-inf", now - DROPPED_GRACE_SECONDS, 0, 1000))
    job_ids = [as_text(job_id) for job_id in stale]
    if not job_ids:
        return [], set()
    with conn.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hmget(f"{Job.redis_job_namespace_prefix}{job_id}", "status", "origin")
        records: list[list[bytes | None]] = pipe.execute()
    queued = {
        job_id: as_text(origin)
        for job_id, (status, origin) in zip(job_ids, records, strict=True)
        if status == b"queued" and origin
    }
    moved_on = [job_id for job_id in job_ids if job_id not in queued]
    if moved_on:
        conn.zrem(QUEUED_KEY, *moved_on)
    in_queues = {name: set(Queue(name, connection=conn).get_job_ids()) for name in set(queued.values())}
    missing = {job_id for job_id, name in queued.items() if job_id not in in_queues[name]}
    requeued: list[str] = []
    for job_id in sorted(missing & suspects):
        if not conn.zrem(QUEUED_KEY, job_id):
            continue  # another reaper claimed it
        try:
            job = Job.fetch(job_id, connection=conn)
        except NoSuchJobError:
            continue
        Queue(queued[job_id], connection=conn).enqueue_job(job, at_front=True)
        conn.zadd(QUEUED_KEY, {job_id: now})
        requeued.append(job_id)
        log.warning("dropped_job_requeued", job_id=job_id, queue=queued[job_id])
    # Jobs still waiting in their queue are looked at again a grace period from now, not on every sweep.
    waiting = {job_id: now for job_id in queued if job_id not in missing}
    if waiting:
        conn.zadd(QUEUED_KEY, waiting)
    return requeued, missing - suspects


class Reaper(threading.Thread):
    """Daemon thread that runs ``recover_orphans`` and ``recover_dropped`` every ``interval`` seconds."""

    def __init__(self, conn: redis.Redis, queue_names: Sequence[str], interval: float) -> None:
        super().__init__(name="spark-reaper", daemon=True)
        self.conn = conn
        self.queue_names = tuple(queue_names)
        self.interval = interval
        self.stopped = threading.Event()

    def run(self) -> None:
        """Reap until ``stopped`` is set; a Redis hiccup is logged and retried next round."""
        suspects: set[str] = set()
        while not self.stopped.wait(self.interval):
            try:
                recover_orphans(self.conn, self.queue_names)
                _, suspects = recover_dropped(self.conn, suspects, time.time())
            except redis.RedisError as exc:
                log.warning("reaper_redis_error", error=str(exc))
