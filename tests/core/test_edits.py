"""SEARCH/REPLACE parsing, the apply ladder, refusals and retry feedback."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.core.answers import EditBlock, parse_edits, parse_review_answer
from bot.core.edits import (
    ApplyResult,
    FailureKind,
    MatchLevel,
    apply_edits,
    decode_source,
    encode_source,
    error_feedback,
)
from bot.core.policy import check_target_path
from bot.core.prompts import retry_messages


def block(search: str, replace: str, index: int = 1) -> EditBlock:
    """Build a block from LF text (a final newline is added to non-empty sides)."""
    return EditBlock(search + "\n" if search else "", replace + "\n" if replace else "", index)


def answer(*pairs: tuple[str, str], path: str | None = None, fence: bool = False, marks: int = 7) -> str:
    """Render SEARCH/REPLACE blocks as a model would write them."""
    out: list[str] = []
    for search, replace in pairs:
        if path:
            out.append(path)
        if fence:
            out.append("```python")
        out += ["<" * marks + " SEARCH", search, "=" * marks, replace, ">" * marks + " REPLACE"]
        if fence:
            out.append("```")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------- parse_edits

PARSE_CASES = [
    # (name, text, expected (search, replace) pairs, no_changes, error fragments)
    ("plain", answer(("a = 1", "a = 2")), [("a = 1\n", "a = 2\n")], False, []),
    ("fenced with path", answer(("a", "b"), path="pkg/mod.py", fence=True), [("a\n", "b\n")], False, []),
    ("bold path", "**pkg/mod.py**\n" + answer(("a", "b")), [("a\n", "b\n")], False, []),
    ("File: prefix", "File: ./pkg/mod.py\n" + answer(("a", "b")), [("a\n", "b\n")], False, []),
    ("crlf", answer(("a", "b")).replace("\n", "\r\n"), [("a\n", "b\n")], False, []),
    ("5 markers", answer(("a", "b"), marks=5), [("a\n", "b\n")], False, []),
    ("9 markers", answer(("a", "b"), marks=9), [("a\n", "b\n")], False, []),
    (
        "trailing spaces on markers",
        "<<<<<<< SEARCH   \na\n=======  \nb\n>>>>>>> REPLACE \n",
        [("a\n", "b\n")],
        False,
        [],
    ),
    (
        "prose around",
        "I changed it.\n\n" + answer(("x", "y")) + "\nThat fixes the bug.\n",
        [("x\n", "y\n")],
        False,
        [],
    ),
    ("two blocks", answer(("a", "b"), ("c", "d")), [("a\n", "b\n"), ("c\n", "d\n")], False, []),
    ("deletion", "<<<<<<< SEARCH\na\n=======\n>>>>>>> REPLACE\n", [("a\n", "")], False, []),
    ("NO_CHANGES", "NO_CHANGES", [], True, []),
    ("NO_CHANGES fenced", "```\nNO_CHANGES\n```\n", [], True, []),
    ("NO_CHANGES with prose", "The code is fine.\nNO_CHANGES\n", [], True, []),
    ("empty", "  \n", [], False, ["empty"]),
    ("only prose", "I would rename x.", [], False, ["no SEARCH/REPLACE"]),
    ("truncated", "<<<<<<< SEARCH\na\n=======\nb", [], False, ["truncated"]),
    ("truncated in search", "<<<<<<< SEARCH\na\n", [], False, ["truncated"]),
    ("no divider", "<<<<<<< SEARCH\na\n>>>>>>> REPLACE\n", [], False, ["no ======="]),
    ("stray tail", "b\n>>>>>>> REPLACE\n", [], False, ["without a <<<<<<< SEARCH"]),
    ("stray divider", "=======\n", [], False, ["without a <<<<<<< SEARCH"]),
    ("second divider", "<<<<<<< SEARCH\na\n=======\nb\n=======\nc\n", [], False, ["second ======="]),
    (
        "unterminated then good",
        "<<<<<<< SEARCH\na\n=======\nb\n" + answer(("c", "d")),
        [("c\n", "d\n")],
        False,
        ["no >>>>>>> REPLACE"],
    ),
    ("other file", answer(("a", "b"), path="other.py"), [], False, ["'other.py'"]),
    ("basename of the target", answer(("a", "b"), path="mod.py"), [("a\n", "b\n")], False, []),
    ("diff-style b/ path", answer(("a", "b"), path="b/pkg/mod.py"), [("a\n", "b\n")], False, []),
    ("same basename elsewhere", answer(("a", "b"), path="other/mod.py"), [], False, ["'other/mod.py'"]),
    ("empty block", "<<<<<<< SEARCH\n=======\n>>>>>>> REPLACE\n", [], False, ["empty SEARCH and an empty"]),
    (
        "other file fenced inside",
        "```\nsecrets/other.py\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n```\n",
        [],
        False,
        ["'secrets/other.py'"],
    ),
    ("NO_CHANGES and blocks", "NO_CHANGES\n" + answer(("a", "b")), [("a\n", "b\n")], False, ["NO_CHANGES"]),
    ("prose sentence before is not a path", "Done.\n" + answer(("a", "b")), [("a\n", "b\n")], False, []),
]


@pytest.mark.parametrize(
    ("name", "text", "pairs", "no_changes", "errors"), PARSE_CASES, ids=[c[0] for c in PARSE_CASES]
)
def test_parse_edits_table(
    name: str, text: str, pairs: list[tuple[str, str]], no_changes: bool, errors: list[str]
) -> None:
    """Each answer shape parses into the expected blocks, flags and errors."""
    parsed = parse_edits(text, "pkg/mod.py")
    assert [(b.search, b.replace) for b in parsed.blocks] == pairs
    assert parsed.no_changes is no_changes
    for fragment in errors:
        assert any(fragment in e for e in parsed.errors), (fragment, parsed.errors)
    if not errors:
        assert parsed.errors == ()
        assert parsed.ok
    assert [b.index for b in parsed.blocks] == list(range(1, len(pairs) + 1))


def test_parse_keeps_indentation_and_trailing_spaces_of_code() -> None:
    """Block content is verbatim: leading indentation and trailing spaces survive parsing."""
    parsed = parse_edits("<<<<<<< SEARCH\n    x = 1  \n=======\n\ty = 2\n>>>>>>> REPLACE\n", "a.py")
    assert parsed.blocks[0].search == "    x = 1  \n"
    assert parsed.blocks[0].replace == "\ty = 2\n"


def test_parse_refuses_bad_targets() -> None:
    """A refused target yields no blocks at all, whatever the answer says."""
    for target in (".github/workflows/ci.yml", "../etc/passwd", "/etc/passwd"):
        parsed = parse_edits(answer(("a", "b")), target)
        assert parsed.blocks == ()
        assert parsed.errors and parsed.errors[0].startswith("target refused")


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("src/app.py", None),
        ("README.md", None),
        (".github/spark.yml", None),
        ("docs/a b.md", None),
        ("", "empty"),
        ("/etc/passwd", "absolute"),
        ("C:/x.py", "absolute"),
        ("~/x.py", "absolute"),
        ("../x.py", "'..'"),
        ("a/../../x.py", "'..'"),
        ("a/./x.py", "'.'"),
        ("a//x.py", "empty"),
        ("a/", "empty"),
        ("a\\..\\x.py", "backslash"),
        (".github/workflows/ci.yml", "workflow"),
        (".GitHub/Workflows/ci.yml", "workflow"),
        (".git/config", ".git"),
        ("a\x00b", "control"),
    ],
)
def test_check_target_path(path: str, fragment: str | None) -> None:
    """Only canonical relative paths inside the repository, outside workflows, are allowed."""
    reason = check_target_path(path)
    if fragment is None:
        assert reason is None
    else:
        assert reason is not None and fragment in reason


# ------------------------------------------------------------------------------------------ review answers


def test_parse_review_answer_findings() -> None:
    """Findings carry severity, title, body and their optional block; synonyms map with a note."""
    text = (
        "Some preamble the model wrote.\n"
        "### FINDING: high: Off-by-one in the loop\n"
        "The last item is never visited.\n"
        "It drops data.\n"
        "```python\n"
        "<<<<<<< SEARCH\n"
        "for i in range(n - 1):\n"
        "=======\n"
        "for i in range(n):\n"
        ">>>>>>> REPLACE\n"
        "```\n"
        "### FINDING: warning: Shadowed name\n"
        "`list` shadows the builtin.\n"
        "## finding: bogus: Something\n"
        "text\n"
        "### FINDING: Missing severity here\n"
    )
    review = parse_review_answer(text, "a.py")
    assert [(f.severity, f.title) for f in review.findings] == [
        ("high", "Off-by-one in the loop"),
        ("medium", "Shadowed name"),
        ("medium", "Something"),
        ("medium", "Missing severity here"),
    ]
    first = review.findings[0]
    assert first.body == "The last item is never visited.\nIt drops data."
    assert first.block == EditBlock(
        "for i in range(n - 1):\n", "for i in range(n):\n", 1, first.block.line if first.block else 0, "a.py"
    )
    assert first.note == ""
    assert "warning" in review.findings[1].note
    assert "bogus" in review.findings[2].note
    assert "no severity" in review.findings[3].note
    assert review.findings[1].block is None
    assert review.no_findings is False
    assert review.errors == ()


@pytest.mark.parametrize(
    ("line", "at"),
    [
        ("AT: pkg/reader.py:7", ("pkg/reader.py", 7, 7)),
        ("**AT:** `./pkg/reader.py:7-9`", ("pkg/reader.py", 7, 9)),
        ("AT: pkg/reader.py:9-7", ("pkg/reader.py", 9, 9)),
        ("At: reader.py:12.", ("reader.py", 12, 12)),
    ],
)
def test_a_finding_names_lines_of_another_file_on_an_at_line(line: str, at: tuple[str, int, int]) -> None:
    """``AT: path:line`` under the header names the place in code from other files; it is not body text."""
    review = parse_review_answer(
        f"### FINDING: high: Caller left behind\n{line}\nIt passes one argument.\n", "a.py"
    )
    [finding] = review.findings
    assert (finding.at, finding.body) == (at, "It passes one argument.")
    assert parse_review_answer("### FINDING: low: x\nAT the top, a leak.\n", "a.py").findings[0].at is None


@pytest.mark.parametrize(
    "header",
    [
        "### FINDING: low: Title",
        "**FINDING:** low: Title",
        "## Finding 2: low: Title",
        "FINDING #3: low: Title",
    ],
)
def test_finding_header_variants(header: str) -> None:
    """Bold, numbered and differently levelled headers are all read as findings."""
    review = parse_review_answer(f"{header}\nwhy it matters\n", "a.py")
    assert [(f.severity, f.title, f.body) for f in review.findings] == [("low", "Title", "why it matters")]
    assert review.errors == ()


@pytest.mark.parametrize(
    ("text", "count", "no_findings", "error"),
    [
        ("NO_FINDINGS", 0, True, None),
        ("Looks good.\n\nNO_FINDINGS\n", 0, True, None),
        ("", 0, False, "empty"),
        ("Looks good to me.", 0, False, "no ### FINDING"),
        ("### FINDING: low: x\nbody\nNO_FINDINGS\n", 1, False, "NO_FINDINGS"),
        ("### FINDING: low: x\n<<<<<<< SEARCH\na\n=======\nb\n", 1, False, "truncated"),
        (
            "### FINDING: low: x\n" + answer(("a", "b"), ("c", "d")),
            1,
            False,
            "only the first",
        ),
        ("### FINDING: low: x\n" + answer(("a", "b"), path="other.py"), 1, False, "other.py"),
        (answer(("a", "b")) + "### FINDING: low: x\n", 1, False, "outside any"),
        ("### FINDING: high:\nthe body line\n", 1, False, "no title"),
    ],
)
def test_parse_review_answer_edge_cases(text: str, count: int, no_findings: bool, error: str | None) -> None:
    """Sentinels, truncation, extra blocks and foreign paths are reported, never raised."""
    review = parse_review_answer(text, "a.py")
    assert len(review.findings) == count
    assert review.no_findings is no_findings
    if error is None:
        assert review.errors == ()
    else:
        assert any(error in e for e in review.errors), review.errors


# ---------------------------------------------------------------------------------------------- apply ladder

FILE = "def f(x):\n    if x:\n        return 1\n    return 2\n\n\ndef g():\n    return f(1)\n"


@pytest.mark.parametrize(
    ("search", "replace", "level", "expected"),
    [
        (
            "        return 1",
            "        return 10",
            MatchLevel.EXACT,
            FILE.replace("return 1\n", "return 10\n"),
        ),
        (
            "        return 1   ",
            "        return 10",
            MatchLevel.TRAILING_WHITESPACE,
            FILE.replace("return 1\n", "return 10\n"),
        ),
        (
            "if x:\n    return 1",
            "if x is not None:\n    return 1",
            MatchLevel.INDENTATION,
            FILE.replace("    if x:\n", "    if x is not None:\n"),
        ),
        (
            "            if x:\n                return 1",
            "            if not x:\n                return 1",
            MatchLevel.INDENTATION,
            FILE.replace("    if x:\n", "    if not x:\n"),
        ),
    ],
)
def test_apply_ladder_levels(search: str, replace: str, level: MatchLevel, expected: str) -> None:
    """Each rung matches what the rung above cannot, and the result is the intended file."""
    result = apply_edits(FILE, [block(search, replace)])
    assert result.ok, result.failures
    assert result.applied[0].level is level
    assert result.text == expected


def test_apply_unicode_normalisation() -> None:
    """Curly quotes, dashes and odd spaces in SEARCH still find the ASCII file lines (and vice versa)."""
    original = 'msg = "it\'s fine - really"\nx = 1\n'
    result = apply_edits(original, [block("msg = \u201cit\u2019s fine \u2013 really\u201d", 'msg = "ok"')])
    assert result.applied[0].level is MatchLevel.UNICODE
    assert result.text == 'msg = "ok"\nx = 1\n'
    curly = "s = \u201cquoted\u201d\u00a0# nbsp\n"
    result = apply_edits(curly, [block('s = "quoted" # nbsp', 's = "plain"')])
    assert result.ok and result.text == 's = "plain"\n'


def test_apply_indentation_shift_keeps_blank_lines_and_tabs() -> None:
    """A tab-indented file edited with an unindented block gets the tab prefix on REPLACE lines."""
    original = "class A:\n\tdef f(self):\n\t\treturn 1\n\n\tdef g(self):\n\t\treturn 2\n"
    result = apply_edits(original, [block("def g(self):\n\treturn 2", "def g(self):\n\n\treturn 3")])
    assert result.applied[0].level is MatchLevel.INDENTATION
    assert result.text == "class A:\n\tdef f(self):\n\t\treturn 1\n\n\tdef g(self):\n\n\t\treturn 3\n"


def test_apply_reindent_failure() -> None:
    """An over-indented SEARCH whose REPLACE lacks the extra prefix cannot be re-indented: refused."""
    original = "x = 1\ny = 2\n"
    result = apply_edits(original, [block("    x = 1\n    y = 2", "    x = 1\nz = 3")])
    assert result.failures[0].kind is FailureKind.REINDENT
    assert result.text == original


@pytest.mark.parametrize(
    ("original", "search", "replace", "expected"),
    [
        ("a\r\nb\r\nc\r\n", "b", "B\nB2", "a\r\nB\r\nB2\r\nc\r\n"),
        ("a\r\nb\r\nc", "c", "C\nD", "a\r\nb\r\nC\r\nD"),
        ("a\nb\nc", "c", "C", "a\nb\nC"),
        ("a\nb\nc", "b\nc", "", "a"),
        ("a\nb\nc\n", "b\nc", "", "a\n"),
        ("\ufeffa\nb\n", "a", "A", "\ufeffA\nb\n"),
        ("a\r\nb\nc\r\n", "c", "C", "a\r\nb\nC\r\n"),
        ("", "", "new\nfile", "new\nfile\n"),
        ("  \n", "", "x", "x\n"),
    ],
)
def test_apply_keeps_line_endings_final_newline_and_bom(
    original: str, search: str, replace: str, expected: str
) -> None:
    """CRLF, mixed endings, a missing final newline, a BOM and empty files survive an edit."""
    result = apply_edits(original, [block(search, replace)])
    assert result.ok, result.failures
    assert result.text == expected


def test_apply_refusals() -> None:
    """Missing, ambiguous, identical, lazy, overlapping and empty-SEARCH blocks are refused with reasons."""
    original = "a = 1\nb = 2\na = 1\nc = 3\n"
    blocks = [
        block("zzz", "y", 1),
        block("a = 1", "a = 5", 2),
        block("b = 2", "b = 2", 3),
        block("b = 2", "b = 3\n# ... existing code ...", 4),
        block("c = 3", "c = 4\n// rest of code here", 5),
        block("", "x", 6),
        block("b = 2\na = 1", "b = 20\na = 1", 7),
        block("a = 1\nc = 4", "a = 1\nc = 40", 8),
    ]
    result = apply_edits(original, blocks)
    kinds = {f.index: f.kind for f in result.failures}
    assert kinds == {
        1: FailureKind.MISSING,
        2: FailureKind.AMBIGUOUS,
        3: FailureKind.IDENTICAL,
        4: FailureKind.PLACEHOLDER,
        5: FailureKind.PLACEHOLDER,
        6: FailureKind.EMPTY_SEARCH,
    } | {8: FailureKind.MISSING}
    ambiguous = next(f.message for f in result.failures if f.index == 2)
    assert "line 1 (exact, at the top of the file); line 3 (exact, below 'b = 2')" in ambiguous
    assert [a.index for a in result.applied] == [7]
    assert result.text == "a = 1\nb = 20\na = 1\nc = 3\n"
    assert not result.ok


def test_apply_locates_in_the_file_the_model_saw() -> None:
    """A SEARCH that quotes text an earlier block of the same answer wrote is not found: blocks are located in
    the file the model saw, never in text other blocks changed."""
    original = "one\ntwo\nthree\nfour\n"
    result = apply_edits(original, [block("two", "TWO"), block("TWO\nthree", "2\n3", 2)])
    assert [f.kind for f in result.failures] == [FailureKind.MISSING]
    assert result.text == "one\nTWO\nthree\nfour\n"


def test_apply_overlap_in_the_original() -> None:
    """Blocks aimed at overlapping lines of the original: the second is refused as an overlap, not a miss."""
    original = "one\ntwo\nthree\nfour\n"
    result = apply_edits(original, [block("two\nthree", "2\n3"), block("three\nfour", "3\n4", 2)])
    assert [(f.index, f.kind) for f in result.failures] == [(2, FailureKind.OVERLAP)]
    assert result.text == "one\n2\n3\nfour\n"


def test_only_lf_and_crlf_end_lines() -> None:
    """Form feeds and U+2028 inside lines are content, not line breaks, and survive an edit."""
    original = "a = 1\x0c# page\nb = '\u2028'\nc = 3\n"
    result = apply_edits(original, [block("c = 3", "c = 4")])
    assert result.text == "a = 1\x0c# page\nb = '\u2028'\nc = 4\n"
    assert result.applied[0].start_line == 3


def test_apply_keeps_placeholder_lines_already_in_the_file() -> None:
    """An ellipsis that was in the file (a Protocol stub) is not a lazy placeholder."""
    original = "class P(Protocol):\n    def f(self) -> int:\n        ...\n"
    result = apply_edits(
        original, [block("    def f(self) -> int:\n        ...", "    def f(self) -> str:\n        ...")]
    )
    assert result.ok
    lazy = apply_edits("x = 1\n", [block("x = 1", "x = 2\n...")])
    assert lazy.failures[0].kind is FailureKind.PLACEHOLDER


def test_already_applied_only_for_blocks_this_fix_applied() -> None:
    """A block whose REPLACE happens to be in the file is missing, unless this fix applied that very block."""
    first = block("a = 1", "a = 2")
    result = apply_edits("a = 2\n", [first])
    assert [f.kind for f in result.failures] == [FailureKind.MISSING]
    resent = apply_edits("a = 2\n", [block("a = 1", "a = 2", 3)], done=[first])
    assert resent.ok and resent.already_applied == (3,) and resent.applied == ()
    assert resent.text == "a = 2\n"


def test_resent_insertion_is_already_applied() -> None:
    """An insertion this fix applied is not inserted a second time when the retry resends it."""
    block_ = block("import os", "import os\nimport sys")
    once = apply_edits("import os\n\nx = 1\n", [block_])
    assert once.text == "import os\nimport sys\n\nx = 1\n"
    twice = apply_edits(once.text, [block_], done=[block_])
    assert twice.text == once.text
    assert twice.already_applied == (1,) and twice.ok


def test_deletion_range() -> None:
    """A deletion reports an empty range positioned where the lines were."""
    result = apply_edits("a\nb\nc\n", [block("b", "")])
    assert result.text == "a\nc\n"
    assert (result.applied[0].start_line, result.applied[0].end_line) == (2, 1)


def test_missing_block_hint_points_at_closest_lines() -> None:
    """A near miss names the closest lines (for the retry prompt) but is never applied."""
    original = "".join(f"line_{i} = {i}\n" for i in range(50))
    original += "def compute(total, count):\n    return total / count\n"
    search = "def compute(total, count):\n    return total // count"
    result = apply_edits(
        original, [block(search, "def compute(total, count):\n    return total / max(count, 1)")]
    )
    assert result.text == original
    failure = result.failures[0]
    assert failure.kind is FailureKind.MISSING
    assert "lines are 51-52" in failure.hint
    assert "return total / count" in failure.hint
    far = apply_edits(original, [block("completely unrelated text", "x")])
    assert far.failures[0].hint == ""


def test_error_feedback_lists_only_failures() -> None:
    """Feedback names each failed block with its reason and hint; the retry prompt says what to do once."""
    original = "alpha = 1\nbeta = 2\ngamma = 3\n"
    result = apply_edits(original, [block("alpha = 1", "alpha = 10"), block("beta = 3", "beta = 30", 2)])
    text = error_feedback(result, ["line 9: a second ======= in one block"])
    assert "1 of 2 SEARCH/REPLACE blocks failed" in text
    assert "block 2:" in text and "block 1:" not in text
    assert "beta = 2" in text
    assert "second =======" in text
    retry = retry_messages([], "the answer", [text], applied=1)[-1]["content"]
    assert retry.count("applied") == 1 and "Resend only" not in retry
    clean = ApplyResult("x", (), (), (), 0)
    assert error_feedback(clean) == ""


def test_decode_encode_round_trip() -> None:
    """UTF-8 (with BOM) and undecodable bytes both round-trip exactly."""
    for data in ("h\u00e9llo\n".encode(), b"\xef\xbb\xbfx\r\n", b"caf\xe9\n\xff"):
        text, encoding = decode_source(data)
        assert encode_source(text, encoding) == data
    assert decode_source(b"caf\xe9")[1] == "latin-1"


# ---------------------------------------------------------------------------------------------- properties

_LINE = st.text(alphabet=st.sampled_from(list("abcxyz =()_:#'\"\t")), min_size=0, max_size=12)


def _unique_lines(draw: st.DrawFn, n_min: int = 3) -> list[str]:
    """Draw a file of distinct lines (so any window is unique and the property is well defined)."""
    lines: list[str] = draw(st.lists(_LINE, min_size=n_min, max_size=30, unique=True))
    return [f"{i}:{line}" for i, line in enumerate(lines)]


@st.composite
def edited_files(draw: st.DrawFn) -> tuple[str, str, list[EditBlock]]:
    """Draw a file, several non-overlapping edits of it, and the blocks describing them."""
    lines = _unique_lines(draw)
    cuts = sorted(draw(st.sets(st.integers(0, len(lines)), min_size=2, max_size=6)))
    new_lines: list[str] = []
    blocks: list[EditBlock] = []
    cursor = 0
    for n, (start, end) in enumerate(zip(cuts[0::2], cuts[1::2], strict=False)):
        new_lines += lines[cursor:start]
        old = lines[start:end]
        new = draw(st.lists(_LINE.map(lambda s, n=n: f"new{n}:{s}"), min_size=0, max_size=4))
        if not old or old == new:
            new_lines += old
        else:
            new_lines += new
            blocks.append(
                EditBlock("".join(x + "\n" for x in old), "".join(x + "\n" for x in new), len(blocks) + 1)
            )
        cursor = end
    new_lines += lines[cursor:]
    final_newline = draw(st.booleans())
    eol = draw(st.sampled_from(["\n", "\r\n"]))

    def render(ls: list[str]) -> str:
        text = eol.join(ls)
        return text + eol if ls and final_newline else text

    order = draw(st.permutations(blocks))
    return render(lines), render(new_lines), list(order)


def _render_answer(blocks: list[EditBlock], fence: bool, crlf: bool) -> str:
    """Write blocks as a model answer."""
    parts = ["Here you go:"]
    for b in blocks:
        parts += ["src/mod.py"] + (["```"] if fence else [])
        parts += [
            "<<<<<<< SEARCH",
            b.search.rstrip("\n"),
            "=======",
            *([b.replace.rstrip("\n")] if b.replace else []),
        ]
        parts += [">>>>>>> REPLACE"] + (["```"] if fence else [])
    text = "\n".join(parts) + "\n"
    return text.replace("\n", "\r\n") if crlf else text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edited_files(), st.booleans(), st.booleans())
def test_property_parse_apply_round_trip(
    case: tuple[str, str, list[EditBlock]], fence: bool, crlf: bool
) -> None:
    """Blocks generated from a file and an edit, as an answer, parse and apply back to the edited file."""
    original, edited, blocks = case
    parsed = parse_edits(_render_answer(blocks, fence, crlf), "src/mod.py")
    assert parsed.errors == () or not blocks
    result = apply_edits(original, parsed.blocks)
    assert result.failures == ()
    assert result.text == edited


@settings(max_examples=150, deadline=None)
@given(edited_files(), st.sampled_from(["    ", "\t", "  "]))
def test_property_reindented_blocks(case: tuple[str, str, list[EditBlock]], indent: str) -> None:
    """A file indented by a prefix, edited with unindented blocks, gets the re-indented result."""
    original, edited, blocks = case

    def indent_text(text: str) -> str:
        return "".join(indent + line if line.strip() else line for line in text.splitlines(keepends=True))

    result = apply_edits(indent_text(original), blocks)
    assert result.failures == ()
    assert result.text == indent_text(edited)
    assert all(a.level in (MatchLevel.EXACT, MatchLevel.INDENTATION) for a in result.applied)


_TOKENS = [
    "<<<<<<< SEARCH",
    "=======",
    ">>>>>>> REPLACE",
    "```",
    "a.py",
    "x",
    "\n",
    "\r\n",
    " ",
    "NO_CHANGES",
    "NO_FINDINGS",
    "### FINDING: high: t",
    "### FINDING: ",
    "<<<<<",
    ">>>>>>>>> replace",
    "# ... existing code ...",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), max_size=60).map("".join))
def test_fuzz_parsers_never_raise(text: str) -> None:
    """Arbitrary marker soup parses without raising, and every block is applicable or refused cleanly."""
    parsed = parse_edits(text, "a.py")
    review = parse_review_answer(text, "a.py")
    assert isinstance(parsed.errors, tuple) and isinstance(review.errors, tuple)
    result = apply_edits("x\na.py\n", parsed.blocks)
    assert result.total == len(parsed.blocks)
    assert len(result.applied) + len(result.failures) + len(result.already_applied) == len(parsed.blocks)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_fuzz_parsers_on_random_text(text: str) -> None:
    """Random unicode never makes either parser raise."""
    parse_edits(text, "a.py")
    parse_review_answer(text, "a.py")


def test_bench_fuzz_runs_briefly() -> None:
    """The long fuzz benchmark runs (briefly here) without a crash."""
    from bench.fuzz_parsers import main

    assert main(["--seconds", "0.5", "--seed", "3"]) == 0
