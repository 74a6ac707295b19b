"""Timings: one job's spans and model figures, in seconds, read as milliseconds or seconds."""

from __future__ import annotations

import pytest

from bot.adapters.cerebras import Completion
from workers.timings import Timings


def completion(ttft: float, total: float, tokens: int, rate: float) -> Completion:
    return Completion("", "stop", "m", 10, tokens, ttft, total, rate, {})


def test_a_span_that_fails_is_not_reported_under_its_success_name() -> None:
    ticks = iter([0.0, 0.006, 1.0, 1.5])
    timings = Timings(clock=lambda: next(ticks))
    with pytest.raises(RuntimeError), timings.span("commit", on_error="commit_refused"):
        raise RuntimeError("refused")
    with timings.span("suggestions"):
        pass
    assert timings.spans == pytest.approx({"commit_refused": 0.006, "suggestions": 0.5})


def test_model_calls_add_up_and_the_first_token_is_the_first_calls() -> None:
    ticks = iter([10.0, 20.0])  # when each call is counted: the second ended 10 s after the first
    timings = Timings(queue_wait=0.012, clock=lambda: next(ticks))
    assert timings.as_ms() == {"queue_wait_ms": pytest.approx(12.0)}
    assert timings.as_seconds(total=2.0) == {"total": 2.0}
    timings.count(completion(0.1, 0.5, 100, 900.0))
    timings.count(completion(0.3, 0.25, 50, 1200.0))
    assert timings.as_ms(total=1.5) == pytest.approx(
        {
            "queue_wait_ms": 12.0,
            "first_token_ms": 0.0,
            "ttft_ms": 100.0,
            "model_ms": 750.0,
            "completion_tokens": 150.0,
            "reasoning_tokens": 0.0,
            "tokens_per_second": 1200.0,
            "total_ms": 1500.0,
        }
    )
    assert timings.as_seconds(total=2.0) == pytest.approx(
        {"total": 2.0, "first token": 0.0, "first content": 0.1, "model": 0.75}
    )
    assert timings.calls == 2


def test_the_total_counts_the_queue_wait_once() -> None:
    ticks = iter([12.5])
    timings = Timings(queue_wait=0.25, clock=lambda: next(ticks))
    assert timings.total(started=10.0) == 2.75


def test_parallel_model_calls_count_their_wall_clock_time_once() -> None:
    # A review of three files: calls of 0.5, 0.25 and 0.5 s running at once, counted as they ended.
    ends = iter([10.5, 10.25, 11.0])
    timings = Timings(clock=lambda: next(ends))
    timings.count(completion(0.1, 0.5, 100, 900.0))  # 10.0 .. 10.5
    timings.count(completion(0.1, 0.25, 50, 900.0))  # 10.0 .. 10.25
    timings.count(completion(0.1, 0.5, 80, 900.0))  # 10.5 .. 11.0
    assert timings.model == pytest.approx(1.0)  # not 1.25: the first two ran together
    assert timings.as_seconds(total=1.2)["model"] == pytest.approx(1.0)
    assert timings.as_ms()["model_ms"] == pytest.approx(1000.0)
