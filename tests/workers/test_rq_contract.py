"""The RQ methods Spark's runtime and pool override, checked against the installed RQ.

Each override relies on RQ calling it at a given moment with given arguments; each test here fails if the
installed RQ stops doing so (a renamed method, a changed signature, a different dequeue path).
"""

from __future__ import annotations

import inspect
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import redis
from rq import Queue, SimpleWorker
from rq.exceptions import StopRequested
from rq.worker_pool import WorkerPool

from bot.redis_server import PrivateRedis
from workers import backoff, runtime
from workers.pool import SparkPool
from workers.runtime import QUEUE_NAMES, SparkQueue, SparkWorker


def wait_for(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (SparkQueue.lpop, Queue.lpop),
        (SparkWorker.dequeue_job_and_maintain_ttl, SimpleWorker.dequeue_job_and_maintain_ttl),
        (SparkWorker.execute_job, SimpleWorker.execute_job),
        (SparkWorker._shutdown, SimpleWorker._shutdown),
        (SparkWorker.request_force_stop, SimpleWorker.request_force_stop),
        (SparkWorker.unsubscribe, SimpleWorker.unsubscribe),
        (SparkPool.start_workers, WorkerPool.start_workers),
        (SparkPool.get_worker_process, WorkerPool.get_worker_process),
        (SparkPool.handle_dead_worker, WorkerPool.handle_dead_worker),
    ],
    ids=lambda f: f.__qualname__,
)
def test_each_override_takes_what_rq_passes(
    ours: Callable[..., object], theirs: Callable[..., object]
) -> None:
    assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters)


def test_a_worker_of_two_queues_waits_in_lpop(redis_conn: redis.Redis) -> None:
    """Only a wait inside ``lpop`` may be interrupted by a stop: RQ must dequeue from several queues there."""
    queues = [SparkQueue(name, connection=redis_conn) for name in QUEUE_NAMES]
    result: list[object] = []
    waiter = threading.Thread(target=lambda: result.append(SparkQueue.dequeue_any(queues, 5, redis_conn)))
    waiter.start()
    wait_for(lambda: runtime._waiting_for_a_job)
    queues[1].enqueue("workers.jobs.review", pr={}, trigger="opened")
    waiter.join()
    assert result and result[0] is not None
    assert not runtime._waiting_for_a_job


@pytest.fixture()
def restore_stop_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Give back this process's signal handlers and its stop flag after a test that stops a worker."""
    monkeypatch.setattr(runtime, "_stop_requested", False)
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.mark.usefixtures("restore_stop_state")
def test_rq_stops_through_shutdown_then_force_stops(redis_conn: redis.Redis) -> None:
    worker = SparkWorker([SparkQueue(QUEUE_NAMES[0], connection=redis_conn)], connection=redis_conn)
    worker.register_birth()  # type: ignore[no-untyped-call]
    # Not waiting for a job: the stop is remembered, not raised (a popped job would be lost).
    worker.request_stop(signal.SIGTERM, None)  # type: ignore[no-untyped-call]
    assert worker._stop_requested
    # The second signal reaches the override that requeues the running job.
    assert signal.getsignal(signal.SIGTERM) == worker.request_force_stop
    runtime._waiting_for_a_job = True
    try:
        with pytest.raises(StopRequested):
            worker.request_stop(signal.SIGTERM, None)  # type: ignore[no-untyped-call]
    finally:
        runtime._waiting_for_a_job = False


class _StoppedBeforeItsWait(SparkWorker):
    """A worker whose stop signal lands in its heartbeat: past its own check, before it waits for a job."""

    def heartbeat(self, timeout: int | None = None, pipeline: redis.client.Pipeline | None = None) -> None:
        super().heartbeat(timeout, pipeline)
        if not self._stop_requested:
            self.request_stop(signal.SIGTERM, None)  # type: ignore[no-untyped-call]


@pytest.mark.usefixtures("restore_stop_state")
def test_a_stop_just_before_the_wait_for_a_job_takes_no_job(redis_conn: redis.Redis) -> None:
    """No wait is entered once a stop came: an idle worker exits at once and leaves the queue alone."""
    queues = [SparkQueue(name, connection=redis_conn) for name in QUEUE_NAMES]
    job = queues[0].enqueue("workers.jobs.review", pr={}, trigger="opened")
    worker = _StoppedBeforeItsWait(queues, connection=redis_conn)
    worker.register_birth()  # type: ignore[no-untyped-call]
    with pytest.raises(StopRequested):
        worker.dequeue_job_and_maintain_ttl(timeout=30)
    assert queues[0].job_ids == [job.id]


def test_a_stopping_worker_ends_its_command_listener_at_once(
    redis_conn: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listener thread ends even when it reads the unsubscribe reply before RQ tells it to stop."""
    worker = SparkWorker([SparkQueue(QUEUE_NAMES[0], connection=redis_conn)], connection=redis_conn)
    worker.subscribe()  # type: ignore[no-untyped-call]
    pubsub, listener = worker.pubsub, worker.pubsub_thread
    assert pubsub is not None and listener is not None
    send_unsubscribe = pubsub.unsubscribe

    def unsubscribe_then_let_the_listener_read_the_reply(*args: object) -> object:
        sent = send_unsubscribe(*args)
        wait_for(lambda: not pubsub.subscribed)  # the listener took the reply and looped again
        return sent

    monkeypatch.setattr(pubsub, "unsubscribe", unsubscribe_then_let_the_listener_read_the_reply)
    began = time.monotonic()
    worker.unsubscribe()
    assert not listener.is_alive()
    assert time.monotonic() - began < 0.5  # RQ's own order waited out its one-second join


def _record_and_exit(name: str, burst: bool) -> None:
    conn = redis.Redis.from_url(os.environ["SPARK_CONTRACT_REDIS"])
    conn.rpush("pool-ran", f"{name}:{burst}")
    os._exit(3)


def test_the_pool_runs_our_process_and_backs_off_restarts(
    redis_conn: redis.Redis, redis_server: PrivateRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_CONTRACT_REDIS", redis_server.url)
    monkeypatch.setattr(backoff, "RESTART_PAUSE_SECONDS", 0.01)
    exits: list[int] = []
    started: list[int] = []

    def on_started() -> None:
        started.append(len(pool.worker_dict))

    pool = SparkPool(
        redis_conn, QUEUE_NAMES, 1, _record_and_exit, on_exit=exits.append, on_started=on_started
    )
    pool.status = pool.Status.STARTED
    pool._burst = False
    pool.start_workers(burst=False)
    # The metrics server's moment: after the first processes are forked, so they do not hold its socket.
    assert started == [1]
    for deaths in range(1, backoff.MAX_QUICK_DEATHS):
        (data,) = pool.worker_dict.values()
        data.process.join()
        pool.check_workers()
        # RQ restarted the dead process; the replacement carries the streak of quick deaths.
        (name,) = pool.worker_dict
        assert name != data.name and pool._backoff[name].quick_deaths == deaths
    (data,) = pool.worker_dict.values()
    data.process.join()
    pool.check_workers()
    assert pool.failed and pool.status == pool.Status.STOPPED and not pool.worker_dict
    ran = [item.decode() for item in redis_conn.lrange("pool-ran", 0, -1)]
    assert len(ran) == backoff.MAX_QUICK_DEATHS and all(item.endswith(":False") for item in ran)
    assert len(exits) == backoff.MAX_QUICK_DEATHS
