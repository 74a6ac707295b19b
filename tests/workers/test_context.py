"""The job context's one queue-wait fix-up and its one way of binding a job's log fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import redis
import structlog
from rq import Queue

from workers.context import enqueued_at, job_logging, log_fields, queue_wait


def test_a_naive_enqueue_time_is_read_as_utc(redis_conn: redis.Redis) -> None:
    job = Queue("spark-test", connection=redis_conn).enqueue("workers.jobs.review", pr={}, trigger="opened")
    aware = datetime.now(UTC) - timedelta(seconds=30)
    job.enqueued_at = aware.replace(tzinfo=None)
    assert enqueued_at(job) == aware
    assert 30 <= queue_wait(job) < 60
    # Once RQ started the job, its wait is fixed: every reader gets the same figure.
    job.started_at = (aware + timedelta(seconds=2.5)).replace(tzinfo=None)
    assert queue_wait(job) == 2.5
    # Queued again after that run: the earlier start is not this wait's end.
    job.enqueued_at = (aware + timedelta(seconds=10)).replace(tzinfo=None)
    assert 20 <= queue_wait(job) < 50
    assert queue_wait(None) == 0.0 and enqueued_at(None) is None


def test_job_fields_are_bound_for_the_block_only() -> None:
    pr = {"installation_id": 7, "owner": "octo", "repo": "demo", "number": 3, "delivery_id": "d-9"}
    fields = log_fields(pr, "job-1")
    expected = {"delivery_id": "d-9", "installation": 7, "repo": "octo/demo", "pr": 3}
    assert fields == {"job_id": "job-1", **expected}
    assert log_fields(None, "") == {}
    structlog.contextvars.bind_contextvars(worker="w-1")
    try:
        with job_logging(fields):
            assert structlog.contextvars.get_contextvars() == {"worker": "w-1", **fields}
        assert structlog.contextvars.get_contextvars() == {"worker": "w-1"}
    finally:
        structlog.contextvars.clear_contextvars()
