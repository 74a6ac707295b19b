"""The per-installation cap: at most N running jobs per installation, and a busy one cannot starve others."""

from __future__ import annotations

import time
from itertools import pairwise

import redis
from rq import Queue, Worker, get_current_job
from rq.job import Job

from bot.intake.routing import REVIEW
from tests.conftest import Spawn
from workers.limits import SLOTS_KEY, InstallationSlots, installation_of


def hold(installation_id: int, name: str, seconds: float) -> str:
    """Record start and end (Redis time) of a job that occupies a worker for ``seconds``."""
    job = get_current_job()
    assert job is not None
    conn: redis.Redis = job.connection
    conn.rpush("spans", f"start {installation_id} {name} {time.time()!r}")
    time.sleep(seconds)
    conn.rpush("spans", f"end {installation_id} {name} {time.time()!r}")
    return name


def _job(conn: redis.Redis, queue: Queue, installation: int, name: str) -> Job:
    return queue.enqueue(hold, installation_id=installation, name=name, seconds=0.0, job_id=name)


def test_slots_cap_running_jobs_and_defer_the_rest_to_the_tail(redis_conn: redis.Redis) -> None:
    queue = Queue(REVIEW, connection=redis_conn)
    slots = InstallationSlots(redis_conn, limit=2)
    a1, a2, a3 = (_job(redis_conn, queue, 7, f"a{i}") for i in (1, 2, 3))
    redis_conn.delete(queue.key)  # as if a worker had popped them all
    assert slots.acquire_or_defer(a1, queue)
    assert slots.acquire_or_defer(a1, queue)  # asking again for the same job holds the same slot
    assert slots.acquire_or_defer(a2, queue)
    assert slots.running(7) == 2
    assert not slots.acquire_or_defer(a3, queue)
    assert queue.get_job_ids() == ["a3"]  # back at the tail, not lost
    slots.release(a1)
    assert slots.acquire_or_defer(a3, queue)
    assert slots.running(7) == 2


def test_a_slot_lapses_when_its_worker_died(redis_conn: redis.Redis) -> None:
    queue = Queue(REVIEW, connection=redis_conn)
    slots = InstallationSlots(redis_conn, limit=1)
    a1, a2 = _job(redis_conn, queue, 7, "a1"), _job(redis_conn, queue, 7, "a2")
    # a1's worker was killed long ago: its slot's lapse time is in the past.
    redis_conn.zadd(SLOTS_KEY.format(7), {"a1": time.time() - 1})
    assert slots.acquire_or_defer(a2, queue)
    assert redis_conn.zrange(SLOTS_KEY.format(7), 0, -1) == [b"a2"]
    assert slots.running(7) == 1
    del a1


def test_jobs_without_an_installation_are_never_held(redis_conn: redis.Redis) -> None:
    queue = Queue(REVIEW, connection=redis_conn)
    job = queue.enqueue(hold, installation_id=0, name="x", seconds=0.0)
    job.kwargs = {"installation_id": "not-a-number"}
    assert installation_of(job) is None
    job.kwargs = {"pr": {"installation_id": 42}}
    assert installation_of(job) == 42
    job.kwargs = {"other": 1}
    slots = InstallationSlots(redis_conn, limit=1)
    assert all(slots.acquire_or_defer(job, queue) for _ in range(3))


def _spans(conn: redis.Redis) -> dict[tuple[int, str], list[float]]:
    spans: dict[tuple[int, str], list[float]] = {}
    for raw in conn.lrange("spans", 0, -1):
        _kind, inst, name, at = raw.decode().split()  # type: ignore[union-attr]
        spans.setdefault((int(inst), name), []).append(float(at))
    return spans


def test_a_busy_installation_cannot_starve_another(redis_conn: redis.Redis, spawn_worker: Spawn) -> None:
    """Two workers, limit 1: installation 1 queues six jobs ahead of installation 2's one job."""
    workers = [spawn_worker(SPARK_INSTALLATION_JOB_LIMIT="1") for _ in range(2)]
    # Both workers must be listening before the jobs arrive, or one alone would run them in order.
    deadline = time.monotonic() + 60
    while Worker.count(connection=redis_conn) < 2:
        assert time.monotonic() < deadline and all(p.poll() is None for p in workers), "workers did not start"
        time.sleep(0.05)
    queue = Queue(REVIEW, connection=redis_conn)
    for i in range(6):
        queue.enqueue(hold, installation_id=1, name=f"busy-{i}", seconds=0.4, job_id=f"busy-{i}")
    queue.enqueue(hold, installation_id=2, name="quiet", seconds=0.0, job_id="quiet")
    while redis_conn.llen("spans") < 14:
        assert time.monotonic() < deadline + 30, "jobs did not finish"
        time.sleep(0.05)
    for proc in workers:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    spans = _spans(redis_conn)
    assert len(spans) == 7 and all(len(times) == 2 for times in spans.values())  # every job ran once
    busy = sorted(times for (inst, _), times in spans.items() if inst == 1)
    # Installation 1 never ran two jobs at once ...
    assert all(earlier[1] <= later[0] for earlier, later in pairwise(busy))
    # ... so the second worker was free for installation 2 while the first busy job still ran.
    quiet_start = spans[(2, "quiet")][0]
    assert quiet_start < busy[0][1]
    assert redis_conn.zcard(SLOTS_KEY.format(1)) == 0  # every slot was given back
