"""``/spark <command> [free text]`` parsing: pure, case-insensitive, unknown commands become ``help``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

PREFIX = "/spark"

# "/spark" must be a whole word: "/sparkle" is not a command. Leading whitespace is what editors leave behind.
_COMMAND = re.compile(r"\A\s*/spark(?![\w-])\s*(?P<word>[^\s]*)(?P<rest>.*)\Z", re.IGNORECASE | re.DOTALL)


class CommandName(StrEnum):
    """The commands Spark understands (each is a module under ``workers/commands/``, with its help line)."""

    FIX = "fix"
    ASK = "ask"
    REVIEW = "review"
    STOP = "stop"
    HELP = "help"
    UNDO = "undo"
    DESCRIBE = "describe"


# Not a command anyone types: a person's plain reply in a review thread (answered when the thread is Spark's).
THREAD_REPLY = "reply"


@dataclass(frozen=True, slots=True)
class Command:
    """A parsed command: its name, the free text after it, and the word typed when it was not understood."""

    name: CommandName
    text: str = ""
    unknown: str = ""


def parse_command(body: str) -> Command | None:
    """Parse a comment body: ``None`` when not a ``/spark`` command, ``help`` when the word is unknown."""
    match = _COMMAND.match(body)
    if match is None:
        return None
    word = match["word"]
    rest = match["rest"].strip()
    if not word:
        return Command(CommandName.HELP)
    try:
        return Command(CommandName(word.lower()), rest)
    except ValueError:
        # Keep what the user wrote: help can say "unknown command 'xyz'" and nothing they typed is lost.
        return Command(CommandName.HELP, f"{word} {rest}".strip(), unknown=word)
