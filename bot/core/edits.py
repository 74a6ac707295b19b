"""SEARCH/REPLACE edits: tolerant parsing of model answers, the apply ladder, and retry feedback.

The model never gives line numbers: each SEARCH is located in the file by the bot, and it must match exactly
once. Similarity is only used to point a retry at the closest lines, never to apply an edit.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from bot.core.model import Severity

# Markers: 5-9 characters, trailing spaces tolerated (models drift on the count).
_HEAD = re.compile(r"^[ \t]*<{5,9}[ \t]*SEARCH[ \t>]*$", re.IGNORECASE)
_DIVIDER = re.compile(r"^[ \t]*={5,9}[ \t]*$")
_TAIL = re.compile(r"^[ \t]*>{5,9}[ \t]*REPLACE[ \t<]*$", re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_PATH_DECORATION = " \t*#`:'\""
_PATH_LIKE = re.compile(r"^(?:[\w.+@~-]+/)*[\w+@~-][\w.+@~-]*\.[\w+-]+$|^(?:[\w.+@~-]+/)+[\w.+@~-]+$")
_PATH_PREFIX = re.compile(r"^(?:file|path|filename)\s*:\s*", re.IGNORECASE)
# "### FINDING: high: title", tolerating bold instead of a heading and a number ("FINDING 2:").
_FINDING = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?\**FINDING(?:[ \t]*#?\d+)?\**[ \t]*:?\**[ \t]*(.*)$", re.IGNORECASE
)
_SEVERITY_WORD = re.compile(r"^\[?([A-Za-z]+)\]?[ \t]*(?::|-|—|\|)[ \t]*(.*)$")
_SENTINEL_LINE = re.compile(r"^[ \t`*]*(NO_CHANGES|NO_FINDINGS)[ \t`*.]*$")

SEVERITIES: tuple[Severity, ...] = ("critical", "high", "medium", "low", "info")
DEFAULT_SEVERITY: Severity = "medium"
# Words models use instead of the five asked for; anything else falls back to DEFAULT_SEVERITY with a note.
_SEVERITY_SYNONYMS: dict[str, Severity] = {
    "blocker": "critical",
    "severe": "critical",
    "error": "high",
    "major": "high",
    "moderate": "medium",
    "warning": "medium",
    "warn": "medium",
    "minor": "low",
    "nit": "low",
    "nitpick": "low",
    "style": "low",
    "suggestion": "info",
    "note": "info",
    "information": "info",
}

# Placeholders a lazy model writes instead of code; refused when they are new in REPLACE.
_PLACEHOLDER = re.compile(
    r"^\s*(?:#|//|/\*|<!--|--|;|\*)\s*(?:\.\.\.|…|\[\.\.\.\])"
    r"|(?:#|//|/\*|<!--|--)\s*.{0,20}\b(?:rest of (?:the )?(?:code|file|function|class|method)"
    r"|(?:existing|unchanged|remaining|previous|original|same) (?:code|lines|content|implementation))\b",
    re.IGNORECASE,
)
_LONE_ELLIPSIS = re.compile(r"^\s*(?:\.\.\.|…)\s*$")

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


@dataclass(frozen=True, slots=True)
class EditBlock:
    """One SEARCH/REPLACE pair, LF-normalised; ``line`` is where it starts in the model's answer."""

    search: str
    replace: str
    index: int
    line: int = 0


@dataclass(frozen=True, slots=True)
class ParsedEdits:
    """A parsed fix answer: its blocks, whether it said NO_CHANGES, and what could not be parsed."""

    blocks: tuple[EditBlock, ...]
    no_changes: bool
    errors: tuple[str, ...]
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """Return whether the answer parsed cleanly into blocks or a NO_CHANGES."""
        return not self.errors and (bool(self.blocks) or self.no_changes)


@dataclass(frozen=True, slots=True)
class ReviewFinding:
    """One finding of a review answer: severity, one-line title, short prose, optional fix block."""

    severity: Severity
    title: str
    body: str
    block: EditBlock | None = None
    # Set when the model's severity word was not one of ours and was mapped.
    note: str = ""


@dataclass(frozen=True, slots=True)
class ReviewAnswer:
    """A parsed review answer: findings, whether it said NO_FINDINGS, and parse errors."""

    findings: tuple[ReviewFinding, ...]
    no_findings: bool
    errors: tuple[str, ...]


class MatchLevel(StrEnum):
    """The rung of the apply ladder at which a SEARCH matched."""

    EXACT = "exact"
    TRAILING_WHITESPACE = "trailing whitespace ignored"
    INDENTATION = "uniform indentation shift"
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


@dataclass(frozen=True, slots=True)
class AppliedBlock:
    """A block that applied: where (1-based lines of the edited file) and at which ladder rung.

    A deletion writes no lines: then ``end_line == start_line - 1`` and ``start_line`` is the line after it.
    """

    index: int
    level: MatchLevel
    start_line: int
    end_line: int


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

    @property
    def changed_lines(self) -> tuple[tuple[int, int], ...]:
        """Return the (start, end) line ranges of the edited file the applied blocks wrote, in file order."""
        return tuple(sorted((a.start_line, a.end_line) for a in self.applied))


# --------------------------------------------------------------------------------------------------------
# Target paths


def check_target_path(path: str) -> str | None:
    """Return why an edit of ``path`` is refused (outside the repository, a workflow), else ``None``."""
    if not path or not path.strip():
        return "the path is empty"
    if "\x00" in path or any(ord(c) < 32 for c in path):
        return "the path contains control characters"
    if "\\" in path:
        return "the path contains a backslash"
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path) or path.startswith("~"):
        return f"{path!r} is absolute, not a path inside the repository"
    segments = path.split("/")
    if any(seg in ("", ".", "..") for seg in segments):
        return f"{path!r} has empty, '.' or '..' segments, so it may point outside the repository"
    lowered = [seg.lower() for seg in segments]
    if lowered[0] == ".git":
        return f"{path!r} is inside .git"
    if lowered[:2] == [".github", "workflows"]:
        return f"{path!r} is a GitHub Actions workflow; Spark never edits workflows"
    return None


def _normalise_path(path: str) -> str:
    """Return ``path`` without leading ``./`` segments, for comparing with the target."""
    path = path.strip()
    while path.startswith("./"):
        path = path[2:]
    return path


def _names_target(named: str, target: str) -> bool:
    """Return whether a path line names the target: itself, a trailing part of it, or its a/ b/ form."""
    return named == target or target.endswith("/" + named) or named in (f"a/{target}", f"b/{target}")


def _path_line(line: str) -> str | None:
    """Return the file path a line names (``path.py``, ``**path.py**``, ``File: path.py``), else ``None``."""
    candidate = _PATH_PREFIX.sub("", line.strip().strip(_PATH_DECORATION))
    candidate = _normalise_path(candidate.strip(_PATH_DECORATION))
    if candidate and _PATH_LIKE.match(candidate):
        return candidate
    return None


# --------------------------------------------------------------------------------------------------------
# Parsing


@dataclass(slots=True)
class _Scan:
    """What one pass over answer lines found."""

    blocks: list[EditBlock]
    errors: list[str]
    prose: list[str]
    truncated: bool


def _block_text(lines: Sequence[str]) -> str:
    """Join block lines into LF text with a final newline (empty for no lines)."""
    return "".join(line + "\n" for line in lines)


def _scan(lines: Sequence[str], target_path: str, first_index: int = 1, line_offset: int = 0) -> _Scan:
    """Find SEARCH/REPLACE blocks in ``lines``; collect errors and the prose outside blocks."""
    result = _Scan([], [], [], False)
    target = _normalise_path(target_path)
    state = "outside"
    search: list[str] = []
    replace: list[str] = []
    start = 0
    refused = ""
    index = first_index

    def named_path(at: int) -> str | None:
        """Return the path line just before the block at ``at`` (skipping blanks and one fence)."""
        j = at - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0 and _FENCE.match(lines[j]):
            j -= 1
            while j >= 0 and not lines[j].strip():
                j -= 1
        if j < 0 or _TAIL.match(lines[j]) or _FENCE.match(lines[j]):
            return None
        return _path_line(lines[j])

    def open_block(at: int) -> None:
        nonlocal state, search, replace, start, refused
        state, search, replace, start, refused = "search", [], [], at, ""
        named = named_path(at)
        if named is not None and not _names_target(named, target):
            refused = f"it names {named!r}, but this answer may only edit {target_path!r}"

    def where(at: int) -> str:
        return f"line {at + 1 + line_offset}"

    for i, line in enumerate(lines):
        if state == "outside":
            if _HEAD.match(line):
                open_block(i)
            elif _DIVIDER.match(line) or _TAIL.match(line):
                result.errors.append(f"{where(i)}: {line.strip()!r} without a <<<<<<< SEARCH before it")
            else:
                result.prose.append(line)
        elif state == "search":
            if _DIVIDER.match(line):
                state = "replace"
            elif _HEAD.match(line):
                result.errors.append(f"{where(start)}: block has no ======= before the next <<<<<<< SEARCH")
                open_block(i)
            elif _TAIL.match(line):
                result.errors.append(f"{where(start)}: block has no ======= between SEARCH and REPLACE")
                state = "outside"
            else:
                search.append(line)
        else:
            if _TAIL.match(line):
                if refused:
                    result.errors.append(f"{where(start)}: block refused: {refused}")
                elif not search and not replace:
                    result.errors.append(f"{where(start)}: block has an empty SEARCH and an empty REPLACE")
                else:
                    result.blocks.append(
                        EditBlock(_block_text(search), _block_text(replace), index, start + 1 + line_offset)
                    )
                    index += 1
                state = "outside"
            elif _HEAD.match(line):
                result.errors.append(f"{where(start)}: block has no >>>>>>> REPLACE before the next SEARCH")
                open_block(i)
            elif _DIVIDER.match(line):
                result.errors.append(f"{where(i)}: a second ======= in one block")
                state = "outside"
            else:
                replace.append(line)
    if state != "outside":
        result.truncated = True
        result.errors.append(
            f"{where(start)}: the answer ends inside a block (no >>>>>>> REPLACE); it was probably truncated"
        )
    return result


def _answer_lines(text: str) -> list[str]:
    """Split an answer into lines with CR/LF normalised and trailing spaces kept (they may be code)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _says(lines: Sequence[str], word: str) -> bool:
    """Return whether a line of ``lines`` is the sentinel ``word`` (NO_CHANGES / NO_FINDINGS)."""
    return any((m := _SENTINEL_LINE.match(line)) is not None and m.group(1) == word for line in lines)


def parse_edits(text: str, target_path: str) -> ParsedEdits:
    """Parse a fix answer (SEARCH/REPLACE blocks or NO_CHANGES) for ``target_path``; never raises."""
    refusal = check_target_path(_normalise_path(target_path))
    if refusal is not None:
        return ParsedEdits((), False, (f"target refused: {refusal}",))
    if not text.strip():
        return ParsedEdits((), False, ("the answer is empty",))
    lines = _answer_lines(text)
    scan = _scan(lines, target_path)
    says_none = _says(scan.prose, "NO_CHANGES")
    errors = list(scan.errors)
    if says_none and scan.blocks:
        errors.append("the answer says NO_CHANGES but also contains blocks")
    if not scan.blocks and not says_none and not scan.errors:
        errors.append("no SEARCH/REPLACE blocks and no NO_CHANGES found in the answer")
    return ParsedEdits(tuple(scan.blocks), says_none and not scan.blocks, tuple(errors), scan.truncated)


def _severity(word: str) -> tuple[Severity, str]:
    """Map a model's severity word onto ours, with a note when it was not one of ours."""
    lowered = word.strip().lower()
    for severity in SEVERITIES:
        if lowered == severity:
            return severity, ""
    if lowered in _SEVERITY_SYNONYMS:
        mapped = _SEVERITY_SYNONYMS[lowered]
        return mapped, f"severity {word!r} read as {mapped!r}"
    return DEFAULT_SEVERITY, f"unknown severity {word!r}; used {DEFAULT_SEVERITY!r}"


def _split_header(rest: str) -> tuple[Severity, str, str]:
    """Split ``<severity>: <title>`` (tolerating a missing severity) into severity, title and a note."""
    match = _SEVERITY_WORD.match(rest.strip())
    if match is None:
        return DEFAULT_SEVERITY, rest.strip(), f"no severity given; used {DEFAULT_SEVERITY!r}"
    word, title = match.group(1), match.group(2).strip()
    lowered = word.lower()
    if lowered not in SEVERITIES and lowered not in _SEVERITY_SYNONYMS and not title:
        return DEFAULT_SEVERITY, rest.strip(), f"no severity given; used {DEFAULT_SEVERITY!r}"
    severity, note = _severity(word)
    return severity, title, note


def parse_review_answer(text: str, target_path: str) -> ReviewAnswer:
    """Parse a review answer (``### FINDING: sev: title`` sections or NO_FINDINGS); never raises."""
    if not text.strip():
        return ReviewAnswer((), False, ("the answer is empty",))
    lines = _answer_lines(text)
    starts = [i for i, line in enumerate(lines) if _FINDING.match(line)]
    errors: list[str] = []
    preamble = _scan(lines[: starts[0]] if starts else lines, target_path)
    if preamble.blocks or preamble.errors:
        errors.append("SEARCH/REPLACE text outside any ### FINDING section was ignored")
    findings: list[ReviewFinding] = []
    for n, begin in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        header = _FINDING.match(lines[begin])
        assert header is not None  # starts only holds matching lines
        severity, title, note = _split_header(header.group(1))
        scan = _scan(lines[begin + 1 : end], target_path, first_index=1, line_offset=begin + 1)
        errors.extend(f"finding {n + 1}: {e}" for e in scan.errors)
        if len(scan.blocks) > 1:
            errors.append(f"finding {n + 1}: {len(scan.blocks)} blocks given, only the first is kept")
        body_lines = [
            line.rstrip()
            for line in scan.prose
            if not _FENCE.match(line) and _path_line(line) is None and not _SENTINEL_LINE.match(line)
        ]
        body = "\n".join(body_lines).strip()
        if not title:
            title = body.split("\n", 1)[0].strip() or "(untitled finding)"
            errors.append(f"finding {n + 1}: the header has no title")
        findings.append(ReviewFinding(severity, title, body, scan.blocks[0] if scan.blocks else None, note))
    says_none = _says(lines, "NO_FINDINGS")
    if says_none and findings:
        errors.append("the answer says NO_FINDINGS but also contains findings")
    if not findings and not says_none:
        errors.append("no ### FINDING sections and no NO_FINDINGS found in the answer")
    return ReviewAnswer(tuple(findings), says_none and not findings, tuple(errors))


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


# A shift turns a SEARCH/REPLACE line into the file's indentation: ("add", p) prefixes, ("cut", p) removes.
_Shift = tuple[str, str]
_NO_SHIFT: _Shift = ("add", "")


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


def _reindent(lines: Sequence[str], shift: _Shift) -> list[str] | None:
    """Apply ``shift`` to REPLACE lines (blanks untouched); ``None`` if a line cannot lose it."""
    op, prefix = shift
    out: list[str] = []
    for line in lines:
        if not line.strip() or not prefix:
            out.append(line)
        elif op == "add":
            out.append(prefix + line)
        elif line.startswith(prefix):
            out.append(line[len(prefix) :])
        else:
            return None
    return out


def _fold_unicode(line: str) -> str:
    """Return ``line`` with typographic quotes, dashes and spaces folded to ASCII."""
    return line.translate(_UNICODE_FOLD)


def _same(line: str) -> str:
    return line


def _equal_from(lines: Sequence[str], start: int, search: Sequence[str], key: Callable[[str], str]) -> bool:
    """Return whether ``lines[start:]`` equals ``search`` under ``key``, stopping at the first difference."""
    return all(key(lines[start + k]) == key(want) for k, want in enumerate(search))


def _rstrip_folded(line: str) -> str:
    return _fold_unicode(line).rstrip()


def _key(line: str) -> str:
    """Return the text every rung of the ladder agrees on: folded and stripped."""
    return _fold_unicode(line).strip()


def _find(
    lines: Sequence[str], search: Sequence[str], keys: Sequence[str] | None = None
) -> tuple[MatchLevel, list[tuple[int, _Shift]]]:
    """Climb the ladder; return the first rung with any match and every match (start, shift) at that rung.

    ``keys`` are ``_key`` of each line, precomputed by a caller that searches the same text many times.
    """
    n = len(search)
    # Every rung implies equal stripped, folded text on the first non-blank line: only those starts are tried.
    anchor = next((j for j, s in enumerate(search) if s.strip()), None)
    if anchor is None:
        starts: Sequence[int] = range(len(lines) - n + 1)
    else:
        key = _key(search[anchor])
        if keys is None:
            keys = [_key(line) for line in lines]
        starts = [i - anchor for i in range(anchor, len(lines) - n + 1 + anchor) if keys[i] == key]
    exact = [(i, _NO_SHIFT) for i in starts if _equal_from(lines, i, search, _same)]
    if exact:
        return MatchLevel.EXACT, exact
    rstrip = [(i, _NO_SHIFT) for i in starts if _equal_from(lines, i, search, str.rstrip)]
    if rstrip:
        return MatchLevel.TRAILING_WHITESPACE, rstrip
    shifted: list[tuple[int, _Shift]] = []
    for i in starts:
        shift = _shift_for(lines[i : i + n], search, _same)
        if shift is not None:
            shifted.append((i, shift))
    if shifted:
        return MatchLevel.INDENTATION, shifted
    unicode: list[tuple[int, _Shift]] = []
    for i in starts:
        if _equal_from(lines, i, search, _rstrip_folded):
            unicode.append((i, _NO_SHIFT))
        else:
            shift = _shift_for(lines[i : i + n], search, _fold_unicode)
            if shift is not None:
                unicode.append((i, shift))
    return MatchLevel.UNICODE, unicode


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


def _placeholder(block: EditBlock, known: set[str]) -> str | None:
    """Return a placeholder line new in REPLACE (in neither SEARCH nor ``known`` file lines), else None."""
    in_search = {line.strip() for line in _content_lines(block.search)}
    for line in _content_lines(block.replace):
        if line.strip() in known or line.strip() in in_search:
            continue
        if _PLACEHOLDER.search(line) or _LONE_ELLIPSIS.match(line):
            return line.strip()
    return None


def apply_edits(original: str, blocks: Sequence[EditBlock]) -> ApplyResult:
    """Apply ``blocks`` in order by the ladder; each SEARCH must match once; failed blocks change nothing."""
    doc = _Lines.split(original)
    original_lines = {line.strip() for line in doc.text}
    keys = [_key(line) for line in doc.text]
    applied: list[AppliedBlock] = []
    failures: list[BlockFailure] = []
    already: list[int] = []
    # Regions written by earlier blocks, as [start, end) now: a later SEARCH may not touch them.
    written: list[tuple[int, int, int]] = []
    # Where each SEARCH sits in the original: blocks aimed at overlapping original lines are caught even when
    # the first one's edit makes the second stop matching.
    origin: dict[int, tuple[int, int]] = {}
    for candidate in blocks:
        lines = _content_lines(candidate.search)
        found = _find(doc.text, lines, keys)[1] if lines else []
        if len(found) == 1:
            origin[candidate.index] = (found[0][0], found[0][0] + len(lines))
    done_origins: list[tuple[int, int, int]] = []

    for block in blocks:
        search = _content_lines(block.search)
        replace = _content_lines(block.replace)

        def fail(kind: FailureKind, message: str, hint: str = "", block: EditBlock = block) -> None:
            failures.append(BlockFailure(block.index, kind, message, hint))

        if block.search == block.replace:
            fail(FailureKind.IDENTICAL, "REPLACE is identical to SEARCH, so the block changes nothing")
            continue
        lazy = _placeholder(block, original_lines)
        if lazy is not None:
            fail(
                FailureKind.PLACEHOLDER,
                f"REPLACE contains the placeholder {lazy!r}; write the complete code, never elide it",
            )
            continue
        if not search:
            if any(line.strip() for line in doc.text):
                fail(FailureKind.EMPTY_SEARCH, "SEARCH is empty; copy the existing lines to change")
                continue
            doc.text, doc.ends = replace, [doc.eol] * len(replace)
            keys = [_key(line) for line in replace]
            written.append((0, len(replace), block.index))
            applied.append(AppliedBlock(block.index, MatchLevel.EXACT, 1, len(replace)))
            continue

        mine = origin.get(block.index)
        clash = next((k for s, e, k in done_origins if mine and mine[0] < e and s < mine[1]), None)
        if clash is not None:
            fail(FailureKind.OVERLAP, f"SEARCH overlaps the lines block {clash} already changed")
            continue
        level, matches = _find(doc.text, search, keys)
        if not matches:
            if replace and len(_find(doc.text, replace, keys)[1]) == 1:
                already.append(block.index)
                continue
            fail(
                FailureKind.MISSING,
                "SEARCH does not match the file (also tried ignoring trailing whitespace, "
                "a uniform indentation shift and unicode punctuation)",
                _closest(doc.text, search),
            )
            continue
        if len(matches) > 1:
            where = ", ".join(str(start + 1) for start, _ in matches[:10])
            fail(
                FailureKind.AMBIGUOUS,
                f"SEARCH matches {len(matches)} places (starting at lines {where}); "
                "add surrounding lines so it matches exactly once",
            )
            continue
        start, shift = matches[0]
        end = start + len(search)
        if len(replace) > len(search):
            # A REPLACE that grows around its SEARCH (an insertion) would apply twice if resent.
            around = _find(doc.text, replace, keys)[1]
            if len(around) == 1 and around[0][0] <= start and end <= around[0][0] + len(replace):
                already.append(block.index)
                continue
        overlap = next((k for s, e, k in written if start < e and s < end), None)
        if overlap is not None:
            fail(FailureKind.OVERLAP, f"SEARCH overlaps the lines block {overlap} already changed")
            continue
        new_lines = _reindent(replace, shift) if level is MatchLevel.INDENTATION or shift[1] else replace
        if new_lines is None:
            fail(FailureKind.REINDENT, "REPLACE could not be re-indented to the file's indentation")
            continue
        tail_end = doc.ends[end - 1]
        new_ends = [doc.eol] * len(new_lines)
        if new_ends:
            # The last replaced line keeps its own ending, so a missing final newline stays missing.
            new_ends[-1] = tail_end if tail_end else ("" if end == len(doc.text) else doc.eol)
        elif start > 0 and end == len(doc.text) and not tail_end:
            doc.ends[start - 1] = ""
        doc.text[start:end] = new_lines
        keys[start:end] = [_key(line) for line in new_lines]
        doc.ends[start:end] = new_ends
        delta = len(new_lines) - (end - start)
        written = [(s + delta, e + delta, k) if s >= end else (s, e, k) for s, e, k in written]
        written.append((start, start + len(new_lines), block.index))
        applied = [
            AppliedBlock(a.index, a.level, a.start_line + delta, a.end_line + delta)
            if a.start_line > end
            else a
            for a in applied
        ]
        applied.append(AppliedBlock(block.index, level, start + 1, start + len(new_lines)))
        if mine is not None:
            done_origins.append((*mine, block.index))

    return ApplyResult(doc.join(), tuple(applied), tuple(failures), tuple(already), len(blocks))


def error_feedback(result: ApplyResult, parse_errors: Sequence[str] = ()) -> str:
    """Render the failures of an apply (and of parsing) as a message for one retry prompt."""
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
        done = len(result.applied) + len(result.already_applied)
        if done:
            parts.append(f"The other {done} blocks applied; do not resend them.")
        parts.append(
            "Resend only the failed blocks. SEARCH must copy the current lines exactly, "
            "with enough context to match exactly once."
        )
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
