"""The job entry points' command table."""

from __future__ import annotations

from bot.core.commands import THREAD_REPLY, CommandName
from workers.jobs import COMMANDS


def test_every_command_the_parser_knows_has_a_handler() -> None:
    # A command the intake accepts but no handler runs would answer with help instead of doing it.
    # And a plain reply in a review thread has one too (answered when the thread is Spark's).
    assert set(COMMANDS) == {name.value for name in CommandName} | {THREAD_REPLY}
