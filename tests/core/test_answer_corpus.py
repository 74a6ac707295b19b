"""Malformed model answers judged as a whole (issue 14, sections 2 and 4): file names in every layout,
routing, and the first answer and its retry judged together.

Each case is our own reduction of a shape reported in public material, named in its docstring; no code is
copied from those sources.
"""

from __future__ import annotations

import pytest

from bot.core.answers import parse_edits
from bot.core.fixes import judge_answers

TARGET = "src/app/util.py"
TESTS = "tests/test_util.py"
UTIL = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n\n\ndef span(a, b):\n    return b - a\n"
TEST_FILE = "from app.util import clamp\n\n\ndef test_clamp():\n    assert clamp(5, 0, 3) == 3\n"


def sr(search: str, replace: str) -> str:
    """Render one SEARCH/REPLACE block."""
    return f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


TEST_BLOCK = sr(
    "    assert clamp(5, 0, 3) == 3\n", "    assert clamp(5, 0, 3) == 3\n    assert clamp(-1, 0, 3) == 0\n"
)
UTIL_BLOCK = sr("    return b - a\n", "    return abs(b - a)\n")


# ---------------------------------------------------------------------------------------------------------
# 4. A file named in any layout is recognised; a block for another file never lands in the target


LAYOUTS = {
    # zed-industries/zed PR #38143: the path on the line above the fence.
    "path line above the fence": f"{TESTS}\n```python\n{TEST_BLOCK}```\n",
    # A Windows path, as models on Windows hosts write it.
    "windows path": "tests\\test_util.py\n```python\n" + TEST_BLOCK + "```\n",
    # robertpiosik/CodeWebChat #145: a first-line comment inside the fence names the file.
    "hash comment in the fence": f"```python\n# {TESTS}\n{TEST_BLOCK}```\n",
    "slash comment in the fence": f"```\n// {TESTS}\n{TEST_BLOCK}```\n",
    # robertpiosik/CodeWebChat #303: ```typescript:path and ```typescript name=path info strings.
    "colon info string": f"```python:{TESTS}\n{TEST_BLOCK}```\n",
    "name= info string": f"```python name={TESTS}\n{TEST_BLOCK}```\n",
    # A path alone in its own fence, then the block's fence.
    "path in its own fence": f"```\n{TESTS}\n```\n\n```python\n{TEST_BLOCK}```\n",
    # robertpiosik/CodeWebChat #303: "### `file`" headings; prose naming the file in backticks.
    "prose in backticks": f"Changes to `{TESTS}`:\n\n```python\n{TEST_BLOCK}```\n",
    "heading in backticks": f"### `{TESTS}`\n```python\n{TEST_BLOCK}```\n",
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_block_naming_another_file_is_refused_in_every_layout(layout: str) -> None:
    """The target is the code file; the block names the test file, in each layout models use."""
    parsed = parse_edits(LAYOUTS[layout], TARGET)
    assert parsed.blocks == ()
    assert any("tests/test_util.py" in e for e in parsed.errors), parsed.errors


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_block_naming_another_target_is_routed_there(layout: str) -> None:
    """When the named file is another target of the same fix, the block goes to it, carrying its path."""
    parsed = parse_edits(LAYOUTS[layout], TARGET, targets=[TARGET, TESTS])
    assert parsed.errors == () and parsed.blocks == ()
    assert [b.path for b in parsed.routed] == [TESTS]


def test_a_name_given_once_carries_forward_to_later_blocks() -> None:
    """One heading names the test file, two blocks follow (Aider tests/basic/test_editblock.py: several
    blocks under one file name)."""
    second = sr("from app.util import clamp\n", "from app.util import clamp, span\n")
    text = f"Changes to `{TESTS}`:\n\n```python\n{TEST_BLOCK}```\n\nand also:\n\n```python\n{second}```\n"
    parsed = parse_edits(text, TARGET)
    assert parsed.blocks == () and len(parsed.errors) == 2
    named_first = f"{TARGET}\n```python\n{UTIL_BLOCK}```\n" + text
    parsed = parse_edits(named_first, TARGET)
    assert len(parsed.blocks) == 1 and parsed.blocks[0].path == TARGET and len(parsed.errors) == 2


def test_naming_the_target_in_any_layout_still_applies() -> None:
    """The same layouts naming the target file itself are accepted."""
    for layout, text in LAYOUTS.items():
        mine = text.replace("tests\\test_util.py", "src\\app\\util.py").replace(TESTS, TARGET)
        parsed = parse_edits(mine.replace(TEST_BLOCK, UTIL_BLOCK), TARGET)
        assert parsed.errors == () and len(parsed.blocks) == 1, layout


def test_code_words_in_prose_are_not_file_names() -> None:
    """`obj.get` or `self.value` in prose are code, not a file the block is for."""
    parsed = parse_edits(f"Use `self.value` and `obj.get` here:\n\n```python\n{UTIL_BLOCK}```\n", TARGET)
    assert parsed.errors == () and len(parsed.blocks) == 1


def test_refused_blocks_never_reach_the_retry_base() -> None:
    """First answer: a block for the test file (named only by a comment in its fence) and a misquoted block;
    the retry corrects the misquoted one. The test file's edit must never land in the target, and the
    answer is not whole, so nothing is committed."""
    first = (
        f"```python\n// {TESTS}\n{TEST_BLOCK}```\n\n{TARGET}\n```python\n"
        + sr("    return b-a\n", "    return abs(b - a)\n")
        + "```\n"
    )
    retry = f"{TARGET}\n```python\n{UTIL_BLOCK}```\n"
    attempt = judge_answers(TARGET, UTIL, UTIL, [first, retry])
    assert not attempt.ok
    assert any(TESTS in line for line in attempt.failed)
    # A retry that gives a block for each failure commits the target's blocks, and never the refused one.
    retry_both = retry + sr("    return max(lo, min(x, hi))\n", "    return min(max(x, lo), hi)\n")
    whole = judge_answers(TARGET, UTIL, UTIL, [first, retry_both])
    assert whole.ok and whole.text is not None
    assert "abs(b - a)" in whole.text and "min(max(x, lo), hi)" in whole.text
    assert "clamp(-1, 0, 3)" not in whole.text


def test_routed_blocks_are_judged_with_the_named_files_own_answer() -> None:
    """The code file's answer also edits the test file (both are targets): the test file's commit holds both
    its own block and the routed one, or nothing."""
    code_answer = f"{TARGET}\n```python\n{UTIL_BLOCK}```\n{TESTS}\n```python\n{TEST_BLOCK}```\n"
    code = judge_answers(TARGET, UTIL, UTIL, [code_answer], targets=[TARGET, TESTS])
    assert code.ok and code.text is not None and "abs(b - a)" in code.text
    assert [b.path for b in code.routed] == [TESTS]
    own = sr("from app.util import clamp\n", "from app.util import clamp, span\n")
    tests = judge_answers(TESTS, TEST_FILE, TEST_FILE, [own], targets=[TARGET, TESTS], routed=code.routed)
    assert tests.ok and tests.text is not None
    assert "clamp, span" in tests.text and "clamp(-1, 0, 3) == 0" in tests.text
    clash = sr("    assert clamp(5, 0, 3) == 3\n", "    assert clamp(5, 0, 3) == 3  # upper\n")
    refused = judge_answers(TESTS, TEST_FILE, TEST_FILE, [clash], targets=[TARGET, TESTS], routed=code.routed)
    assert not refused.ok


# ---------------------------------------------------------------------------------------------------------
# 2. Whole answers or nothing

THREE = "def a():\n    return 1\n\n\ndef b():\n    return 2\n\n\ndef c():\n    return 3\n"


def three_blocks(b_search: str, c_search: str) -> str:
    return (
        sr("    return 1\n", "    return 10\n")
        + sr(f"{b_search}\n", "    return 20\n")
        + sr(f"{c_search}\n", "    return 30\n")
    )


def test_retry_that_corrects_one_of_two_failed_blocks_is_refused() -> None:
    """Two of three blocks misquoted, the retry corrects one: judged together, nothing is committed, and
    every block still failing is listed with its reason (Aider-AI/aider #3824: partly applied answers)."""
    first = three_blocks("    return two", "    return three")
    retry = sr("    return 2\n", "    return 20\n")
    attempt = judge_answers("m.py", THREE, THREE, [first, retry])
    assert not attempt.ok and attempt.text is None
    assert attempt.failed[-1] == "retry 1 applied 1 block for the 2 that failed"
    assert [line.split(":")[0] for line in attempt.failed[:2]] == [
        "the first answer, block 2",
        "the first answer, block 3",
    ]


def test_retry_that_corrects_both_failed_blocks_commits_the_whole_answer() -> None:
    first = three_blocks("    return two", "    return three")
    retry = sr("    return 2\n", "    return 20\n") + sr("    return 3\n", "    return 30\n")
    attempt = judge_answers("m.py", THREE, THREE, [first, retry])
    assert attempt.ok and attempt.text == THREE.replace("1\n", "10\n").replace("2\n", "20\n").replace(
        "3\n", "30\n"
    )


def test_misquoted_search_whose_replace_exists_is_not_already_applied() -> None:
    """A deletion whose context remains: the misquoted SEARCH's REPLACE text occurs once in the file. It is a
    failure, never "nothing to change" (Aider tests/basic/test_editblock.py checks resent edits; this is the
    opposite case)."""
    text = "def f():\n    x = 1\n    y = 2\n\n\ndef g():\n    x = 1\n    log(x)\n    y = 2\n"
    answer = sr("    x = 1\n    log( x )\n    y = 2\n", "    x = 1\n    y = 2\n")
    attempt = judge_answers("m.py", text, text, [answer])
    assert not attempt.ok and not attempt.no_changes
    assert attempt.failed and "does not match" in attempt.failed[0]


def test_retry_giving_up_after_failed_blocks_commits_nothing() -> None:
    first = three_blocks("    return 2", "    return three")
    attempt = judge_answers("m.py", THREE, THREE, [first, "NO_CHANGES"])
    assert not attempt.ok and not attempt.no_changes and attempt.failed


def test_syntax_error_then_the_block_resent_whole_against_the_original() -> None:
    """The first answer breaks the syntax; the retry resends that block corrected, against the shown file."""
    first = sr("    return 1\n", "    return (1\n") + sr("    return 2\n", "    return 20\n")
    retry = sr("    return 1\n", "    return 10\n")
    attempt = judge_answers("m.py", THREE, THREE, [first, retry])
    assert attempt.ok and attempt.text == THREE.replace("1\n", "10\n").replace("2\n", "20\n")


def test_prose_naming_several_files() -> None:
    """Prose naming two other files refuses the block; naming the target among others decides nothing."""
    others = f"Changes to `{TESTS}` and `tests/conftest.py`:\n\n```python\n{UTIL_BLOCK}```\n"
    assert parse_edits(others, TARGET).blocks == ()
    mixed = f"Changes to `{TARGET}` (and later `{TESTS}`):\n\n```python\n{UTIL_BLOCK}```\n"
    assert len(parse_edits(mixed, TARGET).blocks) == 1


def test_retry_resending_the_whole_answer_against_the_shown_file() -> None:
    """Models often resend every block, not just the failed ones, against the file as first shown: the
    resent blocks take the place of those that applied, and the corrected one covers the failure."""
    first = three_blocks("    return 2", "    return three")
    # Resent with its indentation drifted, so it is not the same block as the one that applied.
    whole_again = (
        sr("  return 1\n", "  return 10\n")
        + sr("    return 2\n", "    return 20\n")
        + sr("    return 3\n", "    return 30\n")
    )
    attempt = judge_answers("m.py", THREE, THREE, [first, whole_again])
    assert attempt.ok and attempt.text == THREE.replace("1\n", "10\n").replace("2\n", "20\n").replace(
        "3\n", "30\n"
    )
    still_wrong = three_blocks("    return two", "    return 3")
    two_failed = three_blocks("    return two", "    return three")
    refused = judge_answers("m.py", THREE, THREE, [two_failed, still_wrong])
    assert not refused.ok and refused.text is None
