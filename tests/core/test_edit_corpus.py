"""Malformed and tricky model answers, one case per class of issue 14 (sections 3 and 4), applied by the core.

Every case is our own reduction of a shape reported in public material; the comment on each names where the
shape was seen. No code is copied from those sources: files and answers are written for these tests.
"""

from __future__ import annotations

from bot.core.answers import EditBlock
from bot.core.edits import ApplyResult, FailureKind, MatchLevel, apply_edits


def block(search: str, replace: str, index: int = 1) -> EditBlock:
    """Build a block from LF text (a final newline is added to non-empty sides)."""
    return EditBlock(search + "\n" if search else "", replace + "\n" if replace else "", index)


def refused(result: ApplyResult, kind: FailureKind) -> str:
    """Assert the single block was refused as ``kind`` and nothing changed; return the message."""
    assert [f.kind for f in result.failures] == [kind], result.failures
    assert not result.applied
    return result.failures[0].message


# ---------------------------------------------------------------------------------------------------------
# 3. Apply where the model meant, and only there

SHAPES = """class Shape:
    def area(self):
        raise NotImplementedError


class Square(Shape):
    def __init__(self, side):
        self.side = side

    def describe(self):
        return f"{type(self).__name__} with area {self.area()}"

    def area(self):
        return self.side ** 2
"""


def test_move_method_to_base_class_locates_both_blocks_in_the_file_the_model_saw() -> None:
    """Insert above, delete below: the second SEARCH is unique in the file the model saw, though after the
    first block it would match twice. Shape of Roo-Code PR #2899 (multi-block diffs, issue #1559)."""
    describe = '    def describe(self):\n        return f"{type(self).__name__} with area {self.area()}"\n'
    insert = block(
        "class Shape:\n    def area(self):\n        raise NotImplementedError",
        "class Shape:\n    def area(self):\n        raise NotImplementedError\n\n" + describe.rstrip("\n"),
    )
    delete = block(describe, "", 2)
    result = apply_edits(SHAPES, [insert, delete])
    assert result.ok, result.failures
    assert result.text.count("def describe") == 1
    assert result.text.index("def describe") < result.text.index("class Square")
    assert "self.side = side\n\n    def area(self):\n        return self.side ** 2\n" in result.text


def test_overlapping_blocks_are_refused() -> None:
    """Two blocks aimed at the same lines (Aider tests/basic/test_editblock.py, several same-file blocks)."""
    original = "a = 1\nb = 2\nc = 3\n"
    result = apply_edits(
        original, [block("a = 1\nb = 2", "a = 10\nb = 2"), block("b = 2\nc = 3", "b = 2\nc = 30", 2)]
    )
    assert [(f.index, f.kind) for f in result.failures] == [(2, FailureKind.OVERLAP)]


TWO_LEVELS = """def close(conn):
    conn.flush()
    return conn.shutdown()


class Pool:
    def close(self, conn):
        conn.flush()
        return conn.shutdown()
"""


def test_same_lines_at_two_indentation_levels_are_ambiguous_across_rungs() -> None:
    """SEARCH has the module function's text with the method's indentation: the exact rung matches the
    method, the indentation rung the function. Refuse and name both. Aider tests/basic/test_editblock.py's
    missing-leading-whitespace cases, turned around."""
    search = "        conn.flush()\n        return conn.shutdown()"
    result = apply_edits(
        TWO_LEVELS, [block(search, "        conn.flush()\n        return conn.shutdown(wait=True)")]
    )
    message = refused(result, FailureKind.AMBIGUOUS)
    assert "lines 2-3 (uniform indentation shift, below 'def close(conn):')" in message
    assert "lines 8-9 (exact, below 'def close(self, conn):')" in message


def test_a_unique_exact_match_still_applies() -> None:
    """With context that exists once at any rung, the same edit applies where meant."""
    search = "    def close(self, conn):\n        conn.flush()\n        return conn.shutdown()"
    result = apply_edits(TWO_LEVELS, [block(search, search.replace("shutdown()", "shutdown(wait=True)"))])
    assert result.ok and result.applied[0].level is MatchLevel.EXACT
    assert result.text.count("shutdown(wait=True)") == 1 and result.text.index("shutdown(wait=True)") > 60


GO_FILE = (
    "package cfg\n\ntype Matrix struct {\n\tURL   string\n\tRooms []string\n}\n\n"
    'func (m Matrix) Valid() bool {\n\tif m.URL == "" {\n\t\treturn false\n\t}\n\treturn true\n}\n'
)


def test_tab_indented_go_file_with_spaces_in_search() -> None:
    """SEARCH written with spaces for a tab-indented Go file (Roo-Code #12199 shows such a struct); REPLACE is
    written back with the file's tabs."""
    search = 'func (m Matrix) Valid() bool {\n    if m.URL == "" {\n        return false\n    }'
    replace = (
        'func (m Matrix) Valid() bool {\n    if m.URL == "" || len(m.Rooms) == 0 {\n'
        "        return false\n    }"
    )
    result = apply_edits(GO_FILE, [block(search, replace)])
    assert result.ok, result.failures
    assert result.applied[0].level is MatchLevel.TABS
    assert '\tif m.URL == "" || len(m.Rooms) == 0 {\n\t\treturn false\n\t}\n' in result.text


def test_makefile_recipe_keeps_its_tab() -> None:
    """A Makefile recipe line must start with a tab; SEARCH/REPLACE in two-space indentation."""
    original = "test:\n\tpytest -q\n\nlint:\n\truff check .\n"
    result = apply_edits(
        original, [block("lint:\n  ruff check .", "lint:\n  ruff check .\n  ruff format --check .")]
    )
    assert result.ok, result.failures
    assert result.text.endswith("lint:\n\truff check .\n\truff format --check .\n")


def test_kept_lines_keep_the_files_own_bytes_after_a_tolerant_match() -> None:
    """A PHP string with a typographic apostrophe, an NBSP, an em dash, tabs and Markdown hard breaks: the
    model "tidied" them to ASCII in lines it did not mean to change; only the changed line comes from REPLACE.
    (Straight and curly quotes confused by an edit tool, as a coding agent's public issue tracker reports.)"""
    php = "<?php\n$msg = 'It\u2019s\u00a0done \u2014 really';\n\t$count = 1;\n"
    result = apply_edits(
        php,
        [
            block(
                "$msg = 'It's done - really';\n    $count = 1;",
                "$msg = 'It's done - really';\n    $count = 2;",
            )
        ],
    )
    assert result.ok, result.failures
    assert result.text == "<?php\n$msg = 'It\u2019s\u00a0done \u2014 really';\n\t$count = 2;\n"
    markdown = "Roses are red,  \nviolets are blue,  \nthe end.\n"
    result = apply_edits(
        markdown,
        [
            block(
                "Roses are red,\nviolets are blue,\nthe end.", "Roses are red,\nviolets are blue,\nthe start."
            )
        ],
    )
    assert result.ok, result.failures
    assert result.applied[0].level is MatchLevel.TRAILING_WHITESPACE
    assert result.text == "Roses are red,  \nviolets are blue,  \nthe start.\n"


# ---------------------------------------------------------------------------------------------------------
# 4. Elisions, judged by what the block removes

STRUCT = "type Config struct {\n\tName    string\n\tTimeout int\n\tRetries int\n}\n"


def test_elision_comment_in_place_of_fields_is_refused() -> None:
    """``// (unchanged fields...)`` where fields were (google-gemini/gemini-cli #4037, PR #4426)."""
    search = "type Config struct {\n\tName    string\n\tTimeout int\n\tRetries int\n}"
    replace = "type Config struct {\n\t// (unchanged fields...)\n\tRetries int\n\tBackoff int\n}"
    refused(apply_edits(STRUCT, [block(search, replace)]), FailureKind.PLACEHOLDER)


def test_elision_of_methods_and_list_items_is_refused() -> None:
    """``# (rest of methods ...)`` and ``<!-- rest of list unchanged -->`` standing in for removed lines."""
    py = "class A:\n    def a(self):\n        return 1\n\n    def b(self):\n        return 2\n"
    replace = "class A:\n    def a(self):\n        return 10\n\n    # (rest of methods ...)"
    refused(apply_edits(py, [block(py.rstrip("\n"), replace)]), FailureKind.PLACEHOLDER)
    html = "<ul>\n  <li>one</li>\n  <li>two</li>\n  <li>three</li>\n</ul>\n"
    replace = "<ul>\n  <li>zero</li>\n  <!-- rest of list unchanged -->\n</ul>"
    refused(apply_edits(html, [block(html.rstrip("\n"), replace)]), FailureKind.PLACEHOLDER)


def test_bare_ellipsis_for_removed_code_is_refused_even_when_the_file_has_one() -> None:
    """A stub elsewhere in the file does not make a ``...`` standing in for removed code acceptable."""
    original = (
        "class Store(Protocol):\n    def get(self, key: str) -> bytes:\n        ...\n\n\n"
        "def load(store, key):\n    data = store.get(key)\n    check(data)\n    return parse(data)\n"
    )
    search = "def load(store, key):\n    data = store.get(key)\n    check(data)\n    return parse(data)"
    replace = "def load(store: Store, key: str):\n    ...\n    return parse(data)"
    refused(apply_edits(original, [block(search, replace)]), FailureKind.PLACEHOLDER)


def test_ellipsis_that_is_content_is_accepted() -> None:
    """A doctest continuation, a stub body the SEARCH already had, and ``...`` as text inside a docstring."""
    doctest = 'def f():\n    """\n    >>> for i in range(2):\n    ...     print(i)\n    0\n    1\n    """\n'
    search = "    >>> for i in range(2):\n    ...     print(i)\n    0\n    1"
    replace = "    >>> for i in range(2):\n    ...     print(i)\n    ...\n    0\n    1"
    assert apply_edits(doctest, [block(search, replace)]).ok
    stub = "class P(Protocol):\n    def f(self) -> int:\n        ...\n"
    assert apply_edits(
        stub, [block("    def f(self) -> int:\n        ...", "    def f(self) -> str:\n        ...")]
    ).ok
    doc = 'def wait():\n    """Wait.\n\n    Polls until ready.\n    """\n'
    result = apply_edits(doc, [block("    Polls until ready.", "    Polls, then\n    ...\n    until ready.")])
    assert result.ok, result.failures


# ---------------------------------------------------------------------------------------------------------
# 4. Format debris, in every file type


def test_fence_around_replace_only_is_stripped_in_code() -> None:
    """REPLACE wrapped in ```python ... ``` while SEARCH is bare (Aider-AI/aider #3811: blocks and fences)."""
    original = "x = 1\ny = 2\n"
    result = apply_edits(original, [block("y = 2", "```python\ny = 3\n```")])
    assert result.ok and result.text == "x = 1\ny = 3\n"


def test_fence_around_replace_in_markdown_is_refused() -> None:
    """In a file that has fences, a fence in REPLACE may be content: refused, not guessed."""
    original = "# Use\n\n```sh\nmake\n```\n\nThen run it.\n"
    refused(
        apply_edits(original, [block("Then run it.", "```\nThen run it twice.\n```")]), FailureKind.DEBRIS
    )
    refused(apply_edits("a: 1\nb: 2\n", [block("b: 2", "b: 3\n```")]), FailureKind.DEBRIS)


def test_copied_line_number_gutter_is_stripped() -> None:
    """``16 | - [x] maps``: a numbered view copied into both sides (Roo-Code #2990, PR #3329; PR #2453)."""
    original = "# Tasks\n\n- [ ] tiles\n- [ ] maps\n- [ ] routes\n"
    result = apply_edits(
        original, [block("4 | - [ ] maps\n5 | - [ ] routes", "4 | - [x] maps\n5 | - [ ] routes")]
    )
    assert result.ok, result.failures
    assert result.text == "# Tasks\n\n- [ ] tiles\n- [x] maps\n- [ ] routes\n"
    only_search = apply_edits(original, [block("4 | - [ ] maps", "- [x] maps")])
    assert only_search.ok and "- [x] maps\n" in only_search.text


def test_gutter_on_some_replace_lines_is_refused() -> None:
    """Numbers on some REPLACE lines only: which text is code cannot be told."""
    original = "a\nb\nc\n"
    refused(apply_edits(original, [block("2 | b\n3 | c", "2 | B\nC")]), FailureKind.DEBRIS)


def test_diff_marker_space_in_search_does_not_deindent_replace() -> None:
    """SEARCH copied from a diff view keeps the one-space marker column; REPLACE is in the file's own
    indentation and must not lose a space (Roo-Code #1559 discusses indentation lost this way)."""
    original = "def f():\n    a = 1\n    return a\n"
    search = " def f():\n     a = 1\n     return a"
    replace = "def f():\n    a = 2\n    return a"
    result = apply_edits(original, [block(search, replace)])
    assert result.ok, result.failures
    assert result.text == "def f():\n    a = 2\n    return a\n"
    marked = apply_edits(original, [block(search, " def f():\n     a = 2\n     return a")])
    assert marked.ok and marked.text == "def f():\n    a = 2\n    return a\n"
    unknown = apply_edits(original, [block(search, "def g():\n  return 2")])
    refused(unknown, FailureKind.REINDENT)


def test_stray_blank_line_at_the_edge_of_search_is_trimmed() -> None:
    """SEARCH starts with a blank line the file does not have there (Aider tests/basic/test_editblock.py,
    the blank-line case of its issue #25); a blank line the file does have is kept as content."""
    original = "    line1\n    line2\n    line3\n"
    result = apply_edits(original, [block("\n    line1\n    line2", "    new_line1\n    new_line2")])
    assert result.ok and result.text == "    new_line1\n    new_line2\n    line3\n"
    both = apply_edits(original, [block("\n    line2\n", "\n    line2b\n")])
    assert both.ok and both.text == "    line1\n    line2b\n    line3\n"


def test_aider_style_file_name_layouts_name_the_target() -> None:
    """The name inside the fence right above SEARCH, a name mangled into its own fence (Aider's
    test_deepseek_coder_v2_filename_mangling), and two blocks in one fence under one name."""
    from bot.core.answers import parse_edits

    inside = "```text\nfoo.txt\n<<<<<<< SEARCH\nTwo\n=======\nToo\n>>>>>>> REPLACE\n```\n"
    mangled = " ```python\nfoo.txt\n```\n```python\n<<<<<<< SEARCH\none\n=======\ntwo\n>>>>>>> REPLACE\n```\n"
    shared = (
        "```text\nfoo.txt\n<<<<<<< SEARCH\none\n=======\ntwo\n>>>>>>> REPLACE\n\n...\n\n"
        "<<<<<<< SEARCH\nthree\n=======\nfour\n>>>>>>> REPLACE\n```\n"
    )
    for text, count in ((inside, 1), (mangled, 1), (shared, 2)):
        assert len(parse_edits(text, "docs/foo.txt").blocks) == count
        refused = parse_edits(text, "docs/bar.txt")
        assert refused.blocks == () and len(refused.errors) == count


# ---------------------------------------------------------------------------------------------------------
# A gutter on one side only (issue 29): stripped when unambiguous, refused otherwise, never committed.

CHECKLIST = "# Release\n\nSteps:\n\n- [ ] tag\n- [ ] build\n- [ ] ship it\n- [ ] announce\n"


def test_gutter_on_every_replace_line_only_is_stripped_when_it_numbers_the_lines_search_matched() -> None:
    """SEARCH bare, REPLACE ``7 | - [x] ship it``: the numbers are the file's own line numbers, so they are a
    gutter copied from a numbered view (Roo-Code #2990 shows gutters in REPLACE), whatever the separator."""
    for gutter in ("7 | ", "7| ", "  7 | ", "7: ", "7:", "7\t", "     7\u2192", "7 \u2502 ", "7\t| "):
        result = apply_edits(CHECKLIST, [block("- [ ] ship it", f"{gutter}- [x] ship it")])
        assert result.ok, (gutter, result.failures)
        assert result.text == CHECKLIST.replace("- [ ] ship it", "- [x] ship it"), gutter
    numbered = "6 | - [x] build\n7 | - [x] ship it\n8 | - [ ] notes"
    two = apply_edits(CHECKLIST, [block("- [ ] build\n- [ ] ship it", numbered)])
    assert two.ok and "- [x] build\n- [x] ship it\n- [ ] notes\n- [ ] announce\n" in two.text


def test_gutter_on_replace_only_that_numbers_other_lines_is_refused() -> None:
    """Numbers that are not where SEARCH matched, or on some lines only: refused with what to do instead."""
    for replace in ("3 | - [x] ship it", "7 | - [x] ship it\n- [ ] notes", "- [x] ship it\n8 | - [ ] notes"):
        message = refused(apply_edits(CHECKLIST, [block("- [ ] ship it", replace)]), FailureKind.DEBRIS)
        assert "without line numbers" in message and "SEARCH" in message


def test_gutter_on_replace_only_is_judged_in_files_no_parser_checks() -> None:
    """Text, YAML comments and reST: nothing downstream would catch the gutter, so the rule must."""
    text = "Notes\n\nfirst\nsecond\n"
    stripped = apply_edits(text, [block("second", "4 | second, revised")])
    assert stripped.ok and stripped.text == "Notes\n\nfirst\nsecond, revised\n"
    yaml = "retries: 3\n# keep it low\ntimeout: 10\n"
    stripped = apply_edits(yaml, [block("# keep it low", "2: # keep it low: the API rate-limits")])
    assert stripped.ok and stripped.text == "retries: 3\n# keep it low: the API rate-limits\ntimeout: 10\n"
    rst = "Title\n=====\n\n.. note:: old\n"
    refused(apply_edits(rst, [block(".. note:: old", "1 | .. note:: new")]), FailureKind.DEBRIS)


def test_numbers_that_are_content_are_kept() -> None:
    """A Markdown table whose rows start with a number and a bar, YAML keyed by status codes, a year in a
    changelog: numbers SEARCH or the file has, or no line number of the file, are content."""
    table = "id | name\n-- | --\n1 | ada\n2 | bob\n"
    added = apply_edits(table, [block("2 | bob", "2 | bob\n3 | cy")])
    assert added.ok and added.text == table + "3 | cy\n"
    after_header = apply_edits(table, [block("-- | --", "-- | --\n0 | root")])
    assert after_header.ok and after_header.text == "id | name\n-- | --\n0 | root\n1 | ada\n2 | bob\n"
    codes = "codes:\n  200: OK\n  404: Not Found\n"
    yaml = apply_edits(codes, [block("  404: Not Found", "  404: Not Found\n  410: Gone")])
    assert yaml.ok and yaml.text == codes + "  410: Gone\n"
    log = "Changelog\n\nolder\n"
    year = apply_edits(log, [block("Changelog", "Changelog\n\n2026: shipped")])
    assert year.ok and year.text == "Changelog\n\n2026: shipped\n\nolder\n"
    times = apply_edits("Agenda\n", [block("Agenda", "Agenda\n10:30 standup")])
    assert times.ok and times.text == "Agenda\n10:30 standup\n"


def test_gutter_on_some_search_lines_only_is_refused_as_debris() -> None:
    """A SEARCH numbered on some lines only matches nothing; the reply says why, not just "missing"."""
    message = refused(
        apply_edits(CHECKLIST, [block("6 | - [ ] build\n- [ ] ship it", "- [x] build\n- [ ] ship it")]),
        FailureKind.DEBRIS,
    )
    assert "line number" in message
    table = "id | name\n1 | ada\n"
    refused(apply_edits(table, [block("1 | ada\nnope", "1 | ada")]), FailureKind.MISSING)


def test_right_aligned_gutters_of_real_numbered_views_on_replace_only_are_stripped() -> None:
    """Numbered views as tools print them: right-aligned ``  9 | x``/`` 10 | y`` (Roo-Code #1628, from its
    read_file), ``cat -n``'s six columns and a tab, ``N: text`` (a read tool numbering each line, TeXRA PR
    #1336); copied into REPLACE only, across the width change from 9 to 10."""
    lines = [f"item {n}" for n in range(1, 13)]
    original = "\n".join(lines) + "\n"
    search = "item 9\nitem 10"
    for left, right in (("  9 | ", " 10 | "), ("     9\t", "    10\t"), ("9: ", "10: ")):
        result = apply_edits(original, [block(search, f"{left}item nine\n{right}item ten")])
        assert result.ok, (left, result.failures)
        assert result.text == original.replace("item 9\nitem 10\n", "item nine\nitem ten\n"), left
