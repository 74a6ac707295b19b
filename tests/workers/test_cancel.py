"""Cooperative cancellation against a real Redis: supersede, stop, head moves, throttled checks."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from bot.cancel import Cancelled, CancelToken, cancel_key, cancel_pr
from bot.intake.enqueue import DeliveryQueue
from bot.intake.routing import Signal

PR = "1:octo/demo#7"


def raise_at_intake(conn: redis.Redis, delivery_id: str, *signals: Signal) -> None:
    """Raise ``signals`` the way the intake does: in the transaction that stores a delivery."""
    assert not DeliveryQueue(conn).enqueue(delivery_id, (), signals).duplicate


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


def test_a_job_of_an_old_head_starting_last_does_not_supersede_the_newest_heads(
    redis_conn: redis.Redis,
) -> None:
    # A burst of two pushes: both jobs queued, the second push's head recorded; two workers start them in the
    # opposite order (the newest head's job first).
    raise_at_intake(redis_conn, "push-a", Signal("head", PR, value="a" * 40))
    raise_at_intake(redis_conn, "push-b", Signal("head", PR, value="b" * 40))
    newest = CancelToken.start(redis_conn, PR, "review", head_sha="b" * 40, interval=0)
    late = CancelToken.start(redis_conn, PR, "review", head_sha="a" * 40, interval=0)
    assert late.cancelled() and "head moved" in late.reason
    assert not newest.cancelled()


def test_intake_can_supersede_a_running_job_before_the_newer_one_starts(redis_conn: redis.Redis) -> None:
    running = CancelToken.start(redis_conn, PR, "fix", order=100, interval=0)
    # The new comment arrives; no worker is free yet.
    raise_at_intake(redis_conn, "d-200", Signal("supersede", PR, job_kind="fix", value=200, by="octo"))
    assert running.cancelled() and running.by == "octo"
    newer = CancelToken.start(redis_conn, PR, "fix", order=200, interval=0)
    assert not newer.cancelled()


def test_an_older_comment_delivered_late_supersedes_nothing(redis_conn: redis.Redis) -> None:
    raise_at_intake(redis_conn, "d-300", Signal("supersede", PR, job_kind="fix", value=300, by="new"))
    raise_at_intake(redis_conn, "d-250", Signal("supersede", PR, job_kind="fix", value=250, by="old"))
    assert redis_conn.hmget(cancel_key(PR), "kind:fix", "by:fix") == [b"300", b"new"]
    raise_at_intake(redis_conn, "d-ask", Signal("ask-supersede", PR, job_kind="fix", value=280, by="maya"))
    raise_at_intake(redis_conn, "d-ask2", Signal("ask-supersede", PR, job_kind="fix", value=270, by="maya"))
    assert redis_conn.hget(cancel_key(PR), "ask:fix:maya") == b"280"
    assert 0 < redis_conn.ttl(cancel_key(PR)) <= 7 * 24 * 3600


def test_jobs_starting_at_once_get_distinct_orders(redis_conn: redis.Redis) -> None:
    """The read and the raise are one transaction (WATCH): no two jobs both believe they are the newest."""
    with ThreadPoolExecutor(8) as pool:
        tokens = list(pool.map(lambda _: CancelToken.start(redis_conn, PR, "review", interval=0), range(16)))
    assert sorted(t.order for t in tokens) == list(range(1, 17))
    assert [t.cancelled() for t in tokens].count(False) == 1


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
    raise_at_intake(redis_conn, "push-a", Signal("head", PR, value="a" * 40))
    assert not old.cancelled()
    raise_at_intake(redis_conn, "push-b", Signal("head", PR, value="b" * 40))
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
