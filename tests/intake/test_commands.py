"""``/spark`` command parsing: names, case, free text, unknown words, and what is not a command."""

from __future__ import annotations

import pytest

from bot.core.commands import Command, CommandName, parse_command


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("/spark fix", Command(CommandName.FIX)),
        ("/spark fix handle None", Command(CommandName.FIX, "handle None")),
        ("  /SPARK Fix  trim\nsecond line  ", Command(CommandName.FIX, "trim\nsecond line")),
        ("/spark review", Command(CommandName.REVIEW)),
        ("/spark stop please", Command(CommandName.STOP, "please")),
        ("/spark help", Command(CommandName.HELP)),
        ("/spark", Command(CommandName.HELP)),
        ("/spark\n", Command(CommandName.HELP)),
        ("/spark\nfix this", Command(CommandName.FIX, "this")),
        (
            "/spark frobnicate the thing",
            Command(CommandName.HELP, "frobnicate the thing", unknown="frobnicate"),
        ),
        ("/spark fixit", Command(CommandName.HELP, "fixit", unknown="fixit")),
    ],
)
def test_parse(body: str, expected: Command) -> None:
    assert parse_command(body) == expected


@pytest.mark.parametrize(
    "body",
    [
        "",
        "spark fix",
        "/sparkle fix",
        "/spark-bot fix",
        "please /spark fix",
        "> /spark fix",
        "/build",
        "@spark fix",
    ],
)
def test_not_a_command(body: str) -> None:
    assert parse_command(body) is None
