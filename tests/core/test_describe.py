"""`/spark describe`'s section of the PR body: the author's text kept byte for byte, the section replaced."""

from __future__ import annotations

from bot.core.describe import (
    END,
    START,
    author_text,
    clean_summary,
    describe_messages,
    summary_of,
    with_summary,
)
from bot.core.diff import format_patch, parse_diff

DIFF = """diff --git a/app.py b/app.py
--- a/app.py
+++ b/app.py
@@ -1 +1,2 @@
 x = 1
+token = "ghp_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"
"""


def test_the_section_is_appended_then_replaced_and_the_author_s_text_kept() -> None:
    body = "Intro\r\n\r\n- item  \n"
    once = with_summary(body, "first")
    assert once.startswith(body) and once.endswith(END) and START in once
    assert summary_of(once) == "first"
    twice = with_summary(once, "second")
    assert twice.startswith(body) and summary_of(twice) == "second" and twice.count(START) == 1
    # Text the author wrote after the section, later, stays where it is.
    edited = once + "\n\nA note added later."
    assert with_summary(edited, "third").endswith("\n\nA note added later.")
    assert author_text(edited) == body + "\n" + "\n\nA note added later."
    assert with_summary("", "s") == f"{START}\n### Summary by Spark\n\ns\n{END}"


def test_a_lone_marker_is_the_author_s_text() -> None:
    body = f"quoting {START} in prose"
    assert with_summary(body, "s").startswith(body) and author_text(body) == body
    assert summary_of(body) is None


def test_the_answer_becomes_a_summary_without_markers() -> None:
    assert clean_summary("  NO_CHANGES ") is None
    assert clean_summary("```markdown\nHello\n```") == "Hello"
    assert clean_summary(f"Hi {END} there {START}") == "Hi  there"


def test_the_prompt_quotes_the_pr_and_redacts_the_diff() -> None:
    body = with_summary("Why: speed.", "old summary")
    [system, user] = describe_messages("Title", body, parse_diff(DIFF))
    assert "Worth a reviewer's look" in system["content"]
    text = user["content"]
    assert "/spark describe" in text and "Why: speed." in text and "old summary" not in text
    assert "+x = 1" not in text and " x = 1" in text and "ghp_Zx9Yw8" not in text


def test_callers_in_other_files_are_given_as_quoted_code_when_known() -> None:
    diff = parse_diff(format_patch("a.py", "def f(x):\n    pass\n", "def f(x, y):\n    pass\n"))
    callers = "File: b.py (references `f`)\n[lines 3-4]\ndef g():\n    f(1)"
    user = describe_messages("t", "", diff, callers)[-1]["content"]
    assert "name the callers the change affects" in user
    assert 'kind="code_from_other_files">\n' + callers in user
    assert "code_from_other_files" not in describe_messages("t", "", diff)[-1]["content"]
