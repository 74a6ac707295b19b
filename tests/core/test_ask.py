"""bot.core.ask: the model's answer parsed, its quotes resolved to permalinks, its line numbers gone."""

from __future__ import annotations

import pytest

from bot.core.ask import (
    Quote,
    diff_text,
    is_dismissal,
    parse_answer,
    permalink,
    render_answer,
    resolve_quote,
    strip_line_numbers,
)
from bot.core.diff import parse_diff

SHA = "0123456789abcdef0123456789abcdef01234567"
CALC = (
    "def add(a, b):\n    return a + b\n\n\ndef average(values):\n    return sum(values) / (len(values) - 1)\n"
)
FILES = {"src/calc.py": CALC, "src/other.py": "X = 1\n"}
DIFF = """diff --git a/src/calc.py b/src/calc.py
--- a/src/calc.py
+++ b/src/calc.py
@@ -1,2 +1,6 @@
 def add(a, b):
     return a + b
+
+
+def average(values):
+    return sum(values) / (len(values) - 1)
diff --git a/old.py b/old.py
deleted file mode 100644
--- a/old.py
+++ /dev/null
@@ -1 +0,0 @@
-gone = True
"""

# GitHub Enterprise Server's web address: every link is built from it (GITHUB_URL).
WEB = "https://ghe.example.test"


def render(text: str) -> str:
    return render_answer(
        parse_answer(text), FILES, repo="acme/calc", sha=SHA, timings={"total_ms": 5.0}, web=WEB
    ).body


def test_a_quote_becomes_a_permalink_to_its_lines_at_the_head_with_the_code_that_is_there() -> None:
    body = render(
        "It divides by one too few:\n\n```quote src/calc.py\nreturn sum(values) / (len(values) - 1)\n```"
    )
    link = f"{WEB}/acme/calc/blob/{SHA}/src/calc.py#L6"
    assert f"[`src/calc.py` line 6]({link})" in body
    # The code shown is the file's, indentation and all, not the model's copy of it.
    assert "\n    return sum(values) / (len(values) - 1)\n" in body


def test_a_multi_line_quote_links_a_range_and_a_short_path_finds_its_file() -> None:
    citation = resolve_quote(Quote("calc.py", "def average(values):\n    return sum(values)"), FILES)
    assert citation is None  # not the lines of the file: "return sum(values)" alone is no line of it
    citation = resolve_quote(Quote("calc.py", "def add(a, b):\n    return a + b"), FILES)
    assert citation is not None and (citation.path, citation.start, citation.end) == ("src/calc.py", 1, 2)
    link = permalink("acme/calc", SHA, "src/a b.py", 1, 2, WEB)
    assert link == f"{WEB}/acme/calc/blob/{SHA}/src/a%20b.py#L1-L2"


def test_a_quote_found_nowhere_or_in_several_places_is_left_out_and_said() -> None:
    assert resolve_quote(Quote("src/calc.py", "return made_up()"), FILES) is None
    twice = {"a.py": "x = 1\n", "b.py": "x = 1\n"}
    assert resolve_quote(Quote("", "x = 1"), twice) is None
    assert resolve_quote(Quote("b.py", "x = 1"), twice) is not None
    body = render("Look:\n\n```quote src/calc.py\nreturn made_up()\n```\n")
    assert "made_up" not in body and f"not in the code at {SHA[:7]} was left out" in body


@pytest.mark.parametrize(
    "prose",
    [
        "The bug is on line 42.",
        "See lines 40-44 of the file.",
        "In calc.py:42 the count is off.",
        "At L42 (https://github.com/acme/calc/blob/main/src/calc.py#L42) it divides.",
        "Lines 3 to 5 repeat it.",
    ],
)
def test_line_numbers_and_links_the_model_wrote_never_reach_the_reply(prose: str) -> None:
    body = render(prose)
    assert "42" not in body and "40" not in body and "3 to 5" not in body and "blob/main" not in body


def test_prose_keeps_numbers_that_are_not_lines() -> None:
    assert strip_line_numbers("It divides 10 values by 9 at 10:30.") == "It divides 10 values by 9 at 10:30."


def test_no_commit_can_come_from_an_answer() -> None:
    body = render("Try:\n\n```suggestion\n    return sum(values) / len(values)\n```\n")
    assert "```suggestion" not in body and "    return sum(values) / len(values)" in body
    body = render("src/calc.py\n<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n")
    assert "SEARCH" not in body and "REPLACE" not in body


def test_not_shown_and_the_fix_line_are_taken_out_and_rendered_apart() -> None:
    answer = parse_answer("It is wrong.\nNOT SHOWN: the tests\n`/spark fix divide by len(values)`\n")
    assert answer.not_shown == ("the tests",) and answer.fix == "/spark fix divide by len(values)"
    body = render("It is wrong.\nNOT SHOWN: the tests\n/spark fix divide by len(values)\n")
    assert "> Beyond what I was shown: the tests" in body
    assert "If you want this change, comment:\n```\n/spark fix divide by len(values)\n```" in body
    assert body.rstrip().endswith("<sub>total 5 ms</sub>")


def test_the_models_prose_is_inert() -> None:
    body = render("Ping @org/team and <img src=x> [click](https://evil.example) <!-- spark:reply=x -->")
    assert "@org" not in body and "<img" not in body and "](https://evil" not in body and "<!--" not in body


def test_an_empty_answer_says_so() -> None:
    assert render("").startswith("The model gave no answer.")


@pytest.mark.parametrize(
    ("text", "dismissed"),
    [
        ("Won't fix: intended.", True),
        ("wontfix", True),
        ("This is a false positive", True),
        ("false-positive, see the caller", True),
        ("Will not fix this here.", True),
        ("Why is this a problem?", False),
        ("Please fix it", False),
    ],
)
def test_dismissal_words(text: str, dismissed: bool) -> None:
    assert is_dismissal(text) is dismissed


def test_the_diff_is_shown_without_line_numbers_and_deleted_files_are_not_read() -> None:
    diff = parse_diff(DIFF)
    text, cut = diff_text(diff)
    assert not cut and "@@" not in text
    assert text.startswith("--- src/calc.py (modified)\n def add(a, b):") and "+def average(values):" in text
    assert "--- old.py (deleted)\n-gone = True" in text
    assert diff.readable_paths() == ["src/calc.py"]
    assert diff_text(diff, max_lines=2) == ("--- src/calc.py (modified)\n def add(a, b):", True)
