"""Reading a model's answer: SEARCH/REPLACE blocks, the file each is for (in any layout), review findings.

Parsing never raises and never guesses code: what cannot be read is an error for the retry prompt. Where a
block applies is :mod:`bot.core.edits`' work.
Just past 400 lines: edit blocks and review findings share the readers of the file-name layouts models use
(fenced, bare, quoted, in a header) and of the sentinel lines; apart they would need those twice.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot.core.policy import check_target_path
from bot.core.types import SEVERITY_ORDER, Severity

# Markers: 5-9 characters, trailing spaces tolerated (models drift on the count).
_HEAD = re.compile(r"^[ \t]*<{5,9}[ \t]*SEARCH[ \t>]*$", re.IGNORECASE)
_DIVIDER = re.compile(r"^[ \t]*={5,9}[ \t]*$")
_TAIL = re.compile(r"^[ \t]*>{5,9}[ \t]*REPLACE[ \t<]*$", re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_PATH_DECORATION = " \t*#`:'\""
_PATH_LIKE = re.compile(r"^(?:[\w.+@~-]+/)*[\w+@~-][\w.+@~-]*\.[\w+-]+$|^(?:[\w.+@~-]+/)+[\w.+@~-]+$")
_PATH_PREFIX = re.compile(r"^(?:file|path|filename)\s*:\s*", re.IGNORECASE)
# A comment wrapped around a path line: ``// a.py``, ``# a.py``, ``-- a.sql``, ``<!-- a.html -->``.
_COMMENT_WRAP = re.compile(r"^(?://+|#+|--|;+|<!--|/\*)\s*|\s*(?:-->|\*/)$")
_FENCE_INFO = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[ \t]*([^`]*)$")
_QUOTED = re.compile(r"`([^`\s]+)`|\*\*([^*\s]+)\*\*")
# Extensions that make a word in prose or a fence's info string a file name rather than code (``obj.get``).
_FILE_EXTENSION = re.compile(
    r"\.(?:py|pyi|js|mjs|cjs|jsx|ts|tsx|go|rs|java|kt|kts|swift|c|h|cc|cpp|cxx|hpp|hh|cs|rb|php|pl|sh|bash"
    r"|zsh|ps1|sql|md|markdown|rst|txt|json|jsonc|json5|yml|yaml|toml|ini|cfg|conf|env|xml|html|htm|css|scss"
    r"|less|vue|svelte|lua|r|dart|scala|ex|exs|erl|hs|ml|clj|gradle|lock|tf|proto|graphql|mk|cmake|ipynb)$",
    re.IGNORECASE,
)
# "### FINDING: high: title", tolerating bold instead of a heading and a number ("FINDING 2:").
_FINDING = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?\**FINDING(?:[ \t]*#?\d+)?\**[ \t]*:?\**[ \t]*(.*)$", re.IGNORECASE
)
_SEVERITY_WORD = re.compile(r"^\[?([A-Za-z]+)\]?[ \t]*(?::|-|—|\|)[ \t]*(.*)$")
_SENTINEL_LINE = re.compile(r"^[ \t`*]*(NO_CHANGES|NO_FINDINGS)[ \t`*.]*$")
# "AT: src/caller.py:12" (or 12-14): a finding about lines of another file the model was shown.
_AT = re.compile(
    r"^[ \t*]*AT\**[ \t]*:\**[ \t]*`?([^`\s:]+):(\d+)(?:[ \t]*-[ \t]*(\d+))?`?[ \t.*]*$", re.IGNORECASE
)

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


@dataclass(frozen=True, slots=True)
class EditBlock:
    """One SEARCH/REPLACE pair, LF-normalised; ``line`` is where it starts in the model's answer.

    ``path`` is the file the answer named for the block (a name carries forward to later blocks), or "".
    """

    search: str
    replace: str
    index: int
    line: int = 0
    path: str = ""


@dataclass(frozen=True, slots=True)
class ParsedEdits:
    """A parsed fix answer: its blocks, whether it said NO_CHANGES, and what could not be parsed."""

    blocks: tuple[EditBlock, ...]
    no_changes: bool
    errors: tuple[str, ...]
    truncated: bool = False
    # Blocks the answer addressed to another of this fix's targets (each ``path`` says which).
    routed: tuple[EditBlock, ...] = ()

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
    # ``(path, start, end)`` when the finding is about code from another file (an ``AT:`` line), as named.
    at: tuple[str, int, int] | None = None


@dataclass(frozen=True, slots=True)
class ReviewAnswer:
    """A parsed review answer: findings, whether it said NO_FINDINGS, and parse errors."""

    findings: tuple[ReviewFinding, ...]
    no_findings: bool
    errors: tuple[str, ...]


# --------------------------------------------------------------------------------------------------------
# File names


def _normalise_path(path: str) -> str:
    """Return ``path`` as a repository path: ``/`` separators, no leading ``./`` segments."""
    path = path.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def _named_path(path: str) -> str:
    """Return a path an answer named, comparable with targets: a Windows drive or a leading ``/`` dropped."""
    return _normalise_path(re.sub(r"^[A-Za-z]:(?=[/\\])", "", path.strip())).lstrip("/")


def _names_target(named: str, target: str) -> bool:
    """Return whether a named path is the target: itself, a trailing part of it, or it in a longer path."""
    return named == target or target.endswith("/" + named) or named.endswith("/" + target)


def _bare_path(text: str) -> str | None:
    """Return ``text`` as a path if it is one (``path.py``, ``**path.py**``, ``File: path.py``), else None."""
    candidate = _PATH_PREFIX.sub("", text.strip().strip(_PATH_DECORATION))
    candidate = _named_path(candidate.strip(_PATH_DECORATION))
    if candidate and _PATH_LIKE.match(candidate):
        return candidate
    return None


def _path_line(line: str) -> str | None:
    """Return the file path a line names on its own: bare, decorated, or as a comment (``// path``)."""
    stripped = _COMMENT_WRAP.sub("", line.strip())
    return _bare_path(stripped) if stripped else None


def _fence_path(line: str) -> str | None:
    """Return the path in a fence's info string (```python:src/a.py, ```py name=src/a.py, ```src/a.py)."""
    found = _FENCE_INFO.match(line)
    if found is None or not found.group(1).strip():
        return None
    for token in re.split(r"[\s:]+|name=|file=|path=|title=", found.group(1).strip()):
        named = _bare_path(token.strip("\"'"))
        if named is not None and ("/" in named or _FILE_EXTENSION.search(named)):
            return named
    return None


def _prose_path(line: str, target: str) -> str | None:
    """Return the file a prose line names in backticks or bold ("Changes to `tests/test_x.py`:").

    Several names that include the target say nothing sure (None); several without it name another file.
    """
    named = [
        path
        for quoted in _QUOTED.finditer(line)
        if (path := _bare_path(quoted.group(1) or quoted.group(2))) is not None
        and ("/" in path or _FILE_EXTENSION.search(path))
    ]
    if len(set(named)) > 1 and any(_names_target(path, target) for path in named):
        return None
    return named[0] if named else None


# --------------------------------------------------------------------------------------------------------
# Parsing


@dataclass(slots=True)
class _Scan:
    """What one pass over answer lines found."""

    blocks: list[EditBlock]
    errors: list[str]
    prose: list[str]
    truncated: bool
    routed: list[EditBlock]


def _block_text(lines: Sequence[str]) -> str:
    """Join block lines into LF text with a final newline (empty for no lines)."""
    return "".join(line + "\n" for line in lines)


def _scan(
    lines: Sequence[str],
    target_path: str,
    first_index: int = 1,
    line_offset: int = 0,
    targets: Sequence[str] = (),
) -> _Scan:
    """Find SEARCH/REPLACE blocks in ``lines``; collect errors and the prose outside blocks.

    A block goes to the file named just before it, in any layout, or else to the file named last; a block
    naming another of ``targets`` is routed there, one naming any other file is refused.
    """
    result = _Scan([], [], [], False, [])
    target = _normalise_path(target_path)
    others = [t for t in dict.fromkeys(_normalise_path(t) for t in targets) if t != target]
    state = "outside"
    search: list[str] = []
    replace: list[str] = []
    start = 0
    refused = ""
    current = ""
    path = target
    index = first_index

    def skip_blank(j: int) -> int:
        while j >= 0 and not lines[j].strip():
            j -= 1
        return j

    def named_before(at: int) -> str | None:
        """Return the path named right before the block at ``at``, in any layout models use."""
        j = skip_blank(at - 1)
        if j < 0 or _TAIL.match(lines[j]):
            return None
        if _FENCE.match(lines[j]):
            in_info = _fence_path(lines[j])
            if in_info is not None:
                return in_info
            j = skip_blank(j - 1)
            if j < 0 or _TAIL.match(lines[j]):
                return None
            if _FENCE.match(lines[j]):
                # A path alone in its own fence just above ("```\nsrc/a.py\n```").
                alone = _path_line(lines[j - 1]) if j >= 2 and _FENCE.match(lines[j - 2]) else None
                return alone
        return _path_line(lines[j]) or _prose_path(lines[j], target)

    def open_block(at: int) -> None:
        nonlocal state, search, replace, start, refused, current, path
        state, search, replace, start, refused = "search", [], [], at, ""
        named = named_before(at)
        if named is not None:
            current = named
        path = target
        if current and not _names_target(current, target):
            routed = next((t for t in others if _names_target(current, t)), None)
            if routed is not None:
                path = routed
            else:
                refused = f"it names {current!r}, but this answer may only edit {target_path!r}"

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
                    edit = EditBlock(
                        _block_text(search), _block_text(replace), index, start + 1 + line_offset, path
                    )
                    (result.blocks if path == target else result.routed).append(edit)
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


def parse_edits(text: str, target_path: str, *, targets: Sequence[str] = ()) -> ParsedEdits:
    """Parse a fix answer (SEARCH/REPLACE blocks or NO_CHANGES) for ``target_path``; never raises.

    Blocks the answer addresses to another of ``targets`` (this fix's files) come back in ``routed``.
    """
    refusal = check_target_path(_normalise_path(target_path))
    if refusal is not None:
        return ParsedEdits((), False, (f"target refused: {refusal}",))
    if not text.strip():
        return ParsedEdits((), False, ("the answer is empty",))
    lines = _answer_lines(text)
    scan = _scan(lines, target_path, targets=targets)
    says_none = _says(scan.prose, "NO_CHANGES")
    errors = list(scan.errors)
    if says_none and scan.blocks:
        errors.append("the answer says NO_CHANGES but also contains blocks")
    if not scan.blocks and not scan.routed and not says_none and not scan.errors:
        errors.append("no SEARCH/REPLACE blocks and no NO_CHANGES found in the answer")
    return ParsedEdits(
        tuple(scan.blocks), says_none and not scan.blocks, tuple(errors), scan.truncated, tuple(scan.routed)
    )


def _severity(word: str) -> tuple[Severity, str]:
    """Map a model's severity word onto ours, with a note when it was not one of ours."""
    lowered = word.strip().lower()
    for severity in SEVERITY_ORDER:
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
    if lowered not in SEVERITY_ORDER and lowered not in _SEVERITY_SYNONYMS and not title:
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
        at = next((m for line in scan.prose if (m := _AT.match(line)) is not None), None)
        body_lines = [
            line.rstrip()
            for line in scan.prose
            if not _FENCE.match(line)
            and _path_line(line) is None
            and not _SENTINEL_LINE.match(line)
            and not _AT.match(line)
        ]
        body = "\n".join(body_lines).strip()
        if not title:
            title = body.split("\n", 1)[0].strip() or "(untitled finding)"
            errors.append(f"finding {n + 1}: the header has no title")
        where = None
        if at is not None:
            start = int(at.group(2))
            where = (_named_path(at.group(1)), start, max(start, int(at.group(3) or start)))
        findings.append(
            ReviewFinding(severity, title, body, scan.blocks[0] if scan.blocks else None, note, where)
        )
    says_none = _says(lines, "NO_FINDINGS")
    if says_none and findings:
        errors.append("the answer says NO_FINDINGS but also contains findings")
    if not findings and not says_none:
        errors.append("no ### FINDING sections and no NO_FINDINGS found in the answer")
    return ReviewAnswer(tuple(findings), says_none and not findings, tuple(errors))
