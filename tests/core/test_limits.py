"""Fitting posted text into GitHub's size limits: cut where it must be, said where it is, nothing lost."""

from __future__ import annotations

from bot.core.limits import (
    BODY_MAX_CHARS,
    CHECK_OUTPUT_MAX_BYTES,
    cut_bytes,
    diff_block,
    fit_check_output,
    split_patches,
    utf8_len,
)


def test_cut_bytes_keeps_whole_characters() -> None:
    assert cut_bytes("aé" * 3, 4) == "aéa"
    assert cut_bytes("说说", 5) == "说"
    assert cut_bytes("short", 100) == "short"


def test_a_summary_within_the_limit_is_untouched() -> None:
    assert fit_check_output("fine", "details") == ("fine", "details")


def test_a_long_summary_is_cut_at_a_line_end_and_continues_in_the_text() -> None:
    lines = [f"- `文档/{n:05d}.md`: skipped" for n in range(4000)]
    summary, text = fit_check_output("\n".join(lines))
    assert utf8_len(summary) <= CHECK_OUTPUT_MAX_BYTES and utf8_len(text) <= CHECK_OUTPUT_MAX_BYTES
    assert "The summary was cut here" in summary
    kept = summary.split("\n\n(The summary was cut")[0]
    assert (kept + text).splitlines() == lines


def test_text_too_long_for_both_says_how_much_was_left_out() -> None:
    summary, text = fit_check_output("x" * 200_000)
    assert utf8_len(summary) <= CHECK_OUTPUT_MAX_BYTES
    assert utf8_len(text) <= CHECK_OUTPUT_MAX_BYTES
    assert "more characters were left out" in text


def test_diff_block_fence_outgrows_backticks_in_the_patch() -> None:
    block = diff_block("+```python\n+x = 1\n+```\n")
    assert "````diff" in block and block.startswith("<details>")


def test_patches_that_fit_stay_and_the_rest_splits_into_ordered_parts() -> None:
    small = "@@ -1 +1 @@\n-a\n+b\n"
    big = "".join(f"+line {n:06d} {'x' * 60}\n" for n in range(3000))
    first, parts = split_patches([small, big], room=1000)
    assert len(first) == 1 and "+b" in first[0]
    assert len(parts) >= 3 and all(len(p) <= BODY_MAX_CHARS for p in parts)
    carried = [line for part in parts for line in part.splitlines() if line.startswith("+line ")]
    assert carried == big.splitlines()
