"""What a user reads in Spark's replies: timings that say what happened, counts with the right plural."""

from __future__ import annotations

import pytest

from bot.core.wording import plural
from sandbox.demo import fire
from tests.e2e.conftest import StartStack
from workers.context import Timings


def test_a_fork_reply_times_the_suggestions_not_a_commit(start: StartStack) -> None:
    """fork-pr: the fork cannot be pushed to, so the fix arrives as a suggestion and nothing is committed."""
    stack = start("fork-pr")
    for event in stack.scenario.events:
        fire(stack, event)
    replies = [
        c["body"]
        for c in stack.github.issue_comments(stack.scene.repo, stack.scene.pr_number)
        if c["user"]["login"] == stack.github.bot_login
    ]
    assert replies, "the fix was answered"
    timing_lines = [line for reply in replies for line in reply.splitlines() if "total " in line]
    assert timing_lines
    assert all("commit " not in line for line in timing_lines), timing_lines
    assert any("suggestions " in line for line in timing_lines), timing_lines
    assert all("suggestion(s)" not in reply for reply in replies)


def test_a_span_that_fails_is_not_reported_under_its_success_name() -> None:
    ticks = iter([0.0, 0.006, 1.0, 1.5])
    timings = Timings(clock=lambda: next(ticks))
    with pytest.raises(RuntimeError), timings.span("commit", on_error="commit_refused"):
        raise RuntimeError("refused")
    with timings.span("suggestions"):
        pass
    assert timings.spans == pytest.approx({"commit_refused": 0.006, "suggestions": 0.5})


@pytest.mark.parametrize(
    ("count", "word", "expected"),
    [(0, "suggestion", "0 suggestions"), (1, "suggestion", "1 suggestion"), (2, "file", "2 files")],
)
def test_plural(count: int, word: str, expected: str) -> None:
    assert plural(count, word) == expected
