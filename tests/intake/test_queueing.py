"""The intake's enqueue: RQ's own jobs with the queue's policy, stored once per delivery id, atomically."""

from __future__ import annotations

import threading
import zlib
from concurrent.futures import ThreadPoolExecutor

import redis
from rq import Queue, Retry
from rq.job import Job

from bot.cancel import cancel_key
from bot.intake.enqueue import DELIVERY_KEY, POLICIES, QUEUED_KEY, DeliveryQueue, Enqueued
from bot.intake.routing import INTERACTIVE, REVIEW, JobSpec, Signal

SPEC = JobSpec(
    "workers.jobs.command",
    INTERACTIVE,
    {"pr": {"number": 7}, "command": {"text": "naïve\nline two\r\n\x00 bytes", "name": "fix"}},
)
TIMESTAMPS = {b"created_at", b"enqueued_at"}


def _hash(conn: redis.Redis, job_id: str) -> dict[bytes, bytes]:
    data: dict[bytes, bytes] = conn.hgetall(f"rq:job:{job_id}")
    assert all(data[stamp] for stamp in TIMESTAMPS)
    data[b"data"] = zlib.decompress(data[b"data"])
    return {k: v for k, v in data.items() if k not in TIMESTAMPS}


def test_the_intake_writes_what_rq_enqueue_call_writes(redis_conn: redis.Redis) -> None:
    policy = POLICIES[INTERACTIVE]
    Queue(INTERACTIVE, connection=redis_conn).enqueue_call(
        SPEC.func,
        kwargs=SPEC.kwargs,
        job_id="by-rq",
        timeout=policy.job_timeout,
        ttl=policy.ttl,
        result_ttl=policy.result_ttl,
        failure_ttl=policy.failure_ttl,
        retry=Retry(max=policy.retries),
        description=f"{SPEC.func} (by-intake)",
    )
    assert DeliveryQueue(redis_conn).enqueue("by-intake", [SPEC]).job_ids == ("by-intake",)
    ours, theirs = _hash(redis_conn, "by-intake"), _hash(redis_conn, "by-rq")
    assert ours == theirs
    assert Job.fetch("by-intake", connection=redis_conn).kwargs == SPEC.kwargs
    assert redis_conn.lrange(f"rq:queue:{INTERACTIVE}", 0, -1) == [b"by-rq", b"by-intake"]
    assert 0 < redis_conn.ttl("rq:job:by-intake") <= policy.ttl
    assert redis_conn.smembers("rq:queues") == {f"rq:queue:{INTERACTIVE}".encode()}
    job = Job.fetch("by-intake", connection=redis_conn)
    assert (job.func_name, job.timeout, job.retries_left, job.origin) == (
        SPEC.func,
        policy.job_timeout,
        2,
        INTERACTIVE,
    )
    assert job.enqueued_at is not None and job.created_at <= job.enqueued_at


def test_one_delivery_many_jobs_and_no_second_time(redis_conn: redis.Redis) -> None:
    queue = DeliveryQueue(redis_conn)
    review = JobSpec("workers.jobs.review", REVIEW, {"pr": {"number": 7}, "trigger": "opened"})
    first = queue.enqueue("d1", [SPEC, review])
    assert first.job_ids == ("d1-0", "d1-1") and not first.duplicate
    assert queue.enqueue("d1", [SPEC, review]).duplicate
    assert redis_conn.llen(f"rq:queue:{INTERACTIVE}") == 1
    assert redis_conn.llen(f"rq:queue:{REVIEW}") == 1
    assert redis_conn.get(DELIVERY_KEY.format("d1")) == b"d1-0,d1-1"
    # Recorded for the workers' reaper, which queues again a job popped but never started.
    assert {m.decode() for m in redis_conn.zrange(QUEUED_KEY, 0, -1)} >= {"d1-0", "d1-1"}
    assert redis_conn.ttl(DELIVERY_KEY.format("d1")) > 3 * 24 * 3600  # GitHub redelivers for up to 3 days


def test_a_delivery_posted_twice_at_once_is_stored_once(redis_conn: redis.Redis) -> None:
    """Two copies racing: one transaction stores the jobs, the other is retried and finds the id stored."""
    queue = DeliveryQueue(redis_conn)
    review = JobSpec("workers.jobs.review", REVIEW, {"pr": {"number": 7}, "trigger": "opened"})

    def send(delivery: str, barrier: threading.Barrier) -> bool:
        barrier.wait()
        return queue.enqueue(delivery, [SPEC, review]).duplicate

    for round_ in range(20):
        barrier = threading.Barrier(4)
        with ThreadPoolExecutor(4) as pool:
            copies = pool.map(send, [f"race-{round_}"] * 4, [barrier] * 4)
            assert sorted(copies) == [False, True, True, True]
    assert redis_conn.llen(f"rq:queue:{INTERACTIVE}") == redis_conn.llen(f"rq:queue:{REVIEW}") == 20


def test_a_signal_only_delivery_is_stored_without_jobs(redis_conn: redis.Redis) -> None:
    stop = Signal("stop", "1:o/r#7")
    assert DeliveryQueue(redis_conn).enqueue("closed", (), [stop]) == Enqueued(job_ids=())
    assert DeliveryQueue(redis_conn).enqueue("closed", (), [stop]).duplicate
    assert redis_conn.get(DELIVERY_KEY.format("closed")) == b""
    assert redis_conn.hget(cancel_key("1:o/r#7"), "all") == b"1"
    assert redis_conn.zcard(QUEUED_KEY) == 0
