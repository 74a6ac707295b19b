"""Suggestions anchored on RIGHT lines of one hunk, applied as GitHub applies them, on real diffs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.core.anchors import (
    AnchorResult,
    Region,
    anchor_edit,
    apply_suggestions,
    read_suggestion,
    splice,
    suggestion_body,
)
from bot.core.diff import parse_diff, split_lines
from bot.core.types import FileDiff, ReviewComment
from tests.stories import head_text, load

# Fixtures whose new side has lines to comment on (binary, deleted and pure renames have none).
TEXT_FIXTURES = [
    "modified_one_hunk.diff",
    "removed_lines_two_hunks.diff",
    "added_no_newline_at_eof.diff",
    "hunk_at_line_1.diff",
    "hunk_at_end.diff",
    "renamed_with_change.diff",
    "crlf.diff",
    "path_with_spaces.diff",
    "no_newline_both_sides.diff",
]


def check_comments(file_diff: FileDiff, comments: tuple[ReviewComment, ...]) -> None:
    """Assert what GitHub requires: RIGHT side, start before end, every line inside one hunk, no overlaps."""
    taken: set[int] = set()
    for comment in comments:
        assert comment.side == "RIGHT" and comment.path == file_diff.path
        first = comment.start_line or comment.line
        if comment.start_line is not None:
            assert comment.start_line < comment.line and comment.start_side == "RIGHT"
        hunk = file_diff.hunk_for(comment.line)
        assert hunk is not None
        assert all(file_diff.hunk_for(n) is hunk for n in range(first, comment.line + 1))
        lines = set(range(first, comment.line + 1))
        assert not lines & taken, "GitHub applies one suggestion per line"
        taken |= lines


def rebase(comments: tuple[ReviewComment, ...], leftovers: tuple[Region, ...]) -> list[ReviewComment]:
    """Return ``comments`` renumbered for the head with the leftover regions already applied."""
    out = []
    for comment in comments:
        first = comment.start_line or comment.line
        shift = sum(len(r.lines) - (r.end - r.start) for r in leftovers if r.end <= first - 1)
        out.append(
            ReviewComment(
                path=comment.path,
                line=comment.line + shift,
                body=comment.body,
                start_line=comment.start_line + shift if comment.start_line else None,
                start_side=comment.start_side,
            )
        )
    return out


def check_round_trip(before: str, after: str, file_diff: FileDiff) -> AnchorResult:
    """Anchor ``before -> after`` and prove suggestions plus leftovers give ``after`` exactly."""
    result = anchor_edit(file_diff.path, before, after, file_diff)
    check_comments(file_diff, result.suggestions)
    with_leftovers = "".join(splice(split_lines(before), result.leftovers))
    assert apply_suggestions(with_leftovers, rebase(result.suggestions, result.leftovers)) == after
    if not result.leftovers:
        assert apply_suggestions(before, result.suggestions) == after and result.leftover_patch == ""
    else:
        patch = parse_diff(result.leftover_patch).files[0]
        assert patch.path == file_diff.path and patch.hunks
    return result


def test_one_changed_line_in_a_hunk_is_one_suggestion() -> None:
    file_diff = load("modified_one_hunk.diff")
    before = head_text(file_diff)
    rows = split_lines(before)
    rows[433] = "        return f'<HTML url={self.url}>'\n"  # line 434 of the head
    result = check_round_trip(before, "".join(rows), file_diff)
    assert result.leftovers == () and result.leftover_patch == ""
    (comment,) = result.suggestions
    assert (comment.line, comment.start_line, comment.start_side) == (434, None, None)
    assert comment.body == "```suggestion\n        return f'<HTML url={self.url}>'\n```"


def test_multi_line_change_uses_start_line() -> None:
    file_diff = load("hunk_at_line_1.diff")
    before = head_text(file_diff)
    after = before.replace('  - "3.7"\n  - "3.8"\n', '  - "3.10"\n')
    (comment,) = check_round_trip(before, after, file_diff).suggestions
    assert (comment.start_line, comment.line, comment.start_side) == (4, 5, "RIGHT")
    assert read_suggestion(comment.body) == ['  - "3.10"']


def test_deleting_lines_is_an_empty_suggestion() -> None:
    file_diff = load("hunk_at_line_1.diff")
    before = head_text(file_diff)
    after = before.replace("matrix:\n", "")
    (comment,) = check_round_trip(before, after, file_diff).suggestions
    assert comment.line == 8 and read_suggestion(comment.body) == []


def test_pure_insertion_suggests_a_neighbour_line_with_it() -> None:
    file_diff = load("hunk_at_line_1.diff")
    before = head_text(file_diff)
    after = before.replace('  - "3.6"\n', '  - "3.5"\n  - "3.6"\n')
    (comment,) = check_round_trip(before, after, file_diff).suggestions
    assert comment.line == 2 and read_suggestion(comment.body) == ["python:", '  - "3.5"']


def test_insertion_at_a_hunk_start_uses_the_line_below() -> None:
    file_diff = load("hunk_at_end.diff")  # hunk covers lines 5-8; line 4 is outside
    before = head_text(file_diff)
    rows = split_lines(before)
    after = "".join([*rows[:4], "inserted\n", *rows[4:]])
    (comment,) = check_round_trip(before, after, file_diff).suggestions
    assert comment.line == 5 and read_suggestion(comment.body) == ["inserted", "fifth"]


def test_lines_outside_the_diff_become_a_leftover_patch() -> None:
    file_diff = load("modified_one_hunk.diff")
    before = head_text(file_diff)
    after = before.replace("filler 10\n", "changed 10\n")
    result = check_round_trip(before, after, file_diff)
    assert result.suggestions == () and len(result.leftovers) == 1
    assert "-filler 10\n+changed 10\n" in result.leftover_patch
    assert result.leftovers == (Region(9, 10, ("changed 10\n",)),)


def test_a_region_across_two_hunks_is_a_leftover() -> None:
    file_diff = load("removed_lines_two_hunks.diff")  # hunks hold RIGHT 30-46 and 48-53
    before = head_text(file_diff)
    rows = split_lines(before)
    after = "".join([*rows[:44], "merged\n", *rows[49:]])
    result = check_round_trip(before, after, file_diff)
    assert result.suggestions == () and len(result.leftovers) == 1


def test_fence_outruns_backticks_in_the_code() -> None:
    assert suggestion_body(["x = '```'"]).startswith("````suggestion\n")
    body = suggestion_body(["`````", "y"], "Use this")
    assert body == "Use this\n\n``````suggestion\n`````\ny\n``````"
    assert read_suggestion(body) == ["`````", "y"]
    file_diff = load("hunk_at_line_1.diff")
    before = head_text(file_diff)
    after = before.replace("install:\n", "install: ```md```\n")
    (comment,) = check_round_trip(before, after, file_diff).suggestions
    assert comment.body.startswith("````suggestion\n")


def test_crlf_file_keeps_its_line_endings() -> None:
    file_diff = load("crlf.diff")
    before = head_text(file_diff, extra=0, eol="\r\n")
    after = before.replace("line 2\r\n", "line two\r\nline 2b\r\n")
    result = check_round_trip(before, after, file_diff)
    assert len(result.suggestions) == 1 and "\r" not in result.suggestions[0].body


def test_changing_only_a_line_ending_cannot_be_a_suggestion() -> None:
    file_diff = load("no_newline_both_sides.diff")
    before = head_text(file_diff)
    assert not before.endswith("\n")
    result = check_round_trip(before, before + "\n", file_diff)
    assert result.suggestions == () and "\\ No newline at end of file" in result.leftover_patch
    crlf = load("crlf.diff")
    text = head_text(crlf, extra=0, eol="\r\n")
    mixed = check_round_trip(text, text.replace("line 2\r\n", "line 2\n"), crlf)
    assert mixed.suggestions == ()


def test_last_line_without_newline_is_replaced_in_place() -> None:
    file_diff = load("no_newline_both_sides.diff")
    before = head_text(file_diff)
    (comment,) = check_round_trip(before, before[:-1] + "w", file_diff).suggestions
    assert comment.line == 2


def test_files_without_right_lines_get_no_suggestions() -> None:
    for fixture in ("deleted_binary.diff", "renamed_pure.diff", "mode_change.diff"):
        result = anchor_edit("f", "a\nb\n", "a\nc\n", load(fixture))
        assert result.suggestions == () and len(result.leftovers) == 1


def test_apply_refuses_overlaps_and_lines_outside_the_file() -> None:
    one = ReviewComment(path="f", line=2, start_line=1, start_side="RIGHT", body=suggestion_body(["x"]))
    two = ReviewComment(path="f", line=2, body=suggestion_body(["y"]))
    with pytest.raises(ValueError, match="one suggestion per line"):
        apply_suggestions("a\nb\n", [one, two])
    with pytest.raises(ValueError, match="outside the file"):
        apply_suggestions("a\n", [two])
    plain = ReviewComment(path="f", line=1, body="just a remark")
    assert read_suggestion(plain.body) is None and apply_suggestions("a\n", [plain]) == "a\n"


_ROWS = st.sampled_from(["x = 1", "", "    return None", "```", "print('``')", "        # note", "filler 3"])


@st.composite
def edits(draw: st.DrawFn, size: int) -> list[tuple[int, int, list[str]]]:
    """Draw up to four non-overlapping (start, end, new rows) edits of a ``size``-line file."""
    points = sorted(draw(st.lists(st.integers(0, size), min_size=2, max_size=8)))
    spans = list(zip(points[::2], points[1::2], strict=False))
    out = []
    for start, end in spans[:4]:
        end = min(end, start + draw(st.integers(0, 4)))
        out.append((start, end, draw(st.lists(_ROWS, max_size=4))))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fixture=st.sampled_from(TEXT_FIXTURES), data=st.data())
def test_random_edits_round_trip_through_suggestions(fixture: str, data: st.DataObject) -> None:
    file_diff = load(fixture)
    eol = "\r\n" if fixture == "crlf.diff" else "\n"
    before = head_text(file_diff, eol=eol)
    rows = split_lines(before)
    chosen = data.draw(edits(len(rows)))
    regions = [Region(s, e, tuple(row + eol for row in new)) for s, e, new in chosen]
    after = "".join(splice(rows, regions))
    check_round_trip(before, after, file_diff)
