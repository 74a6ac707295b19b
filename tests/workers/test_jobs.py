"""The command registry: every command the parser knows has one, help lists them from it."""

from __future__ import annotations

from bot.core.commands import THREAD_REPLY, CommandName
from bot.core.config import RepoConfig
from workers.commands import COMMANDS, REGISTERED, command_for
from workers.commands.help import help_text


def test_every_command_the_parser_knows_has_a_handler() -> None:
    # A command the intake accepts but no handler runs would answer with help instead of doing it.
    # And a plain reply in a review thread has one too (answered when the thread is Spark's).
    assert set(COMMANDS) == {name.value for name in CommandName} | {THREAD_REPLY}
    assert len(REGISTERED) == len(COMMANDS), "a command is registered twice"


def test_a_name_no_command_has_is_answered_with_help() -> None:
    assert command_for("frobnicate") is COMMANDS["help"]


def test_help_lists_every_command_once() -> None:
    text = help_text([c.help for c in REGISTERED if c.help], RepoConfig()).split("**Configuration**")[0]
    for name in CommandName:
        assert text.count(f"- `/spark {name.value}") == 1, name
    assert "`/spark ask <question>`" in text
