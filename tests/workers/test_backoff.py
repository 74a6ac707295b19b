"""The crash-loop back-off of the worker pool."""

from __future__ import annotations

from workers.backoff import QUICK_DEATH_SECONDS, CrashBackoff


def test_quick_deaths_in_a_row_wait_longer_each_time_then_give_up() -> None:
    backoff = CrashBackoff()
    assert [backoff.after_death(0.1) for _ in range(5)] == [0.5, 1.0, 2.0, 4.0, None]


def test_a_worker_that_lived_long_starts_a_new_streak() -> None:
    backoff = CrashBackoff(quick_deaths=3)
    assert backoff.after_death(QUICK_DEATH_SECONDS + 1) == 0.25
    assert backoff.quick_deaths == 0
