"""Parsing real diffs into the model, GitHub's per-file patches, and patches written back out."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.diff_parse import mutate, samples
from bot.core.diff import DiffParseError, format_patch, parse_diff, split_lines
from bot.core.types import FileDiff, FileStatus, LineKind

DIFFS = Path(__file__).resolve().parent.parent / "fixtures" / "diffs"


@dataclass(frozen=True)
class Expected:
    """What one fixture's (single) file must parse to."""

    fixture: str
    path: str
    status: FileStatus
    old_path: str | None = None
    binary: bool = False
    modes: tuple[str | None, str | None] = ("100644", "100644")
    hunks: tuple[tuple[int, int, int, int], ...] = ()
    right: frozenset[int] = frozenset()
    left: frozenset[int] = frozenset()
    # (kind, new_no or old_no) of lines git marked "\ No newline at end of file".
    no_newline: tuple[tuple[str, int], ...] = ()


CASES = [
    Expected(
        "modified_one_hunk.diff",
        "requests_html.py",
        FileStatus.MODIFIED,
        hunks=((431, 12, 431, 14),),
        right=frozenset(range(431, 445)),
        left=frozenset(range(431, 443)),
    ),
    Expected(
        "removed_lines_two_hunks.diff",
        "tests/test_requests_html.py",
        FileStatus.MODIFIED,
        hunks=((30, 20, 30, 17), (51, 7, 48, 6)),
        right=frozenset([*range(30, 47), *range(48, 54)]),
        left=frozenset([*range(30, 50), *range(51, 58)]),
    ),
    Expected(
        "added_no_newline_at_eof.diff",
        "pytest.ini",
        FileStatus.ADDED,
        modes=(None, "100644"),
        hunks=((0, 0, 1, 4),),
        right=frozenset(range(1, 5)),
        no_newline=(("+", 4),),
    ),
    Expected(
        "hunk_at_line_1.diff",
        ".travis.yml",
        FileStatus.MODIFIED,
        hunks=((1, 6, 1, 13),),
        right=frozenset(range(1, 14)),
        left=frozenset(range(1, 7)),
    ),
    Expected(
        "hunk_at_end.diff",
        "tail.txt",
        FileStatus.MODIFIED,
        hunks=((5, 4, 5, 4),),
        right=frozenset(range(5, 9)),
        left=frozenset(range(5, 9)),
    ),
    Expected(
        "deleted_binary.diff",
        "docs/source/_static/.DS_Store",
        FileStatus.DELETED,
        binary=True,
        modes=("100644", None),
    ),
    Expected(
        "added_binary.diff",
        "docs/source/_static/requests-html-logo.png",
        FileStatus.ADDED,
        binary=True,
        modes=(None, "100644"),
    ),
    Expected(
        "renamed_pure.diff", "new_name.cfg", FileStatus.RENAMED, old_path="old_name.cfg", modes=(None, None)
    ),
    Expected(
        "renamed_with_change.diff",
        "moved_dst.py",
        FileStatus.RENAMED,
        old_path="moved_src.py",
        hunks=((1, 3, 1, 3),),
        right=frozenset({1, 2, 3}),
        left=frozenset({1, 2, 3}),
    ),
    Expected("mode_change.diff", "run.sh", FileStatus.MODIFIED, modes=("100644", "100755")),
    Expected(
        "crlf.diff",
        "win.txt",
        FileStatus.MODIFIED,
        hunks=((1, 3, 1, 3),),
        right=frozenset({1, 2, 3}),
        left=frozenset({1, 2, 3}),
    ),
    Expected(
        "non_utf8.diff",
        "latin1.txt",
        FileStatus.MODIFIED,
        hunks=((1, 2, 1, 2),),
        right=frozenset({1, 2}),
        left=frozenset({1, 2}),
    ),
    Expected(
        "path_with_spaces.diff",
        "my notes.txt",
        FileStatus.MODIFIED,
        hunks=((1, 2, 1, 3),),
        right=frozenset({1, 2, 3}),
        left=frozenset({1, 2}),
    ),
    Expected(
        "quoted_unicode_path.diff",
        "résumé.md",
        FileStatus.MODIFIED,
        hunks=((1, 1, 1, 2),),
        right=frozenset({1, 2}),
        left=frozenset({1}),
    ),
    Expected(
        "no_newline_both_sides.diff",
        "nonl.txt",
        FileStatus.MODIFIED,
        hunks=((1, 2, 1, 2),),
        right=frozenset({1, 2}),
        left=frozenset({1, 2}),
        no_newline=(("-", 2), ("+", 2)),
    ),
]


def _lines_on(file_diff: FileDiff, side: str) -> set[int]:
    """Return every line number ``commentable`` accepts on ``side``, probing well past the hunks."""
    top = max((h.old_start + h.old_len + h.new_start + h.new_len for h in file_diff.hunks), default=0) + 5
    return {n for n in range(0, top) if file_diff.commentable(n, side)}  # type: ignore[arg-type]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.fixture)
def test_real_diff_parses_to_the_model(case: Expected) -> None:
    diff = parse_diff((DIFFS / case.fixture).read_bytes())
    assert len(diff.files) == 1
    file_diff = diff.files[0]
    assert (file_diff.path, file_diff.old_path, file_diff.status) == (case.path, case.old_path, case.status)
    assert file_diff.is_binary is case.binary
    assert (file_diff.old_mode, file_diff.new_mode) == case.modes
    assert tuple((h.old_start, h.old_len, h.new_start, h.new_len) for h in file_diff.hunks) == case.hunks
    assert _lines_on(file_diff, "RIGHT") == case.right
    assert _lines_on(file_diff, "LEFT") == case.left
    marked = tuple(
        (dl.kind.value, dl.new_no if dl.new_no is not None else dl.old_no)
        for h in file_diff.hunks
        for dl in h.lines
        if dl.no_newline
    )
    assert marked == case.no_newline
    assert diff.file(case.path) is file_diff


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.fixture)
def test_hunk_line_counts_match_their_headers(case: Expected) -> None:
    for hunk in parse_diff((DIFFS / case.fixture).read_bytes()).files[0].hunks:
        assert sum(dl.kind is not LineKind.ADDED for dl in hunk.lines) == hunk.old_len
        assert sum(dl.kind is not LineKind.REMOVED for dl in hunk.lines) == hunk.new_len
        assert [dl.new_no for dl in hunk.lines if dl.new_no is not None] == list(
            range(hunk.new_start, hunk.new_start + hunk.new_len)
        )


# crlf.diff is left out: its content lines end in CRLF, which a CRLF transport would make indistinguishable.
@pytest.mark.parametrize("case", [c for c in CASES if c.fixture != "crlf.diff"], ids=lambda c: c.fixture)
def test_a_diff_sent_through_a_crlf_transport_parses_the_same(case: Expected) -> None:
    original = (DIFFS / case.fixture).read_bytes()
    assert parse_diff(original.replace(b"\n", b"\r\n")) == parse_diff(original)


def test_hunk_for_names_the_hunk_holding_a_line() -> None:
    file_diff = parse_diff((DIFFS / "removed_lines_two_hunks.diff").read_text()).files[0]
    first, second = file_diff.hunks
    assert file_diff.hunk_for(30) is first and file_diff.hunk_for(53) is second
    assert file_diff.hunk_for(47) is None
    assert file_diff.hunk_for(49, "LEFT") is first and file_diff.hunk_for(50, "LEFT") is None


def test_two_files_in_one_diff() -> None:
    diff = parse_diff((DIFFS / "modified_two_files.diff").read_text())
    assert [f.path for f in diff.files] == ["requests_html.py", "tests/test_requests_html.py"]
    assert [f.added_lines for f in diff.files] == [(774,), (293,)]


def test_crlf_lines_lose_only_their_terminator() -> None:
    lines = parse_diff((DIFFS / "crlf.diff").read_bytes()).files[0].hunks[0].lines
    assert [(dl.kind.value, dl.text) for dl in lines] == [
        (" ", "line one"),
        ("-", "line two"),
        ("+", "line 2"),
        (" ", "line three"),
    ]


def test_non_utf8_bytes_survive_round_trip() -> None:
    lines = parse_diff((DIFFS / "non_utf8.diff").read_bytes()).files[0].hunks[0].lines
    assert lines[0].text.encode("utf-8", "surrogateescape") == b"caf\xe9 = 1"


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("a\nb\nc\n", "a\nB\nc\n"),
        ("a\nb", "a\nc"),
        ("a\nb\n", "a\nb"),
        ("", "new\nfile\n"),
        ("gone\n", ""),
        ("x\r\ny\r\n", "x\r\nz\r\n"),
        ("".join(f"{i}\n" for i in range(40)), "".join(f"{i}\n" for i in range(40) if i not in (3, 30))),
    ],
)
def test_format_patch_parses_back_to_the_same_change(before: str, after: str) -> None:
    patch = format_patch("f.txt", before, after)
    file_diff = parse_diff(patch).files[0]
    old, new = split_lines(before), split_lines(after)
    for hunk in file_diff.hunks:
        for dl in hunk.lines:
            if dl.old_no is not None:
                assert old[dl.old_no - 1].rstrip("\r\n") == dl.text
                assert dl.no_newline == (not old[dl.old_no - 1].endswith("\n"))
            if dl.new_no is not None:
                assert new[dl.new_no - 1].rstrip("\r\n") == dl.text
                assert dl.no_newline == (not new[dl.new_no - 1].endswith("\n"))
    assert format_patch("f.txt", before, before) == ""


def test_split_lines_only_splits_on_newline() -> None:
    assert split_lines("a\fb\r\nc\x1cd\ne") == ["a\fb\r\n", "c\x1cd\n", "e"]
    assert split_lines("") == [] and split_lines("\n") == ["\n"]


_SAMPLES = samples()


def check_parse_is_total(data: bytes) -> None:
    """Parse ``data``: either a model comes back or a DiffParseError; anything else is a bug."""
    try:
        diff = parse_diff(data)
    except DiffParseError:
        return
    for file_diff in diff.files:
        for hunk in file_diff.hunks:
            assert all(dl.new_no is None or dl.new_no >= 0 for dl in hunk.lines)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sample=st.sampled_from(_SAMPLES))
def test_fuzz_mutated_real_diffs_raise_only_diff_parse_error(seed: int, sample: bytes) -> None:
    check_parse_is_total(mutate(sample, random.Random(seed)))


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300) | st.text(alphabet="@-+ \\\n,0123456789abd/", max_size=200))
def test_fuzz_random_input_raises_only_diff_parse_error(data: bytes | str) -> None:
    check_parse_is_total(data if isinstance(data, bytes) else data.encode())
