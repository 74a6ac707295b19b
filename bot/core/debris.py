"""Format debris in a model's SEARCH/REPLACE block: what it carries that is not code, found before a block
applies (the apply ladder in ``edits.py`` calls these).

A copied line-number gutter or stray blank lines at SEARCH's edges are repaired when nothing is ambiguous;
a placeholder eliding code, or a Markdown fence REPLACE does not pair with SEARCH, refuses the block.
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Sequence

# Placeholders a lazy model writes instead of code: a comment that says code was left out. Never code itself.
_PLACEHOLDER = re.compile(
    r"^\s*(?:#|//|/\*|<!--|--|;|\*|\{/\*)\s*[(\[]?\s*(?:"
    r"(?:\.\.\.|…)"
    r"|.{0,40}\b(?:rest of|unchanged|existing|same as (?:before|above)|remaining|other (?:\w+ ){0,2}"
    r"(?:code|lines|methods|functions|fields|tests|cases|items|entries)|as before)\b"
    r")",
    re.IGNORECASE,
)
# A line that is code only where it is real content: ``...`` (a stub body, a doctest line) or ``pass``.
_LONE_PLACEHOLDER = re.compile(r"^\s*(?:\.\.\.|…|pass)\s*(?:(?:#|//).*)?$")
# A Markdown fence line, with or without an info string.
_FENCE_LINE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[^`]*$")
# A line-number gutter copied from a numbered view: ``16 | code``, ``16: code``, ``16:code`` (not ``10:30``),
# ``16→code`` or ``16<TAB>code``, with or without leading spaces.
_GUTTER = re.compile(r"^[ \t]*(\d{1,7})(?:[ \t]*[|\u2502\u2192][ \t]?|:(?!\d)[ \t]?|\t)")


def _ellipsis_is_content(replace: Sequence[str], j: int, before: str) -> bool:
    """Return whether the lone ``...`` at ``replace[j]`` is text: a doctest line, or inside a docstring.

    ``before`` is the file text above the block, so a block that starts inside a docstring is seen as such.
    """
    near = [replace[k].strip() for k in (j - 1, j + 1) if 0 <= k < len(replace)]
    if any(line.startswith((">>>", "...")) for line in near):
        return True
    quotes = before.count('"""') + before.count("'''")
    quotes += sum(line.count('"""') + line.count("'''") for line in replace[:j])
    return quotes % 2 == 1


def elision(search: Sequence[str], replace: Sequence[str], before: str) -> str | None:
    """Return the line by which REPLACE elides code it drops (a placeholder in place of SEARCH lines).

    Judged by what the block removes: a comment such as ``# ... rest of methods`` new in REPLACE is never
    code; a lone ``...`` or ``pass`` is, unless it stands where SEARCH lines were dropped.
    """
    matcher = difflib.SequenceMatcher(None, [s.strip() for s in search], [r.strip() for r in replace])
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for j in range(j1, j2):
            line = replace[j]
            if _PLACEHOLDER.search(line):
                return line.strip()
            if i2 > i1 and _LONE_PLACEHOLDER.match(line) and not _ellipsis_is_content(replace, j, before):
                return line.strip()
    return None


def strip_fence(search: Sequence[str], replace: list[str], file_lines: Sequence[str]) -> list[str] | str:
    """Return REPLACE without a Markdown fence SEARCH does not have; say why when that is ambiguous."""
    first = bool(replace) and _FENCE_LINE.match(replace[0]) is not None
    last = (
        len(replace) > 1
        and _FENCE_LINE.match(replace[-1]) is not None
        and replace[-1].strip() in ("```", "~~~")
    )
    if not (first or last) or any(_FENCE_LINE.match(line) for line in search):
        return replace
    if any(_FENCE_LINE.match(line) for line in file_lines):
        return (
            "REPLACE begins or ends with a Markdown fence that SEARCH does not have; in this file a fence "
            "may be content, so it is not guessed at: leave fences out of the block"
        )
    if first and last:
        return replace[1:-1]
    return "REPLACE holds a stray Markdown fence line (a ``` without its pair); leave fences out of the block"


def _gutter(lines: Sequence[str]) -> list[str] | None:
    """Return ``lines`` without a copied gutter (``16 | code``) if every line has one, numbered in order."""
    numbers: list[int] = []
    out: list[str] = []
    for line in lines:
        found = _GUTTER.match(line)
        if found is None:
            return None
        numbers.append(int(found.group(1)))
        out.append(line[found.end() :])
    if not numbers or any(b != a + 1 for a, b in itertools.pairwise(numbers)):
        return None
    return out


def _gutter_shaped(lines: Sequence[str]) -> bool:
    return any(_GUTTER.match(line) for line in lines)


def unguttered(
    search: Sequence[str], replace: Sequence[str], file_lines: Sequence[str] = ()
) -> tuple[list[str], list[str]] | str | None:
    """Return SEARCH and REPLACE without a copied gutter, a reason when either is mixed, or ``None``.

    Called for a SEARCH that matched nowhere: numbers on only some of its lines, in a file with no line of
    that shape, are a gutter copied in part (refused); in a file that has such lines they may be content.
    """
    bare = _gutter(search)
    if bare is None:
        marked = [line for line in search if _GUTTER.match(line)]
        if marked and not _gutter_shaped(file_lines):
            return (
                f"some SEARCH lines start with a line number ({marked[0].strip()[:40]!r}) the file does not "
                "have: a copied line-number gutter? Copy the file's lines without line numbers"
            )
        return None
    flags = [_GUTTER.match(line) is not None for line in replace if line.strip()]
    if all(flags):
        return bare, [line[m.end() :] if (m := _GUTTER.match(line)) else line for line in replace]
    if not any(flags):
        return bare, list(replace)
    return (
        "SEARCH carries a copied line-number gutter and only some REPLACE lines do, so which text is code "
        "cannot be told; copy the file's lines without line numbers"
    )


def trim_blank_edges(search: list[str], replace: list[str]) -> tuple[list[str], list[str]] | None:
    """Return SEARCH without stray blank lines at its edges (and REPLACE without as many), else None.

    A blank first or last SEARCH line the file does not have there is a model's stray newline; REPLACE loses
    the same blank lines only where it has them too (they were copied along).
    """
    lead = next((k for k, line in enumerate(search) if line.strip()), None)
    if lead is None:
        return None
    tail = next(k for k, line in enumerate(reversed(search)) if line.strip())
    if not lead and not tail:
        return None
    replace_lead = next((k for k, line in enumerate(replace) if line.strip()), len(replace))
    replace_tail = next((k for k, line in enumerate(reversed(replace)) if line.strip()), len(replace))
    cut_lead, cut_tail = min(lead, replace_lead), min(tail, replace_tail)
    return search[lead : len(search) - tail], replace[cut_lead : len(replace) - cut_tail]


def replace_gutter(
    search: Sequence[str], replace: Sequence[str], file_lines: Sequence[str], start: int
) -> list[str] | str | None:
    """Judge a gutter on REPLACE only, SEARCH having matched bare at 0-based line ``start`` of the file.

    Returns REPLACE stripped when every line carries the numbers of the lines SEARCH matched (``7 | x`` for a
    SEARCH found at line 7, on in order); a reason when some lines carry a gutter that is not content of this
    file; ``None`` when REPLACE has no gutter of its own (numbers SEARCH or the file has are content).
    """
    # A number past the file's end is no line number of it ("2026: shipped"): never a gutter.
    last = len(file_lines) + len(replace)
    marks = [m if (m := _GUTTER.match(line)) and int(m.group(1)) <= last else None for line in replace]
    numbered = [(j, int(m.group(1))) for j, m in enumerate(marks) if m is not None]
    if not numbered or _gutter_shaped(search):
        return None
    aligned = [number == start + 1 + j for j, number in numbered]
    pairs = list(zip(marks, replace, strict=True))
    if all(aligned) and all(m is not None or not line.strip() for m, line in pairs):
        return [line[m.end() :] if m is not None else line for m, line in pairs]
    if _gutter_shaped(file_lines) and not any(aligned):
        return None  # the file has lines of this shape (a table "1 | a", YAML "200: OK"): content
    first = replace[numbered[0][0]].strip()[:40]
    return (
        f"REPLACE lines start with a line number ({first!r}) that SEARCH does not have: a copied line-number "
        "gutter? Write REPLACE without line numbers (if the numbers are content, put a line of the file that "
        "has them in SEARCH)"
    )
