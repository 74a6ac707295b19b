"""``spark worker --processes N``: RQ's ``WorkerPool`` running Spark's worker processes, with a back-off.

The pool forks N processes, restarts one that dies, forwards SIGTERM/SIGINT (as SIGINT, which an RQ worker
handles the same way) and, in burst mode, returns once every process is done. Three methods are overridden:

- ``get_worker_process``: RQ's ``run_worker`` builds a plain worker and starts RQ's scheduler in it
  (``with_scheduler=True``, fixed); Spark's processes run their own start-up instead (``workers.runtime``:
  clients, the reaper, installation slots, embedded Redis membership) and need no scheduler.
- ``handle_dead_worker``: RQ restarts a dead process at once, forever; here each restart first waits out its
  slot's back-off (``workers.backoff``), the pool gives up on a crash loop, and the exit is counted (failures
  give exit status 1; the metrics of a dead process are merged away).
- ``start_workers``: the metrics server starts once the first processes are forked, so that they do not
  inherit its listening socket (a process finishing its job after the pool died would keep the port).
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess

import redis
import structlog
from rq.worker_pool import WorkerData, WorkerPool

from workers.backoff import CrashBackoff

log = structlog.get_logger("spark.worker")

# What a pool process runs: one worker named ``name`` (bursting or not) until it stops.
WorkerMain = Callable[[str, bool], None]


class SparkPool(WorkerPool):
    """A ``WorkerPool`` whose processes run ``main`` and whose restarts back off (module docstring)."""

    def __init__(
        self,
        conn: redis.Redis,
        queue_names: Sequence[str],
        processes: int,
        main: WorkerMain,
        *,
        on_exit: Callable[[int], None] | None = None,
        on_started: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(list(queue_names), connection=conn, num_workers=processes)
        self.main = main
        self.on_exit = on_exit
        self.on_started = on_started
        self.failed = False
        self._born: dict[str, float] = {}
        self._backoff: dict[str, CrashBackoff] = {}
        # Streaks of processes that died, passed on to their replacements (RQ names each process anew).
        self._streaks: list[CrashBackoff] = []

    def start_workers(self, burst: bool = True, _sleep: float = 0, logging_level: str = "INFO") -> None:
        """Fork the first processes, then run ``on_started`` (overridden: module docstring)."""
        super().start_workers(burst=burst, _sleep=_sleep, logging_level=logging_level)
        if self.on_started is not None:
            self.on_started()

    def get_worker_process(
        self, name: str, burst: bool, _sleep: float = 0, logging_level: str = "INFO"
    ) -> BaseProcess:
        """Return an unstarted process that runs ``main(name, burst)`` (overridden: module docstring)."""
        # Fork is safe here: the pool opens no HTTP client, and each process builds its own after the fork.
        process = multiprocessing.get_context("fork").Process(
            target=_run_in_pool, args=(self.main, name, burst), name=f"spark-worker {name}"
        )
        self._born[name] = time.monotonic()
        self._backoff[name] = self._streaks.pop() if self._streaks else CrashBackoff()
        return process

    def handle_dead_worker(self, worker_data: WorkerData) -> None:
        """Forget a dead process; unless stopping, wait out its back-off before RQ restarts it, or give up."""
        super().handle_dead_worker(worker_data)
        exitcode = worker_data.process.exitcode
        lived = time.monotonic() - self._born.pop(worker_data.name, 0.0)
        backoff = self._backoff.pop(worker_data.name, CrashBackoff())
        if self.on_exit is not None:
            self.on_exit(worker_data.pid)
        if self._burst or self.status == self.Status.STOPPED:
            # A process the pool's own stop ended before it installed its handlers did as it was told.
            told = self.status == self.Status.STOPPED and exitcode in (-signal.SIGINT, -signal.SIGTERM)
            self.failed = self.failed or (exitcode not in (0, None) and not told)
            return
        log.warning("worker_died", pid=worker_data.pid, exitcode=exitcode)
        pause = backoff.after_death(lived)
        if pause is None:
            log.error("worker_keeps_dying", deaths=backoff.quick_deaths, exitcode=exitcode)
            self.failed = True
            self.request_stop()  # type: ignore[no-untyped-call]  # RQ leaves it unannotated
            return
        self._wait(pause)
        self._streaks.append(backoff)

    def _wait(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if a stop signal arrives meanwhile."""
        deadline = time.monotonic() + seconds
        while self.status != self.Status.STOPPED and time.monotonic() < deadline:
            time.sleep(min(0.1, deadline - time.monotonic()))


def _run_in_pool(main: WorkerMain, name: str, burst: bool) -> None:
    """Run ``main`` in a pool process that stops (warmly) if its pool dies, e.g. by SIGKILL."""
    pool = os.getppid()
    # Out of the terminal's process group: Ctrl-C reaches the pool alone, which stops each process once. A
    # process given both the terminal's SIGINT and the pool's took them for a second, cold stop and exited 1.
    os.setpgid(0, 0)
    # Not the pool's handlers (a process forked after the pool installed them would stop its siblings):
    # until the worker installs its own, a stop ends the process at once, as before it took any job.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)

    def watch() -> None:
        while os.getppid() == pool:
            time.sleep(1.0)
        log.warning("supervisor_gone", supervisor=pool)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="spark-orphan-watch", daemon=True).start()
    main(name, burst)


def supervise(
    conn: redis.Redis,
    queue_names: Sequence[str],
    processes: int,
    main: WorkerMain,
    *,
    burst: bool = False,
    log_level: str = "INFO",
    metrics_port: int | None = None,
) -> int:
    """Run ``processes`` worker processes until stopped (or, bursting, until all are done); return 0 or 1.

    With ``metrics_port`` the pool serves the sum of its processes' metrics (multi-process mode).
    """
    on_exit = on_started = None
    if metrics_port:
        from bot.metrics import process_exited, start_metrics_server

        on_exit = process_exited
        on_started = functools.partial(start_metrics_server, metrics_port)
    pool = SparkPool(conn, queue_names, processes, main, on_exit=on_exit, on_started=on_started)
    log.info("supervisor_started", pid=os.getpid(), processes=processes, burst=burst)
    pool.start(burst=burst, logging_level=log_level)
    return 1 if pool.failed else 0
