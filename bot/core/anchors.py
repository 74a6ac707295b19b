"""Turn an applied edit into ```suggestion comments the bot anchors itself, and apply them as GitHub does.

Line numbers come from diffing the head file against the edited file, never from a model. A changed region
becomes a suggestion only when every line it replaces is a RIGHT-side line of one hunk and GitHub's
"commit suggestion" would reproduce the edit exactly; everything else is a leftover patch.
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from bot.core.diff import format_patch, line_ending, split_lines, strip_ending
from bot.core.limits import BODY_MAX_CHARS
from bot.core.types import FileDiff, ReviewComment

__all__ = [
    "AnchorResult",
    "Region",
    "anchor_edit",
    "apply_suggestions",
    "changed_regions",
    "fence_for",
    "read_suggestion",
    "replacement_lines",
    "right_side_hunks",
    "splice",
    "suggestion_body",
]

_OPEN_FENCE = re.compile(r"^(`{3,})suggestion[ \t]*$")


@dataclass(frozen=True, slots=True)
class Region:
    """One change to the head file: 0-based lines ``[start, end)`` replaced by ``lines`` (with endings)."""

    start: int
    end: int
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AnchorResult:
    """Suggestions GitHub will accept, and what could not be one (as regions and as a patch of the head)."""

    suggestions: tuple[ReviewComment, ...]
    leftovers: tuple[Region, ...]
    leftover_patch: str


def anchor_edit(
    path: str, before: str, after: str, file_diff: FileDiff, *, message: str = ""
) -> AnchorResult:
    """Return suggestions turning head text ``before`` into ``after`` on RIGHT lines of ``file_diff``."""
    old, new = split_lines(before), split_lines(after)
    hunks = right_side_hunks(file_diff)
    used: set[int] = set()
    suggestions: list[ReviewComment] = []
    leftovers: list[Region] = []
    for region in changed_regions(old, new):
        comment = _suggest(path, old, region, hunks, used, message)
        # GitHub refuses a comment body over 65,536 characters: such a change travels in the patch.
        if comment is None or len(comment.body) > BODY_MAX_CHARS:
            leftovers.append(region)
            continue
        suggestions.append(comment)
        used.update(range(comment.start_line or comment.line, comment.line + 1))
    patch = format_patch(path, before, "".join(splice(old, leftovers))) if leftovers else ""
    return AnchorResult(tuple(suggestions), tuple(leftovers), patch)


def changed_regions(old: Sequence[str], new: Sequence[str]) -> list[Region]:
    """Return the regions of ``old`` that differ from ``new``, in order (line endings count as content)."""
    # Skip the common head and tail first: an edit usually touches a few lines of a long file, and
    # SequenceMatcher's cost grows with what it has to look at.
    shortest = min(len(old), len(new))
    lo = 0
    while lo < shortest and old[lo] == new[lo]:
        lo += 1
    hi = 0
    while hi < shortest - lo and old[len(old) - 1 - hi] == new[len(new) - 1 - hi]:
        hi += 1
    middle_old, middle_new = old[lo : len(old) - hi], new[lo : len(new) - hi]
    matcher = difflib.SequenceMatcher(None, middle_old, middle_new, autojunk=False)
    return [
        Region(lo + i1, lo + i2, tuple(middle_new[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def right_side_hunks(file_diff: FileDiff) -> dict[int, int]:
    """Return new-file line number -> index of the hunk that holds it, for every RIGHT-commentable line."""
    return {
        line.new_no: index
        for index, hunk in enumerate(file_diff.hunks)
        for line in hunk.lines
        if line.new_no is not None
    }


def suggestion_body(lines: Sequence[str], message: str = "") -> str:
    """Return a comment body with a suggestion block of ``lines``; its fence outruns any backticks inside."""
    fence = fence_for(lines)
    block = "".join(f"{line}\n" for line in lines)
    suggestion = f"{fence}suggestion\n{block}{fence}"
    return f"{message.rstrip()}\n\n{suggestion}" if message.strip() else suggestion


def fence_for(lines: Iterable[str]) -> str:
    """Return a backtick fence longer than any backtick run in ``lines`` (at least three)."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    return "`" * max(3, longest + 1)


def read_suggestion(body: str) -> list[str] | None:
    """Return the lines of the first suggestion block in a comment body, or ``None`` when it has none."""
    rows = body.replace("\r\n", "\n").split("\n")
    for index, row in enumerate(rows):
        opened = _OPEN_FENCE.match(row)
        if opened is None:
            continue
        fence = opened.group(1)
        for end in range(index + 1, len(rows)):
            # CommonMark: a closing fence is at least as long as the opening one, with nothing after it.
            stripped = rows[end].rstrip()
            if stripped.startswith(fence) and set(stripped) == {"`"}:
                return rows[index + 1 : end]
        return None
    return None


def apply_suggestions(text: str, comments: Iterable[ReviewComment]) -> str:
    """Apply every suggestion in ``comments`` to ``text`` as GitHub's "commit suggestions" batch does.

    Lines ``start_line..line`` are replaced by the block's lines; they take the line terminator of the lines
    they replace and the last keeps the last replaced line's (so CRLF and a missing final newline survive).
    Overlapping suggestions are refused, as GitHub refuses "more than one suggestion per line".
    """
    lines = split_lines(text)
    regions: list[Region] = []
    for comment in comments:
        block = read_suggestion(comment.body)
        if block is None:
            continue
        first = comment.start_line or comment.line
        if comment.side != "RIGHT" or not 1 <= first <= comment.line <= len(lines):
            raise ValueError(
                f"{comment.path}: suggestion on lines {first}-{comment.line} is outside the file"
            )
        regions.append(
            Region(first - 1, comment.line, tuple(replacement_lines(lines[first - 1 : comment.line], block)))
        )
    regions.sort(key=lambda r: r.start)
    for previous, current in itertools.pairwise(regions):
        if current.start < previous.end:
            raise ValueError(f"only one suggestion per line can be applied (line {current.start + 1})")
    return "".join(splice(lines, regions))


def splice(lines: Sequence[str], regions: Iterable[Region]) -> list[str]:
    """Return ``lines`` with each non-overlapping region replaced (positions are the original ones)."""
    out = list(lines)
    for region in sorted(regions, key=lambda r: (r.start, r.end), reverse=True):
        out[region.start : region.end] = region.lines
    return out


def _suggest(
    path: str,
    old: Sequence[str],
    region: Region,
    hunks: Mapping[int, int],
    used: set[int],
    message: str,
) -> ReviewComment | None:
    """Return a suggestion expressing ``region`` exactly, or ``None`` when GitHub could not take one."""
    for start, end, content in _candidates(old, region):
        numbers = range(start + 1, end + 1)
        holders = {hunks.get(number) for number in numbers}
        if None in holders or len(holders) != 1 or used.intersection(numbers):
            continue
        block = [strip_ending(line) for line in content]
        if any("\n" in row or "\r" in row for row in block):
            continue  # a bare CR inside a line cannot travel through a comment body
        if replacement_lines(old[start:end], block) != list(content):
            continue  # only the terminators differ (CRLF or the final newline): not expressible
        multi = end - start > 1
        return ReviewComment(
            path=path,
            line=end,
            body=suggestion_body(block, message),
            side="RIGHT",
            start_line=start + 1 if multi else None,
            start_side="RIGHT" if multi else None,
        )
    return None


def _candidates(old: Sequence[str], region: Region) -> list[tuple[int, int, tuple[str, ...]]]:
    """Return line spans (0-based ``[start, end)``) and their new content that would express ``region``."""
    if region.end > region.start:
        return [(region.start, region.end, region.lines)]
    # A pure insertion has no line of its own: suggest the line above (or below) plus the inserted lines.
    spans: list[tuple[int, int, tuple[str, ...]]] = []
    if region.start > 0:
        spans.append((region.start - 1, region.start, (old[region.start - 1], *region.lines)))
    if region.start < len(old):
        spans.append((region.start, region.start + 1, (*region.lines, old[region.start])))
    return spans


def replacement_lines(replaced: Sequence[str], block: Sequence[str]) -> list[str]:
    """Return ``block`` as file lines in place of ``replaced`` (GitHub keeps the file's terminators)."""
    if not block:
        return []
    endings = [line_ending(line) for line in replaced]
    eol = next((ending for ending in endings if ending), "\n")
    last = endings[-1] if endings else eol
    return [row + eol for row in block[:-1]] + [block[-1] + last]
