"""Counts with the right plural in messages users read."""

from __future__ import annotations

import pytest

from bot.core.wording import plural


@pytest.mark.parametrize(
    ("count", "word", "expected"),
    [(0, "suggestion", "0 suggestions"), (1, "suggestion", "1 suggestion"), (2, "file", "2 files")],
)
def test_plural(count: int, word: str, expected: str) -> None:
    assert plural(count, word) == expected
