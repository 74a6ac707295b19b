"""The apply ladder: locate each SEARCH of a parsed answer in its file, write REPLACE there; retry feedback.

The model never gives line numbers: each SEARCH is located in the file by the bot, and it must match exactly
once. Similarity is only used to point a retry at the closest lines, never to apply an edit.

One module of about 600 lines on purpose: locating at each rung, re-indenting REPLACE into the file's
indentation and splicing the file share private types (``_Lines``, ``_Found``, ``_Plan``) under one
``apply_edits``; what could live apart does (parsing in ``answers.py``, format debris in ``debris.py``).
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from bot.core import debris
from bot.core.answers import EditBlock

_AMBIGUOUS_SHOWN = 6

# Unicode punctuation a model may "tidy" into ASCII or back (the last rung of the ladder).
_UNICODE_FOLD = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u00a0": " ",
        "\u2002": " ",
        "\u2003": " ",
        "\u2004": " ",
        "\u2005": " ",
        "\u2006": " ",
        "\u2007": " ",
        "\u2008": " ",
        "\u2009": " ",
        "\u200a": " ",
        "\u202f": " ",
        "\u205f": " ",
        "\u3000": " ",
    }
)

_RAW_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")
_HINT_RATIO = 0.6
_HINT_SCAN_LIMIT = 50_000
_HINT_CHAR_LINES = 40
_HINT_CANDIDATES = 10
_HINT_COMMON = 20


class MatchLevel(StrEnum):
    """The rung of the apply ladder at which a SEARCH matched."""

    EXACT = "exact"
    TRAILING_WHITESPACE = "trailing whitespace ignored"
    INDENTATION = "uniform indentation shift"
    TABS = "spaces read as the file's tabs"
    UNICODE = "unicode punctuation normalised"


class FailureKind(StrEnum):
    """Why a block was refused."""

    MISSING = "missing"
    AMBIGUOUS = "ambiguous"
    IDENTICAL = "identical"
    PLACEHOLDER = "placeholder"
    OVERLAP = "overlap"
    EMPTY_SEARCH = "empty search"
    REINDENT = "reindent"
    DEBRIS = "format debris"


@dataclass(frozen=True, slots=True)
class AppliedBlock:
    """A block that applied: where (1-based lines of the edited file) and at which ladder rung.

    A deletion writes no lines: then ``end_line == start_line - 1`` and ``start_line`` is the line after it.
    ``source_start..source_end`` are the lines of the file the block was located in that it replaced.
    """

    index: int
    level: MatchLevel
    start_line: int
    end_line: int
    source_start: int = 0
    source_end: int = 0


@dataclass(frozen=True, slots=True)
class BlockFailure:
    """A block that did not apply, with a message fit for a retry prompt."""

    index: int
    kind: FailureKind
    message: str
    hint: str = ""


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """The edited text (line endings, final newline and BOM kept) and the fate of every block."""

    text: str
    applied: tuple[AppliedBlock, ...]
    failures: tuple[BlockFailure, ...]
    already_applied: tuple[int, ...]
    total: int

    @property
    def ok(self) -> bool:
        """Return whether every block applied (or was already applied)."""
        return not self.failures


# --------------------------------------------------------------------------------------------------------
# Applying


@dataclass(slots=True)
class _Lines:
    """A file as line contents plus each line's ending, so CRLF and a missing final newline survive."""

    bom: str
    text: list[str]
    ends: list[str]
    eol: str

    @classmethod
    def split(cls, original: str) -> _Lines:
        """Split ``original`` keeping every line's ending and the file's dominant one for new lines."""
        bom = "\ufeff" if original.startswith("\ufeff") else ""
        body = original[len(bom) :]
        text: list[str] = []
        ends: list[str] = []
        # Only LF and CRLF end lines (str.splitlines would also split at form feeds and U+2028).
        for raw in _RAW_LINE.findall(body):
            content = raw[:-2] if raw.endswith("\r\n") else raw[:-1] if raw.endswith("\n") else raw
            text.append(content)
            ends.append(raw[len(content) :])
        crlf = body.count("\r\n")
        eol = "\r\n" if crlf and crlf >= body.count("\n") - crlf else "\n"
        return cls(bom, text, ends, eol)

    def join(self) -> str:
        """Return the file text with the original BOM and line endings."""
        return self.bom + "".join(t + e for t, e in zip(self.text, self.ends, strict=True))


def _content_lines(block_text: str) -> list[str]:
    """Return the lines of a block's LF text (no final empty element)."""
    return block_text.split("\n")[:-1] if block_text else []


def _lead(line: str) -> str:
    """Return a line's leading whitespace."""
    return line[: len(line) - len(line.lstrip())]


# A fit writes a REPLACE line (in SEARCH's indentation) in the file's indentation; None when it cannot.
_Fit = Callable[[str], "str | None"]
# A shift turns a SEARCH/REPLACE line into the file's indentation: ("add", p) prefixes, ("cut", p) removes.
_Shift = tuple[str, str]
# Tab widths tried when SEARCH spells a tab-indented file's indentation with spaces.
_TAB_UNITS = (4, 2, 8, 3)


def _as_is(line: str) -> str | None:
    return line


def _shift_for(file_lines: Sequence[str], search: Sequence[str], fold: Callable[[str], str]) -> _Shift | None:
    """Return the uniform indentation shift that makes ``search`` equal ``file_lines``, or ``None``."""
    shift: _Shift | None = None
    for have, want in zip(file_lines, search, strict=True):
        have, want = fold(have).rstrip(), fold(want).rstrip()
        if not want.strip():
            if have.strip():
                return None
            continue
        if shift is None:
            fl, sl = _lead(have), _lead(want)
            if fl.endswith(sl):
                shift = ("add", fl[: len(fl) - len(sl)])
            elif sl.endswith(fl):
                shift = ("cut", sl[: len(sl) - len(fl)])
            else:
                return None
        op, prefix = shift
        if op == "add":
            if have != prefix + want:
                return None
        elif not (want.startswith(prefix) and want[len(prefix) :] == have):
            return None
    return shift if shift is not None and shift[1] else None


def _shift_fit(shift: _Shift) -> _Fit:
    """Return the fit that applies ``shift`` to a REPLACE line (blank lines untouched)."""
    op, prefix = shift

    def fit(line: str) -> str | None:
        if not line.strip():
            return line
        if op == "add":
            return prefix + line
        return line[len(prefix) :] if line.startswith(prefix) else None

    return fit


def _width(lead: str, unit: int) -> int:
    """Return the columns of leading whitespace, a tab counting ``unit``."""
    return sum(unit if c == "\t" else 1 for c in lead)


def _tabs_for(file_lines: Sequence[str], search: Sequence[str], fold: Callable[[str], str]) -> _Fit | None:
    """Return the fit mapping SEARCH's space indentation onto the file's tab levels, or ``None``."""
    pairs: list[tuple[int, str]] = []
    for have, want in zip(file_lines, search, strict=True):
        have, want = fold(have).rstrip(), fold(want).rstrip()
        if not want.strip():
            if have.strip():
                return None
            continue
        file_lead, lead = _lead(have), _lead(want)
        if file_lead.strip("\t") or have[len(file_lead) :] != want[len(lead) :]:
            return None
        pairs.append((len(file_lead), lead))
    if not pairs or not any(level for level, _ in pairs) or all(" " not in lead for _, lead in pairs):
        return None
    level0, lead0 = pairs[0]
    units = [len(lead0) // level0] if level0 and lead0 and len(lead0) % level0 == 0 else []
    for unit in dict.fromkeys([*units, *_TAB_UNITS]):
        w0 = _width(lead0, unit)
        if all(
            (_width(lead, unit) - w0) % unit == 0 and level - level0 == (_width(lead, unit) - w0) // unit
            for level, lead in pairs
        ):
            return _tab_fit(unit, w0, level0)
    return None


def _tab_fit(unit: int, w0: int, level0: int) -> _Fit:
    """Return the fit writing a REPLACE line's indentation as the file's tabs."""

    def fit(line: str) -> str | None:
        if not line.strip():
            return line
        lead = _lead(line)
        columns = _width(lead, unit) - w0
        level = level0 + columns // unit
        if columns % unit or level < 0:
            return None
        return "\t" * level + line[len(lead) :]

    return fit


def _fold_unicode(line: str) -> str:
    """Return ``line`` with typographic quotes, dashes and spaces folded to ASCII."""
    return line.translate(_UNICODE_FOLD)


def _same(line: str) -> str:
    return line


def _rstrip_folded(line: str) -> str:
    return _fold_unicode(line).rstrip()


def _key(line: str) -> str:
    """Return the text every rung of the ladder agrees on: folded and stripped."""
    return _fold_unicode(line).strip()


@dataclass(frozen=True, slots=True)
class _Found:
    """Where a SEARCH matched (0-based ``[start, end)`` of the file it was located in) and how."""

    start: int
    end: int
    level: MatchLevel
    fit: _Fit
    # SEARCH carries one extra leading space on every line: a diff view's marker column, copied.
    marker: bool = False


def _match(window: Sequence[str], search: Sequence[str]) -> tuple[MatchLevel, _Fit, bool] | None:
    """Return the tightest rung at which ``search`` equals ``window`` and how REPLACE then fits."""
    if all(a == b for a, b in zip(window, search, strict=True)):
        return MatchLevel.EXACT, _as_is, False
    if all(a.rstrip() == b.rstrip() for a, b in zip(window, search, strict=True)):
        return MatchLevel.TRAILING_WHITESPACE, _as_is, False
    for level, fold in ((MatchLevel.INDENTATION, _same), (MatchLevel.UNICODE, _fold_unicode)):
        if level is MatchLevel.UNICODE and all(
            _rstrip_folded(a) == _rstrip_folded(b) for a, b in zip(window, search, strict=True)
        ):
            return level, _as_is, False
        shift = _shift_for(window, search, fold)
        if shift is not None:
            return level, _shift_fit(shift), shift == ("cut", " ")
        tabs = _tabs_for(window, search, fold)
        if tabs is not None:
            return (MatchLevel.TABS if level is MatchLevel.INDENTATION else level), tabs, False
    return None


def _locate(lines: Sequence[str], keys: Sequence[str], search: Sequence[str]) -> list[_Found]:
    """Return every place ``search`` matches ``lines`` at any rung of the ladder.

    Every rung implies equal stripped, folded text on the first non-blank line: only those starts are tried.
    """
    n = len(search)
    anchor = next((j for j, s in enumerate(search) if s.strip()), None)
    if anchor is None:
        starts: Sequence[int] = range(len(lines) - n + 1)
    else:
        key = _key(search[anchor])
        starts = [i - anchor for i in range(anchor, len(lines) - n + 1 + anchor) if keys[i] == key]
    found: list[_Found] = []
    for i in starts:
        matched = _match(lines[i : i + n], search)
        if matched is not None:
            found.append(_Found(i, i + n, *matched))
    return found


def _closest(lines: Sequence[str], search: Sequence[str]) -> str:
    """Describe the lines most like ``search`` (ratio >= 0.6), for a retry prompt; never used to apply."""
    n = len(search)
    if not lines or not n:
        return ""
    # Vote for window starts by lines shared with SEARCH at the same offset; only the best few are compared.
    # Lines common in the file ("}", "return None") say little about where a block belongs: they do not vote.
    frequency = Counter(x.strip() for x in lines)
    offsets: dict[str, list[int]] = {}
    for j, s in enumerate(search):
        if s.strip() and frequency[s.strip()] <= _HINT_COMMON:
            offsets.setdefault(s.strip(), []).append(j)
    votes: Counter[int] = Counter()
    for i, x in enumerate(lines):
        for j in offsets.get(x.strip(), ()):
            votes[max(0, min(i - j, len(lines) - n))] += 1
    candidates = {start for start, _ in votes.most_common(_HINT_CANDIDATES)}
    if not candidates and len(lines) * n <= _HINT_SCAN_LIMIT:
        candidates = set(range(max(1, len(lines) - n + 1)))
    # Characters compare small blocks finely; lines keep big blocks fast.
    by_line = n > _HINT_CHAR_LINES
    target = [s.strip() for s in search]
    best, best_ratio = -1, 0.0
    for start in sorted(candidates):
        window = [x.strip() for x in lines[start : start + n]]
        matcher = (
            difflib.SequenceMatcher(None, window, target, autojunk=False)
            if by_line
            else difflib.SequenceMatcher(None, "\n".join(window), "\n".join(target), autojunk=False)
        )
        if matcher.real_quick_ratio() <= best_ratio or matcher.quick_ratio() <= best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio > best_ratio:
            best, best_ratio = start, ratio
    if best < 0 or best_ratio < _HINT_RATIO:
        return ""
    end = min(len(lines), best + n)
    shown = "\n".join(lines[best:end])
    return f"the closest lines are {best + 1}-{end}:\n{shown}"


def _kept(opcodes: Sequence[tuple[str, int, int, int, int]]) -> int:
    return sum(i2 - i1 for tag, i1, i2, _, _ in opcodes if tag == "equal")


def _rewrite(
    window: Sequence[str], search: Sequence[str], replace: Sequence[str], found: _Found
) -> list[int | str] | str:
    """Return what to write instead of ``window``: an int keeps that file line, a str is a new line.

    Lines the model kept (equal in SEARCH and REPLACE at the rung that matched) keep the file's own bytes;
    only lines it changed come from REPLACE, in the file's indentation. Returns a reason when it cannot.
    """
    key = {
        MatchLevel.EXACT: _same,
        MatchLevel.UNICODE: _rstrip_folded,
    }.get(found.level, str.rstrip)
    by_search = difflib.SequenceMatcher(
        None, [key(s) for s in search], [key(r) for r in replace], autojunk=False
    ).get_opcodes()
    fit = found.fit
    opcodes = by_search
    if fit is not _as_is:
        # REPLACE may be written in SEARCH's indentation or already in the file's: its kept lines tell.
        by_file = difflib.SequenceMatcher(
            None, [key(w) for w in window], [key(r) for r in replace], autojunk=False
        ).get_opcodes()
        if _kept(by_file) > _kept(by_search):
            opcodes, fit = by_file, _as_is
        elif found.marker and not _kept(by_search):
            return (
                "SEARCH has one extra leading space on every line (a diff view's marker column?) and REPLACE "
                "shares no line with it, so its indentation cannot be told; copy the lines without markers"
            )
    out: list[int | str] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            out.extend(range(i1, i2))
            continue
        for line in replace[j1:j2]:
            written = fit(line)
            if written is None:
                return f"REPLACE line {line.strip()!r} could not be re-indented to the file's indentation"
            out.append(written)
    return out


def _same_block(a: EditBlock, b: EditBlock) -> bool:
    """Return whether two blocks propose the same edit (trailing whitespace aside)."""

    def norm(text: str) -> tuple[str, ...]:
        return tuple(line.rstrip() for line in _content_lines(text))

    return norm(a.search) == norm(b.search) and norm(a.replace) == norm(b.replace)


def _candidate(lines: Sequence[str], found: _Found) -> str:
    """Describe one place a SEARCH matched: its lines, its rung, and the line above it (the model sees no
    line numbers, so the line above tells the places apart)."""
    above = next((lines[k].strip() for k in range(found.start - 1, -1, -1) if lines[k].strip()), "")
    where = f", below {above[:60]!r}" if above else ", at the top of the file"
    return f"{_span(found)} ({found.level.value}{where})"


def _span(found: _Found) -> str:
    return (
        f"lines {found.start + 1}-{found.end}" if found.end - found.start > 1 else f"line {found.start + 1}"
    )


@dataclass(frozen=True, slots=True)
class _Plan:
    """A located block: the original lines ``[start, end)`` it replaces and what it writes there."""

    block: EditBlock
    start: int
    end: int
    level: MatchLevel
    lines: list[int | str]


def apply_edits(original: str, blocks: Sequence[EditBlock], *, done: Sequence[EditBlock] = ()) -> ApplyResult:
    """Apply ``blocks``, each located in ``original`` (the file the model saw); failed blocks change nothing.

    Each SEARCH must match exactly one place at every rung of the ladder, and no two blocks may touch the
    same lines. ``done`` are blocks this same fix applied earlier: resending one is "already applied", and
    only that.
    """
    doc = _Lines.split(original)
    keys = [_key(line) for line in doc.text]
    failures: list[BlockFailure] = []
    already: list[int] = []
    plans: list[_Plan] = []

    for block in blocks:

        def fail(kind: FailureKind, message: str, hint: str = "", block: EditBlock = block) -> None:
            failures.append(BlockFailure(block.index, kind, message, hint))

        search = _content_lines(block.search)
        stripped = debris.strip_fence(search, _content_lines(block.replace), doc.text)
        if isinstance(stripped, str):
            fail(FailureKind.DEBRIS, stripped)
            continue
        replace = stripped
        if search == replace:
            fail(FailureKind.IDENTICAL, "REPLACE is identical to SEARCH, so the block changes nothing")
            continue
        if not search:
            if any(line.strip() for line in doc.text) or plans:
                fail(FailureKind.EMPTY_SEARCH, "SEARCH is empty; copy the existing lines to change")
                continue
            plans.append(_Plan(block, 0, len(doc.text), MatchLevel.EXACT, list(replace)))
            continue
        if any(_same_block(block, other) for other in done):
            # This fix applied this very block before (the retry resent it): never apply it twice.
            already.append(block.index)
            continue
        found = _locate(doc.text, keys, search)
        if not found:
            bare = debris.unguttered(search, replace, doc.text)
            if isinstance(bare, str):
                fail(FailureKind.DEBRIS, bare)
                continue
            if bare is not None and (again := _locate(doc.text, keys, bare[0])):
                (search, replace), found = bare, again
        trimmed = debris.trim_blank_edges(search, replace) if not found else None
        if trimmed is not None and (again := _locate(doc.text, keys, trimmed[0])):
            (search, replace), found = trimmed, again
        if not found:
            fail(
                FailureKind.MISSING,
                "SEARCH does not match the file (also tried ignoring trailing whitespace, an indentation "
                "shift, spaces for tabs and unicode punctuation)",
                _closest(doc.text, search),
            )
            continue
        if len(found) > 1:
            places = "; ".join(_candidate(doc.text, f) for f in found[:_AMBIGUOUS_SHOWN])
            fail(
                FailureKind.AMBIGUOUS,
                f"SEARCH matches {len(found)} places ({places}); add surrounding lines so it matches "
                "exactly one",
            )
            continue
        place = found[0]
        gutter = debris.replace_gutter(search, replace, doc.text, place.start)
        if isinstance(gutter, str):
            fail(FailureKind.DEBRIS, gutter)
            continue
        if gutter is not None:
            replace = gutter
        before = "\n".join(doc.text[: place.start]) if '"""' in original or "'''" in original else ""
        lazy = debris.elision(search, replace, before)
        if lazy is not None:
            fail(
                FailureKind.PLACEHOLDER,
                f"REPLACE puts the placeholder {lazy!r} where SEARCH had code; write the complete code, "
                "never elide it",
            )
            continue
        clash = next((p for p in plans if p.start < place.end and place.start < p.end), None)
        if clash is not None:
            if _same_block(block, clash.block):
                already.append(block.index)
            else:
                fail(
                    FailureKind.OVERLAP,
                    f"SEARCH ({_span(place)}) overlaps the lines block {clash.block.index} changes; "
                    "merge the two blocks into one",
                )
            continue
        written = _rewrite(doc.text[place.start : place.end], search, replace, place)
        if isinstance(written, str):
            fail(FailureKind.REINDENT, written)
            continue
        plans.append(
            _Plan(
                block,
                place.start,
                place.end,
                place.level,
                [w + place.start if isinstance(w, int) else w for w in written],
            )
        )

    return _splice(doc, plans, failures, already, len(blocks))


def _splice(
    doc: _Lines, plans: Sequence[_Plan], failures: list[BlockFailure], already: list[int], total: int
) -> ApplyResult:
    """Write every plan into ``doc`` in file order (positions are the original's) and report where."""
    text: list[str] = []
    ends: list[str] = []
    applied: list[AppliedBlock] = []
    cursor = 0
    for plan in sorted(plans, key=lambda p: (p.start, p.end)):
        text.extend(doc.text[cursor : plan.start])
        ends.extend(doc.ends[cursor : plan.start])
        first = len(text) + 1
        for item in plan.lines:
            if isinstance(item, int):
                text.append(doc.text[item])
                ends.append(doc.ends[item] or doc.eol)
            else:
                text.append(item)
                ends.append(doc.eol)
        tail = doc.ends[plan.end - 1] if plan.end > plan.start else doc.eol
        if len(text) >= first:
            # The last written line takes the replaced lines' last ending (a missing final newline stays so).
            ends[-1] = tail
        elif plan.end == len(doc.text) and not tail and ends:
            ends[-1] = ""
        applied.append(AppliedBlock(plan.block.index, plan.level, first, len(text), plan.start + 1, plan.end))
        cursor = plan.end
    text.extend(doc.text[cursor:])
    ends.extend(doc.ends[cursor:])
    result = _Lines(doc.bom, text, ends, doc.eol)
    applied.sort(key=lambda a: a.index)
    return ApplyResult(result.join(), tuple(applied), tuple(failures), tuple(already), total)


def error_feedback(result: ApplyResult, parse_errors: Sequence[str] = ()) -> str:
    """Render the failures of an apply (and of parsing) for the retry prompt, which says what to do next."""
    parts: list[str] = []
    if parse_errors:
        parts.append("Your answer could not be fully parsed:")
        parts.extend(f"- {e}" for e in parse_errors)
    if result.failures:
        parts.append(f"{len(result.failures)} of {result.total} SEARCH/REPLACE blocks failed to apply:")
        for failure in result.failures:
            parts.append(f"- block {failure.index}: {failure.message}.")
            if failure.hint:
                parts.append("  Did you mean these lines? " + failure.hint.replace("\n", "\n    "))
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------------------
# Bytes


def decode_source(data: bytes) -> tuple[str, str]:
    """Decode file bytes as UTF-8 (BOM kept) or else Latin-1, which round-trips any bytes."""
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def encode_source(text: str, encoding: str) -> bytes:
    """Encode edited text back with the encoding :func:`decode_source` found."""
    return text.encode(encoding)
