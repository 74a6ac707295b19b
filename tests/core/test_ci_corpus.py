"""The parsers against real logs of each tool (tests/fixtures/ci_logs): the failing file and line found for at
least 95 % of failures, and no file named that the log does not blame."""

from __future__ import annotations

from typing import Any

import pytest

from bench.ci_logs import expected, found, score
from bot.core.ci_failures import Failure

EXPECTED: dict[str, Any] = expected()


def _found(log: str) -> list[tuple[Failure, str | None]]:
    return found(log, EXPECTED)


def _score(log: str) -> tuple[int, int, list[str]]:
    return score(log, EXPECTED)


@pytest.mark.parametrize("log", sorted(EXPECTED["logs"]))
def test_each_log_blames_only_what_it_blames(log: str) -> None:
    total, hits, stray = _score(log)
    assert stray == []
    assert hits == total, f"{hits}/{total} failures found"


def test_the_corpus_finds_95_percent_and_names_nothing_else() -> None:
    scores = [_score(log) for log in EXPECTED["logs"]]
    total = sum(score[0] for score in scores)
    hits = sum(score[1] for score in scores)
    assert total >= 80
    assert hits / total >= 0.95
    assert [stray for score in scores for stray in score[2]] == []


@pytest.mark.parametrize("log", sorted(EXPECTED["logs"]))
def test_each_failure_is_named_for_its_tool(log: str) -> None:
    tools = {failure.tool for failure, _ in _found(log)}
    assert tools == {EXPECTED["logs"][log]["tool"]}


def test_a_failing_test_in_product_code_names_its_test() -> None:
    found = {failure.where: failure for failure, _ in _found("pytest.log")}
    assert found["src/shop/tax.py:3"].via == "tests/test_cart.py"
    assert found["src/shop/tax.py:3"].test == "test_tax_unknown_region"
    assert found["src/shop/tax.py:3"].message == "KeyError: 'uk'"
    assert found["tests/test_cart.py:6"].via is None
    assert found["tests/test_cart.py:6"].message == "assert 15.0 == 16.0"
