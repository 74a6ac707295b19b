"""The parsers against real logs of each tool (tests/fixtures/ci_logs): the failing file and line found for at
least 95 % of failures, and no file named that the log does not blame."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.core.ci_failures import Failure, locate, parse_failures
from bot.core.ci_log import read_log

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "ci_logs"
EXPECTED: dict[str, Any] = yaml.safe_load((LOGS / "expected.yaml").read_text())


def _expected(log: str) -> list[tuple[str, int, str | None]]:
    rows = []
    for entry in EXPECTED["logs"][log]["failures"]:
        where, _, via = entry.partition(" via ")
        path, _, line = where.rpartition(":")
        rows.append((path, int(line), via or None))
    return rows


def _found(log: str) -> list[tuple[Failure, str | None]]:
    files = EXPECTED["projects"][EXPECTED["logs"][log]["project"]]
    excerpt = read_log([(LOGS / log).read_bytes()])
    return [(failure, locate(failure, files)) for failure in parse_failures(excerpt.lines)]


def _score(log: str) -> tuple[int, int, list[str]]:
    """(failures expected, found at their file and line, files named that the log does not blame)."""
    expected = _expected(log)
    found = _found(log)
    located = Counter((path, failure.line) for failure, path in found if path is not None)
    hits = 0
    for path, line, _ in expected:
        if located[(path, line)] > 0:
            located[(path, line)] -= 1
            hits += 1
    blamed = {path for path, _, _ in expected} | {via for _, _, via in expected if via}
    stray = [f"{failure.where} ({path})" for failure, path in found if path not in blamed]
    stray += [f"via {failure.via}" for failure, _ in found if failure.via and failure.via not in blamed]
    return len(expected), hits, stray


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
