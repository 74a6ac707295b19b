"""The review of a push recognises Spark's own commit even when the push is delivered before the record."""

from __future__ import annotations

import threading
import time

import redis

from bot import keys
from workers.memory import own_commits

PR = "1:acme/app#7"


def test_a_push_delivered_while_spark_commits_waits_for_the_record(redis_conn: redis.Redis) -> None:
    entered = threading.Event()

    def commit() -> None:
        with own_commits.committing(redis_conn, PR):
            entered.set()
            time.sleep(0.3)  # GitHub has taken the commit and sent its push; the job has not recorded it yet
            own_commits.record(redis_conn, "abc123")

    worker = threading.Thread(target=commit)
    worker.start()
    entered.wait(5)
    assert own_commits.is_own(redis_conn, PR, "abc123", wait=5)
    worker.join()
    assert not redis_conn.exists(keys.COMMITTING.format(PR))


def test_another_push_during_a_refused_commit_is_reviewed(redis_conn: redis.Redis) -> None:
    with own_commits.committing(redis_conn, PR):
        pass  # GitHub refused the commit: nothing recorded
    assert not own_commits.is_own(redis_conn, PR, "def456", wait=5)


def test_a_mark_left_by_a_dead_job_delays_the_review_only_for_the_wait(redis_conn: redis.Redis) -> None:
    redis_conn.set(keys.COMMITTING.format(PR), "1", ex=keys.COMMITTING.seconds)
    started = time.monotonic()
    assert not own_commits.is_own(redis_conn, PR, "def456", wait=0.2)
    assert time.monotonic() - started < 2
