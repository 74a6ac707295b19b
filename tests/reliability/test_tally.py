"""The chaos benchmark's tally: what counts as a job run again, and on which worker."""

from __future__ import annotations

import orjson
import redis
from rq import Queue, Retry

from bench.chaos import RAN_KEY, Sent, tally
from bot.intake.enqueue import DELIVERY_KEY, INTERACTIVE


def noop() -> None:
    """A job body (never run: the tally reads only the job's record)."""


def test_a_retry_rq_recorded_on_another_worker_is_not_a_run_again_on_one(redis_conn: redis.Redis) -> None:
    """Three runs: RQ retried the job once (worker b), then it ran once more on worker c after b was lost.
    One run again, and it moved to another worker; the retry's own move is not counted with it."""
    job = Queue(INTERACTIVE, connection=redis_conn).enqueue(noop, retry=Retry(max=2))
    job.retries_left = 1  # one retry of the two allowed was taken
    job.save()
    redis_conn.set(DELIVERY_KEY.format("d1"), job.id)
    for worker in ("a", "b", "c"):
        redis_conn.rpush(RAN_KEY, orjson.dumps({"job_id": job.id, "job": "fix", "worker": worker, "at": 0}))
    result = tally(redis_conn, [Sent("d1", 202, "queued", 0.0)])
    assert (result.lost, result.retries, result.ran_again) == (0, 1, 1)
    assert result.ran_again_other_worker == 1
