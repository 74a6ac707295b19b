"""The atomic enqueue: what the Lua script writes is exactly what RQ writes itself, and only once per id."""

from __future__ import annotations

import zlib

import redis
from rq import Queue, Retry
from rq.job import Job

from bot.intake.routing import INTERACTIVE, REVIEW, JobSpec
from bot.queueing import DELIVERY_KEY, POLICIES, QUEUED_KEY, DeliveryQueue

SPEC = JobSpec(
    "workers.jobs.command",
    INTERACTIVE,
    {"pr": {"number": 7}, "command": {"text": "naïve\nline two\r\n\x00 bytes", "name": "fix"}},
)
TIMESTAMPS = {b"created_at", b"enqueued_at"}


def _hash(conn: redis.Redis, job_id: str) -> dict[bytes, bytes]:
    data: dict[bytes, bytes] = conn.hgetall(f"rq:job:{job_id}")
    assert all(data[stamp] for stamp in TIMESTAMPS)
    # The call is compressed with a smaller window than RQ's (same zlib format): compare what it holds.
    data[b"data"] = zlib.decompress(data[b"data"])
    return {k: v for k, v in data.items() if k not in TIMESTAMPS}


def test_script_writes_what_rq_writes(redis_conn: redis.Redis) -> None:
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
        description=f"{SPEC.func} (by-script)",
    )
    assert DeliveryQueue(redis_conn).enqueue("by-script", [SPEC]).job_ids == ("by-script",)
    ours, theirs = _hash(redis_conn, "by-script"), _hash(redis_conn, "by-rq")
    assert ours == theirs
    assert Job.fetch("by-script", connection=redis_conn).kwargs == SPEC.kwargs
    assert redis_conn.lrange(f"rq:queue:{INTERACTIVE}", 0, -1) == [b"by-rq", b"by-script"]
    assert 0 < redis_conn.ttl("rq:job:by-script") <= policy.ttl
    assert redis_conn.smembers("rq:queues") == {f"rq:queue:{INTERACTIVE}".encode()}
    job = Job.fetch("by-script", connection=redis_conn)
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
