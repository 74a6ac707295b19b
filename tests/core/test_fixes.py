"""The pure steps of ``/spark fix``: targets, judging answers, secrets kept, commit message, reply."""

from __future__ import annotations

import pytest

from bot.core.fixes import (
    FileChange,
    commit_message,
    fix_reply,
    format_timings,
    judge_answers,
    restore_secrets,
)
from bot.core.secrets import redact_file

BUGGY = (
    "def total(items):\n    result = 0\n    for item in items:\n        result =+ item\n    return result\n"
)
FIXED = BUGGY.replace("=+", "+=")
GOOD_ANSWER = """Here is the fix.

app/calc.py
```python
<<<<<<< SEARCH
        result =+ item
=======
        result += item
>>>>>>> REPLACE
```
"""


class TestRestoreSecrets:
    ORIGINAL = 'TOKEN = "ghp_' + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8" + '"\nvalue = 1\n'

    def test_untouched_secret_lines_come_back(self) -> None:
        shown = redact_file("settings.py", self.ORIGINAL).text
        assert "ghp_" not in shown
        edited = shown.replace("value = 1", "value = 2")
        restored = restore_secrets(self.ORIGINAL, shown, edited)
        assert restored == self.ORIGINAL.replace("value = 1", "value = 2")

    def test_edit_of_a_redacted_line_is_refused(self) -> None:
        shown = redact_file("settings.py", self.ORIGINAL).text
        first = shown.splitlines(keepends=True)[0]
        edited = shown.replace(first, "TOKEN = None\n")
        assert restore_secrets(self.ORIGINAL, shown, edited) is None

    def test_nothing_redacted_is_identity(self) -> None:
        assert restore_secrets("a\n", "a\n", "b\n") == "b\n"

    def test_an_edit_that_writes_a_placeholder_is_refused(self) -> None:
        shown = redact_file("settings.py", self.ORIGINAL).text
        key = 'KEY = "[REDACTED:aws-access-key]"\n'
        assert restore_secrets(self.ORIGINAL, shown, shown.replace("value = 1\n", key)) is None
        assert restore_secrets("a\n", "a\n", key) is None


class TestJudgeAnswer:
    def test_good_answer_applies_and_verifies(self) -> None:
        attempt = judge_answers("app/calc.py", BUGGY, BUGGY, [GOOD_ANSWER])
        assert attempt.ok
        assert attempt.text == FIXED
        assert attempt.applied == 1
        assert attempt.verified_language == "python"

    def test_no_changes(self) -> None:
        attempt = judge_answers("app/calc.py", BUGGY, BUGGY, ["NO_CHANGES"])
        assert attempt.no_changes and not attempt.ok

    def test_missing_search_is_an_error_for_retry(self) -> None:
        answer = GOOD_ANSWER.replace("result =+ item", "result = result + item")
        attempt = judge_answers("app/calc.py", BUGGY, BUGGY, [answer])
        assert not attempt.ok
        assert attempt.errors and "block" in attempt.errors[0]

    def test_syntax_breaking_edit_is_refused(self) -> None:
        answer = GOOD_ANSWER.replace("        result += item", "        result += (item")
        attempt = judge_answers("app/calc.py", BUGGY, BUGGY, [answer])
        assert not attempt.ok
        assert "no longer parses" in attempt.errors[0]

    def test_edit_of_another_file_is_refused(self) -> None:
        answer = GOOD_ANSWER.replace("app/calc.py", "app/other.py")
        attempt = judge_answers("app/calc.py", BUGGY, BUGGY, [answer])
        assert not attempt.ok

    def test_truncated_answer_is_refused(self) -> None:
        attempt = judge_answers("app/calc.py", BUGGY, BUGGY, [GOOD_ANSWER], truncated=True)
        assert not attempt.ok and "cut off" in attempt.errors[0]

    def test_retry_applies_on_top_of_the_blocks_that_applied(self) -> None:
        two = GOOD_ANSWER + "\n<<<<<<< SEARCH\n    return nothing\n=======\n    return 42\n>>>>>>> REPLACE\n"
        first = judge_answers("app/calc.py", BUGGY, BUGGY, [two])
        assert not first.ok and first.applied == 1
        retry = "<<<<<<< SEARCH\n    return result\n=======\n    return int(result)\n>>>>>>> REPLACE\n"
        second = judge_answers("app/calc.py", BUGGY, BUGGY, [two, retry])
        assert second.ok
        assert second.text == FIXED.replace("return result", "return int(result)")

    def test_already_broken_file_is_not_blamed_on_the_edit(self) -> None:
        broken = BUGGY + "def broken(:\n"
        attempt = judge_answers("app/calc.py", broken, broken, [GOOD_ANSWER])
        assert attempt.ok
        assert attempt.notes and "did not parse before" in attempt.notes[0]


def test_commit_message_summarises_and_links() -> None:
    headline, body = commit_message("  make   the loop add\nitems ", "alice", "https://gh/x#c1", ["a.py"])
    assert headline == "Make the loop add items"
    assert "Spark-Requested-In: https://gh/x#c1" in body
    assert "@alice" in body
    long_headline, _ = commit_message("x" * 200, "a", "u", ["a.py"])
    assert len(long_headline) <= 72 and long_headline.endswith("…")


def test_reply_lists_changes_commit_and_timings() -> None:
    change = FileChange.of("app/calc.py", BUGGY, FIXED)
    assert (change.added, change.removed) == (1, 1)
    reply = fix_reply([change], "https://gh/commit/abc", {"total_ms": 912.4, "ttft_ms": 131.0})
    assert "https://gh/commit/abc" in reply
    assert "`app/calc.py` (+1 −1)" in reply
    assert "first token 131 ms" in reply and "total 912 ms" in reply


@pytest.mark.parametrize(
    ("timings", "expected"),
    [
        ({}, ""),
        ({"queue_wait_ms": 3.2}, "queue 3 ms"),
        ({"completion_tokens": 40.0, "tokens_per_second": 1000.0}, "40 tokens · 1000 tok/s"),
    ],
)
def test_format_timings(timings: dict[str, float], expected: str) -> None:
    assert format_timings(timings) == expected


def test_fix_reply_names_files_left_unchanged_and_why() -> None:
    change = FileChange.of("a.py", "x = 1\n", "x = 2\n")
    reply = fix_reply([change], "https://gh/commit/abc", {}, [("b.py", "the SEARCH text was not found")])
    assert "- `a.py` (+1 −1)" in reply
    assert "Not changed:\n- `b.py`: the SEARCH text was not found" in reply
    assert "Not changed" not in fix_reply([change], "https://gh/commit/abc", {})
