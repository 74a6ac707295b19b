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
# A line-number gutter copied from a numbered view: ``16 | code``, ``16: code`` or ``16<TAB>code``.
_GUTTER = re.compile(r"^[ \t]*(\d{1,7})(?:[ \t]*\|[ \t]?|: |\t)")


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


def unguttered(search: Sequence[str], replace: Sequence[str]) -> tuple[list[str], list[str]] | str | None:
    """Return SEARCH and REPLACE without a copied gutter, a reason when REPLACE is mixed, or ``None``."""
    bare = _gutter(search)
    if bare is None:
        return None
    marked = [_GUTTER.match(line) is not None for line in replace if line.strip()]
    if all(marked):
        return bare, [line[m.end() :] if (m := _GUTTER.match(line)) else line for line in replace]
    if not any(marked):
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
