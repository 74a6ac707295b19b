"""``spark worker``: long-lived RQ ``SimpleWorker`` processes that keep their HTTP clients warm across jobs.

No fork per job: a forking worker loses its connection pools, installation tokens and imports with every job.
Each process drains ``spark-interactive`` before ``spark-review`` (RQ tries queues in order).
SIGTERM asks for a warm shutdown (the current job finishes, then the process exits); a second SIGTERM requeues
the current job at the front of its queue and exits at once.

A ``SimpleWorker`` sends no heartbeats during a job, so a worker killed with ``kill -9`` would leave its
job in RQ's started registry until the worker key expires. ``recover_orphans`` requeues such jobs when
their worker is provably gone (same host and a dead pid, or its Redis key expired): at start-up and every
few seconds from a reaper thread. Delivery is at-least-once; the flows make their writes idempotent.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any, cast

import redis
import structlog
from rq import Queue, SimpleWorker
from rq.exceptions import NoSuchJobError, StopRequested
from rq.executions import Execution
from rq.job import Job
from rq.registry import StartedJobRegistry

from bot.intake.enqueue import QUEUED_KEY
from bot.intake.routing import INTERACTIVE, REVIEW
from bot.logs import configure_logging
from bot.redis_server import connect
from bot.settings import Settings
from workers import context
from workers.context import job_log_fields, job_logging, queue_wait
from workers.limits import InstallationSlots

# Order matters: the worker tries them first to last on every dequeue.
QUEUE_NAMES: tuple[str, ...] = (INTERACTIVE, REVIEW)
REAP_INTERVAL_SECONDS = 5.0
# How long a queued job is left alone before the reaper checks that it is still in its queue.
DROPPED_GRACE_SECONDS = 10.0
# How long a worker waits when every queued job belongs to an installation at its limit.
DEFER_PAUSE_SECONDS = 0.05

log = structlog.get_logger("spark.worker")


def _text(value: bytes | str | None) -> str:
    if isinstance(value, bytes):
        return value.decode()
    return value or ""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def worker_gone(conn: redis.Redis, worker_name: str, *, hostname: str | None = None) -> bool:
    """Return True when the named RQ worker is provably dead: its key expired, or same host and a dead pid."""
    if not worker_name:
        return False
    data = conn.hgetall(f"rq:worker:{worker_name}")
    if not data:
        return True
    fields = {_text(k): _text(v) for k, v in data.items()}
    if fields.get("death"):
        return True
    if fields.get("hostname") != (hostname or socket.gethostname()) or not fields.get("pid", "").isdigit():
        return False
    return not _pid_alive(int(fields["pid"]))


def recover_orphans(conn: redis.Redis, queue_names: Sequence[str] = QUEUE_NAMES) -> list[str]:
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
    job_ids = [_text(job_id) for job_id in stale]
    if not job_ids:
        return [], set()
    with conn.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hmget(f"{Job.redis_job_namespace_prefix}{job_id}", "status", "origin")
        records: list[list[bytes | None]] = pipe.execute()
    queued = {
        job_id: _text(origin)
        for job_id, (status, origin) in zip(job_ids, records, strict=True)
        if status == b"queued" and origin
    }
    moved_on = [job_id for job_id in job_ids if job_id not in queued]
    if moved_on:
        conn.zrem(QUEUED_KEY, *moved_on)
    in_queues = {
        name: set(conn.lrange(f"{Queue.redis_queue_namespace_prefix}{name}", 0, -1))
        for name in set(queued.values())
    }
    missing = {job_id for job_id, name in queued.items() if job_id.encode() not in in_queues[name]}
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


# True only while this process is blocked in BLPOP waiting for a job: the one moment a stop may interrupt
# it, because nothing has been taken off a queue yet.
_waiting_for_a_job = False


class SparkQueue(Queue):
    """RQ's queue, noting when a worker is blocked waiting for a job (see ``SparkWorker._shutdown``)."""

    @classmethod
    def lpop(
        cls, queue_keys: Sequence[str], timeout: int | None, connection: redis.Redis | None = None
    ) -> Any:
        """Pop the next job id (BLPOP when ``timeout``), marking the wait as interruptible."""
        global _waiting_for_a_job
        _waiting_for_a_job = timeout is not None
        try:
            return super().lpop(queue_keys, timeout, connection=connection)
        finally:
            _waiting_for_a_job = False


class SparkWorker(SimpleWorker):
    """A ``SimpleWorker`` that logs each job as one structured line and requeues its job on a cold stop."""

    queue_class = SparkQueue
    _running: tuple[Job, Queue] | None = None
    # The per-installation cap (see workers/limits.py); None runs every job it dequeues.
    slots: InstallationSlots | None = None

    def dequeue_job_and_maintain_ttl(
        self, timeout: int | None, max_idle_time: int | None = None
    ) -> tuple[Job, Queue] | None:
        """Dequeue the next job whose installation has a free slot; others go back to their queue's tail."""
        deferred = 0
        while True:
            if self._stop_requested:
                return None
            result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
            if result is None or self.slots is None or self.slots.acquire_or_defer(*result):
                return result
            deferred += 1
            # A whole lap of the queues held nothing runnable: wait for a slot instead of spinning on Redis.
            if deferred >= sum(int(self.connection.llen(q.key)) for q in self.queues):
                time.sleep(DEFER_PAUSE_SECONDS)
                deferred = 0

    def execute_job(self, job: Job, queue: Queue) -> None:
        """Run ``job`` in this process; every log line meanwhile carries the job's ids."""
        self._running = (job, queue)
        started = time.time()
        with job_logging(job_log_fields(job)):
            log.info(
                "job_started", func=job.func_name, queue=queue.name, queue_wait_ms=queue_wait(job) * 1000
            )
            try:
                super().execute_job(job, queue)
            finally:
                self._running = None
                if self.slots is not None:
                    self.slots.release(job)
                log.info(
                    "job_ended",
                    func=job.func_name,
                    queue=queue.name,
                    status=_text(job.get_status(refresh=True)),
                    duration_ms=(time.time() - started) * 1000,
                )

    def _shutdown(self) -> None:
        """Warm stop: interrupt only a wait for a job; a job already taken off its queue runs first.

        RQ raises ``StopRequested`` whenever the worker is not yet busy, which can land between popping a
        job id and registering the job as started: that job would be in no queue and no registry, lost.
        """
        if _waiting_for_a_job:
            raise StopRequested()
        self._stop_requested = True
        self.set_shutdown_requested_date()  # type: ignore[no-untyped-call]

    def request_force_stop(self, signum: int, frame: FrameType | None) -> None:
        """Second SIGTERM/SIGINT: put the current job back at the front of its queue and exit now."""
        running = self._running
        if running is not None:
            job, queue = running
            registry = StartedJobRegistry(queue=queue)
            for job_id, execution_id in registry.get_job_and_execution_ids(cleanup=False):
                if job_id == job.id and self.connection.zrem(registry.key, f"{job_id}:{execution_id}"):
                    queue.enqueue_job(job, at_front=True)
                    log.warning("job_requeued_on_stop", job_id=job.id, queue=queue.name)
        self.register_death()  # type: ignore[no-untyped-call]
        logging.shutdown()
        os._exit(1)


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


def warm_up(state: context.ProcessClients) -> None:
    """Import the job code and build the clients before the first job, so no job pays for them."""
    importlib.import_module("workers.jobs")
    settings = state.settings
    if settings.github_app_id is not None and settings.github_private_key is not None:
        _ = state.github
    if settings.cerebras_api_key is not None:
        # The model warm-up is one network round trip; it must not delay taking the first job.
        threading.Thread(target=state.model.warm, name="spark-model-warm", daemon=True).start()


def work(settings: Settings, *, burst: bool = False, queue_names: Sequence[str] = QUEUE_NAMES) -> int:
    """Run one worker in this process until the queues are empty (``burst``) or a stop signal; return 0."""
    conn = connect(settings.redis_url, settings.spark_data_dir, role="worker")
    warm_up(context.install(settings, conn))
    recovered = recover_orphans(conn, queue_names)
    queues = [SparkQueue(name, connection=conn) for name in queue_names]
    worker = SparkWorker(queues, connection=conn)
    worker.slots = InstallationSlots(conn, settings.spark_installation_job_limit)
    reaper = Reaper(conn, queue_names, REAP_INTERVAL_SECONDS)
    reaper.start()
    log.info(
        "worker_started", worker=worker.name, pid=os.getpid(), queues=list(queue_names), recovered=recovered
    )
    try:
        worker.work(burst=burst, logging_level=settings.log_level, with_scheduler=False)
    finally:
        reaper.stopped.set()
        context.uninstall()
    log.info("worker_stopped", worker=worker.name, pid=os.getpid())
    return 0


def _child(settings: Settings, burst: bool) -> None:
    configure_logging(settings)
    _stop_when_orphaned(os.getppid())
    raise SystemExit(work(settings, burst=burst))


def _stop_when_orphaned(supervisor: int) -> None:
    """Stop this worker (warmly) if its supervisor dies, e.g. by SIGKILL, instead of living on alone."""

    def watch() -> None:
        while os.getppid() == supervisor:
            time.sleep(1.0)
        log.warning("supervisor_gone", supervisor=supervisor)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="spark-orphan-watch", daemon=True).start()


QUICK_DEATH_SECONDS = 10.0
MAX_QUICK_DEATHS = 5
RESTART_PAUSE_SECONDS = 0.25
MAX_RESTART_PAUSE_SECONDS = 8.0


def supervise(
    settings: Settings, processes: int, *, burst: bool = False, metrics_port: int | None = None
) -> int:
    """Run ``processes`` workers, restart any that die (unless bursting), forward SIGTERM; return 0.

    With ``metrics_port`` the supervisor serves the sum of its workers' metrics (multi-process mode).
    """
    # Fork is safe here: the supervisor opens no HTTP client, and each child builds its own after the fork.
    mp = multiprocessing.get_context("fork")
    stopping = threading.Event()

    started: dict[int, float] = {}

    def spawn(index: int) -> multiprocessing.process.BaseProcess:
        proc = mp.Process(target=_child, args=(settings, burst), name="spark-worker")
        proc.start()
        started[index] = time.monotonic()
        return proc

    children = [spawn(index) for index in range(processes)]
    if metrics_port:
        from bot.metrics import start_metrics_server

        start_metrics_server(metrics_port)
    # Children that die right after starting (Redis unreachable, a broken deployment) are restarted with a
    # growing pause, and after a few in a row the supervisor gives up, so the failure shows instead of a loop.
    quick_deaths = [0] * processes

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()
        for proc in children:
            if proc.pid and proc.is_alive():
                os.kill(proc.pid, signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info("supervisor_started", pid=os.getpid(), processes=processes, burst=burst)
    failed = False
    while any(proc.is_alive() for proc in children) or not (stopping.is_set() or burst):
        time.sleep(0.2)
        for index, proc in enumerate(children):
            if proc.is_alive() or proc.exitcode is None:
                continue
            if metrics_port and proc.pid is not None:
                from bot.metrics import process_exited

                process_exited(proc.pid)
            if not burst and not stopping.is_set():
                log.warning("worker_died", pid=proc.pid, exitcode=proc.exitcode)
                lived = time.monotonic() - started[index]
                quick_deaths[index] = quick_deaths[index] + 1 if lived < QUICK_DEATH_SECONDS else 0
                if quick_deaths[index] >= MAX_QUICK_DEATHS:
                    log.error("worker_keeps_dying", deaths=quick_deaths[index], exitcode=proc.exitcode)
                    on_signal(signal.SIGTERM, None)
                    failed = True
                    continue
                pause = RESTART_PAUSE_SECONDS * 2 ** quick_deaths[index]
                stopping.wait(min(pause, MAX_RESTART_PAUSE_SECONDS))
                children[index] = spawn(index)
            elif proc.exitcode not in (0, None):
                failed = True
    for proc in children:
        proc.join()
    return 1 if failed else 0


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Entry point of ``spark worker [--processes N] [--burst] [--metrics-port PORT]``."""
    settings.require_worker()
    configure_logging(settings)
    processes = int(getattr(args, "processes", 1) or 1)
    burst = bool(getattr(args, "burst", False))
    if processes < 1:
        log.error("bad_processes", processes=processes)
        return 2
    metrics_port = getattr(args, "metrics_port", None)
    if processes == 1:
        if metrics_port:
            from bot.metrics import start_metrics_server

            start_metrics_server(metrics_port)
        return work(settings, burst=burst)
    # Start (or join) the embedded Redis before forking so the children share one server.
    connect(settings.redis_url, settings.spark_data_dir, role="worker").ping()
    return supervise(settings, processes, burst=burst, metrics_port=metrics_port)
