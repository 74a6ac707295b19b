"""Cooperative cancellation against a real Redis: supersede, stop, head moves, throttled checks."""

from __future__ import annotations

import pytest
import redis

from bot.cancel import Cancelled, CancelToken, cancel_pr, note_head, supersede

PR = "1:octo/demo#7"


class FakeClock:
    """A settable clock so throttling is tested without sleeping."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_newer_job_of_the_same_kind_supersedes_the_older(redis_conn: redis.Redis) -> None:
    first = CancelToken.start(redis_conn, PR, "fix", order=100, interval=0)
    assert not first.cancelled()
    second = CancelToken.start(redis_conn, PR, "fix", order=200, interval=0)
    assert first.cancelled()
    assert "superseded" in first.reason
    assert not second.cancelled()


def test_an_older_job_starting_late_does_not_cancel_the_newer(redis_conn: redis.Redis) -> None:
    newer = CancelToken.start(redis_conn, PR, "fix", order=200, interval=0)
    older = CancelToken.start(redis_conn, PR, "fix", order=100, interval=0)
    assert older.cancelled()
    assert not newer.cancelled()


def test_order_zero_is_newer_than_anything_started_before(redis_conn: redis.Redis) -> None:
    first = CancelToken.start(redis_conn, PR, "review", interval=0)
    second = CancelToken.start(redis_conn, PR, "review", interval=0)
    assert second.order == first.order + 1
    assert first.cancelled() and not second.cancelled()


def test_intake_can_supersede_a_running_job_before_the_newer_one_starts(redis_conn: redis.Redis) -> None:
    running = CancelToken.start(redis_conn, PR, "fix", order=100, interval=0)
    supersede(redis_conn, PR, "fix", order=200)  # the new comment arrives; no worker is free yet
    assert running.cancelled()
    newer = CancelToken.start(redis_conn, PR, "fix", order=200, interval=0)
    assert not newer.cancelled()


def test_kinds_do_not_cancel_each_other(redis_conn: redis.Redis) -> None:
    review = CancelToken.start(redis_conn, PR, "review", interval=0)
    CancelToken.start(redis_conn, PR, "fix", order=5, interval=0)
    assert not review.cancelled()


def test_stop_cancels_every_running_job_but_not_later_ones(redis_conn: redis.Redis) -> None:
    fix = CancelToken.start(redis_conn, PR, "fix", order=1, interval=0)
    review = CancelToken.start(redis_conn, PR, "review", interval=0)
    cancel_pr(redis_conn, PR)
    assert fix.cancelled() and review.cancelled()
    assert "stopped" in fix.reason
    later = CancelToken.start(redis_conn, PR, "fix", order=2, interval=0)
    assert not later.cancelled()


def test_a_push_cancels_work_on_the_old_head(redis_conn: redis.Redis) -> None:
    old = CancelToken.start(redis_conn, PR, "review", head_sha="a" * 40, interval=0)
    note_head(redis_conn, PR, "a" * 40)
    assert not old.cancelled()
    note_head(redis_conn, PR, "b" * 40)
    assert old.cancelled()
    assert "head moved" in old.reason


def test_other_pull_requests_are_untouched(redis_conn: redis.Redis) -> None:
    mine = CancelToken.start(redis_conn, PR, "fix", order=1, interval=0)
    cancel_pr(redis_conn, "1:octo/demo#8")
    assert not mine.cancelled()


def test_check_raises_with_the_reason(redis_conn: redis.Redis) -> None:
    token = CancelToken.start(redis_conn, PR, "fix", order=1, interval=0)
    cancel_pr(redis_conn, PR)
    try:
        token.check()
    except Cancelled as exc:
        assert "stopped" in exc.reason
    else:
        raise AssertionError("check() did not raise")


def test_checks_are_throttled_to_one_round_trip_per_interval(redis_conn: redis.Redis) -> None:
    clock = FakeClock()
    token = CancelToken.start(redis_conn, PR, "fix", order=1, interval=0.2)
    token.clock = clock
    before = int(redis_conn.info("stats")["total_commands_processed"])
    for _ in range(1000):
        token.cancelled()
    # One HMGET for the first call plus the INFO command itself.
    assert int(redis_conn.info("stats")["total_commands_processed"]) - before <= 2
    cancel_pr(redis_conn, PR)
    assert not token.cancelled()  # still inside the interval: not asked yet
    clock.now += 0.2
    assert token.cancelled()


def test_never_is_never_cancelled() -> None:
    token = CancelToken.never()
    assert not token.cancelled()
    token.check()


def test_stop_reaches_a_job_still_waiting_in_the_queue(redis_conn: redis.Redis) -> None:
    """A job queued before ``/spark stop`` and started after it is cancelled the moment it starts."""
    cancel_pr(redis_conn, "1:o/r#5", at=1000.0)
    queued_before = CancelToken.start(redis_conn, "1:o/r#5", "review", enqueued_at=999.0)
    queued_after = CancelToken.start(redis_conn, "1:o/r#5", "review", enqueued_at=1001.0)
    assert queued_before.cancelled()
    with pytest.raises(Cancelled, match="stopped"):
        queued_before.check()
    assert not queued_after.cancelled()
