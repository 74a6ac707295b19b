"""``spark worker``: long-lived RQ ``SimpleWorker`` processes that keep their HTTP clients warm across jobs.

No fork per job: a forking worker loses its connection pools, installation tokens and imports with every job.
Each process drains ``spark-interactive`` before ``spark-review`` (RQ tries queues in the order given).
SIGTERM asks for a warm shutdown (the current job finishes, then the process exits; an idle worker exits at
once); a second SIGTERM requeues the current job at the front of its queue and exits at once.
``--processes N`` runs N of them under ``workers.pool``; ``workers.reaper`` requeues what a dead worker left
behind.

``SparkQueue`` and ``SparkWorker`` override six RQ methods, each for a reason RQ has no option for (the
"Overridden:" line of its docstring); tests/workers/test_rq_contract.py fails if the installed RQ changes.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

import redis
import structlog
from rq import Queue, SimpleWorker
from rq.exceptions import StopRequested
from rq.job import Job
from rq.registry import StartedJobRegistry

from bot.intake.routing import INTERACTIVE, REVIEW
from bot.logs import configure_logging
from bot.ports import check_listen
from bot.redis_server import as_text, connect, wait_for_redis
from bot.settings import Settings
from workers import context
from workers.context import job_log_fields, job_logging, queue_wait
from workers.limits import InstallationSlots
from workers.pool import supervise
from workers.reaper import REAP_INTERVAL_SECONDS, Reaper, recover_orphans

# Order matters: the worker tries them first to last on every dequeue.
QUEUE_NAMES: tuple[str, ...] = (INTERACTIVE, REVIEW)
# How long a worker waits when every queued job belongs to an installation at its limit.
DEFER_PAUSE_SECONDS = 0.05

log = structlog.get_logger("spark.worker")


# True only while this process is blocked in BLPOP waiting for a job: the one moment a stop may interrupt
# it, because nothing has been taken off a queue yet.
_waiting_for_a_job = False
# True once this process's worker was asked to stop (the signal handler and ``lpop`` run in the main thread).
_stop_requested = False


class SparkQueue(Queue):
    """RQ's queue, noting when a worker is blocked waiting for a job (see ``SparkWorker._shutdown``)."""

    @classmethod
    def lpop(
        cls, queue_keys: Sequence[str], timeout: int | None, connection: redis.Redis | None = None
    ) -> Any:
        """Pop the next job id (BLPOP when ``timeout``), marking the wait as interruptible; none once stopped.

        Overridden: RQ has no hook for the moment a worker blocks waiting for a job; ``_shutdown`` needs it.
        """
        global _waiting_for_a_job
        _waiting_for_a_job = timeout is not None
        try:
            # Checked after the wait is marked interruptible, so no stop falls between the two. A stop
            # that came after the worker's own check (in its heartbeat, say, right after a job) used to
            # leave it in BLPOP until a job came (which it then ran) or SIGKILL ended it.
            if _stop_requested:
                raise StopRequested()
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
        """Dequeue the next job whose installation has a free slot; others go back to their queue's tail.

        Overridden: RQ has no check between dequeuing a job and running it.
        """
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
        """Run ``job`` in this process; every log line meanwhile carries the job's ids.

        Overridden: RQ has no hook around a job's run (callbacks are per job, set when it is queued); this one
        binds the job's log fields, logs its start and end, and frees its installation slot.
        """
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
                    status=as_text(job.get_status(refresh=True)),
                    duration_ms=(time.time() - started) * 1000,
                )

    def _shutdown(self) -> None:
        """Warm stop: interrupt only a wait for a job; a job already taken off its queue runs first.

        Overridden: RQ raises ``StopRequested`` whenever the worker is not yet busy, which can land between
        popping a job id and registering the job as started: that job would be in no queue and no registry.
        """
        global _stop_requested
        _stop_requested = True
        if _waiting_for_a_job:
            raise StopRequested()
        self._stop_requested = True
        self.set_shutdown_requested_date()  # type: ignore[no-untyped-call]

    def unsubscribe(self) -> None:
        """Stop listening for RQ's worker commands: the listener thread is told to end, then woken.

        Overridden: RQ unsubscribes first; when the reply wakes the listener before it is told to end, it
        waits a minute for a new subscription and RQ's join gives up after a second: about one stop in six
        took a second longer.
        """
        if self.pubsub_thread is not None:
            self.pubsub_thread.stop()
        super().unsubscribe()  # type: ignore[no-untyped-call]

    def request_force_stop(self, signum: int, frame: FrameType | None) -> None:
        """Second SIGTERM/SIGINT: put the current job back at the front of its queue and exit now.

        Overridden: RQ's cold stop leaves a ``SimpleWorker``'s job in the started registry, where only a
        reaper (another worker's, or this one's after a restart) would find it.
        """
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


def warm_up(state: context.ProcessClients) -> None:
    """Import the job code and build the clients before the first job, so no job pays for them."""
    importlib.import_module("workers.jobs")
    settings = state.settings
    if settings.github_app_id is not None and settings.github_private_key is not None:
        _ = state.github
    if settings.cerebras_api_key is not None:
        # The model warm-up is one network round trip; it must not delay taking the first job.
        threading.Thread(target=state.model.warm, name="spark-model-warm", daemon=True).start()


def work(
    settings: Settings,
    *,
    burst: bool = False,
    queue_names: Sequence[str] = QUEUE_NAMES,
    name: str | None = None,
) -> int:
    """Run one worker in this process until the queues are empty (``burst``) or a stop signal; return 0."""
    global _stop_requested
    _stop_requested = False  # a new worker: an earlier one's stop in this process is not its own
    conn = connect(settings.redis_url, settings.spark_data_dir, role="worker")
    warm_up(context.install(settings, conn))
    recovered = recover_orphans(conn, queue_names)
    queues = [SparkQueue(queue, connection=conn) for queue in queue_names]
    worker = SparkWorker(queues, name=name, connection=conn)
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


def _pool_worker(settings: Settings, name: str, burst: bool) -> None:
    """What each process of a pool runs: one worker, named as the pool named it."""
    configure_logging(settings)
    raise SystemExit(work(settings, burst=burst, name=name))


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
    if metrics_port:
        check_listen("0.0.0.0", metrics_port, "--metrics-port")
    # A worker started before its Redis (a pod, a compose service) waits for it rather than crash-looping.
    wait_for_redis(
        settings.redis_url,
        settings.spark_data_dir,
        settings.spark_redis_wait_seconds,
        role="worker",
        on_retry=lambda why, pause: log.warning("redis_unreachable", reason=why, retry_in_s=round(pause, 2)),
    )
    if processes == 1:
        if metrics_port:
            from bot.metrics import start_metrics_server

            start_metrics_server(metrics_port)
        return work(settings, burst=burst)
    # Start (or join) the embedded Redis before forking so the children share one server.
    conn = connect(settings.redis_url, settings.spark_data_dir, role="worker")
    conn.ping()
    return supervise(
        conn,
        QUEUE_NAMES,
        processes,
        functools.partial(_pool_worker, settings),
        burst=burst,
        log_level=settings.log_level,
        metrics_port=metrics_port,
    )
