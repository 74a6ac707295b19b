"""The job entry points' command table."""

from __future__ import annotations

from bot.core.commands import THREAD_REPLY, CommandName
from bot.core.config import RepoConfig
from workers.flows.fix_replies import help_text
from workers.jobs import COMMANDS


def test_every_command_the_parser_knows_has_a_handler() -> None:
    # A command the intake accepts but no handler runs would answer with help instead of doing it.
    # And a plain reply in a review thread has one too (answered when the thread is Spark's).
    assert set(COMMANDS) == {name.value for name in CommandName} | {THREAD_REPLY}


def test_help_lists_every_command_once() -> None:
    text = help_text(RepoConfig()).split("**Configuration**")[0]
    for name in CommandName:
        assert text.count(f"- `/spark {name.value}") == 1, name
    assert "`/spark ask <question>`" in text
