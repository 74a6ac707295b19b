"""Unified diffs to the typed model (via ``unidiff``), and the model's own patches back to text.

Diff text is decoded as UTF-8; bytes that are not UTF-8 are kept as surrogate escapes so nothing is lost
(``text.encode("utf-8", "surrogateescape")`` gives the original bytes back).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence

from unidiff.errors import UnidiffParseError
from unidiff.patch import Hunk as UnidiffHunk
from unidiff.patch import PatchedFile, PatchSet

from bot.core.types import Diff, DiffLine, FileDiff, FileStatus, Hunk, LineKind

__all__ = [
    "DiffParseError",
    "format_patch",
    "line_ending",
    "parse_diff",
    "split_lines",
    "strip_ending",
]

_DEV_NULL = "/dev/null"
_NO_NEWLINE = "\\ No newline at end of file"
_OCTAL_ESCAPE = re.compile(rb"\\([0-7]{3}|.)")
_C_ESCAPES = {b"n": b"\n", b"t": b"\t", b'"': b'"', b"\\": b"\\", b"a": b"\a", b"b": b"\b", b"f": b"\f"}
_C_ESCAPES |= {b"r": b"\r", b"v": b"\v"}


class DiffParseError(ValueError):
    """The text is not a unified diff this parser understands; the message says where."""


def parse_diff(text: str | bytes) -> Diff:
    """Parse a whole unified diff (``git diff``/GitHub's ``.diff``) into a :class:`Diff`.

    Raises :class:`DiffParseError` (and nothing else) when the text is not a diff unidiff can read.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    first_line, newline, _ = text.partition("\n")
    if newline and first_line.endswith("\r"):
        # git never ends a header line with CR: the whole diff went through a CRLF transport (a Windows
        # editor, an email). Undo that, or unidiff would read "100644\r" and "path\r".
        text = text.replace("\r\n", "\n")
    try:
        # unidiff parses and validates the structure (headers, renames, modes, binary, hunk sizes); with
        # metadata_only it skips building its own line objects, and the hunk bodies it checked are read
        # straight into the model below. That halves the time of a 10,000-line diff.
        patch_set = PatchSet(text, metadata_only=True)
        rows = text.split("\n")  # unidiff's lines: StringIO splits on "\n" only
        return Diff(files=tuple(_file_diff(patched, rows) for patched in patch_set))
    except (UnidiffParseError, ValueError, IndexError, TypeError, AssertionError) as exc:
        # unidiff reports malformed input with several exception types; callers see one.
        raise DiffParseError(f"not a valid unified diff: {exc}") from exc


def split_lines(text: str) -> list[str]:
    r"""Split ``text`` after each ``\n`` only, keeping endings (``splitlines`` also splits on \f)."""
    lines = text.split("\n")
    tail = lines.pop()
    out = [line + "\n" for line in lines]
    if tail:
        out.append(tail)
    return out


def line_ending(line: str) -> str:
    r"""Return the terminator of a line from :func:`split_lines`: "\r\n", "\n" or "" (no final newline)."""
    if line.endswith("\r\n"):
        return "\r\n"
    return "\n" if line.endswith("\n") else ""


def format_patch(path: str, before: str, after: str, *, context: int = 3, old_path: str | None = None) -> str:
    r"""Return a unified diff (``git apply``-able) turning ``before`` into ``after``, or "" when equal.

    Unlike ``difflib.unified_diff`` it prints "\ No newline at end of file" where a side lacks one.
    """
    old_lines, new_lines = split_lines(before), split_lines(after)
    if old_lines == new_lines:
        return ""
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    groups = list(matcher.get_grouped_opcodes(context))
    # Both sides are named even when one is empty: the file exists on the head, it only has no lines.
    out = [f"--- a/{old_path or path}\n", f"+++ b/{path}\n"]
    for group in groups:
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@\n")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                out.extend(_patch_lines(" ", old_lines[a1:a2]))
                continue
            out.extend(_patch_lines("-", old_lines[a1:a2]))
            out.extend(_patch_lines("+", new_lines[b1:b2]))
    return "".join(out)


def _patch_lines(prefix: str, lines: Iterable[str]) -> list[str]:
    """Return patch lines for ``lines``, marking a final line that has no newline."""
    out: list[str] = []
    for line in lines:
        if line.endswith("\n"):
            out.append(prefix + line)
        else:
            out.append(f"{prefix}{line}\n{_NO_NEWLINE}\n")
    return out


def _range(start: int, end: int) -> str:
    """Return a hunk header range for 0-based ``[start, end)`` in git's spelling."""
    length = end - start
    first = start + 1 if length else start
    return str(first) if length == 1 else f"{first},{length}"


def _file_diff(patched: PatchedFile, rows: Sequence[str]) -> FileDiff:
    """Convert one unidiff file into the model, reading its hunk bodies from the diff's ``rows``."""
    info = list(patched.patch_info or ())
    renamed_from = _header_path(info, "rename from ") or _header_path(info, "copy from ")
    renamed_to = _header_path(info, "rename to ") or _header_path(info, "copy to ")
    source, target = _unquote(patched.source_file), _unquote(patched.target_file)
    if source == _DEV_NULL:
        status, path, old_path = FileStatus.ADDED, _strip_prefix(target), None
    elif target == _DEV_NULL:
        status, path, old_path = FileStatus.DELETED, _strip_prefix(source), None
    else:
        path = renamed_to or _strip_prefix(target)
        old = renamed_from or _strip_prefix(source)
        renamed = old != path
        status = FileStatus.RENAMED if renamed else FileStatus.MODIFIED
        old_path = old if renamed else None
        if any(line.startswith("copy from ") for line in info):
            status = FileStatus.ADDED
    return FileDiff(
        path=path,
        old_path=old_path,
        status=status,
        hunks=_hunks(patched, rows),
        is_binary=patched.is_binary_file,
        old_mode=patched.source_mode,
        new_mode=patched.target_mode,
    )


def _hunks(patched: PatchedFile, rows: Sequence[str]) -> tuple[Hunk, ...]:
    """Return the file's hunks, each read from the rows after its header (unidiff validated the sizes)."""
    hunks: list[Hunk] = []
    at = (patched.diff_line_no or 1) - 1
    for raw in patched:
        while not rows[at].startswith("@@ "):
            at += 1
        lines, at = _hunk_lines(rows, at + 1, raw)
        hunks.append(
            Hunk(
                raw.source_start,
                raw.source_length,
                raw.target_start,
                raw.target_length,
                raw.section_header,
                lines,
            )
        )
    return tuple(hunks)


def _hunk_lines(rows: Sequence[str], at: int, raw: UnidiffHunk) -> tuple[tuple[DiffLine, ...], int]:
    """Return one hunk's lines starting at row ``at``, and the row after them.

    "\\ No newline at end of file" markers are folded into the line they follow; a bare empty row is an empty
    context line (some tools strip the space), exactly as unidiff counts it.
    """
    lines: list[DiffLine] = []
    old_no, new_no = raw.source_start, raw.target_start
    old_left, new_left = raw.source_length, raw.target_length
    added, removed, context = LineKind.ADDED, LineKind.REMOVED, LineKind.CONTEXT  # locals: a hot loop
    while old_left > 0 or new_left > 0 or (at < len(rows) and rows[at][:1] == "\\"):
        row = rows[at]
        at += 1
        tag = row[:1]
        text = row[1:-1] if row[-1:] == "\r" else row[1:]
        if tag == "+":
            lines.append(DiffLine(added, text, None, new_no))
            new_no += 1
            new_left -= 1
        elif tag == "-":
            lines.append(DiffLine(removed, text, old_no, None))
            old_no += 1
            old_left -= 1
        elif tag == "\\":
            if lines:
                last = lines[-1]
                lines[-1] = DiffLine(last.kind, last.text, last.old_no, last.new_no, True)
        else:
            lines.append(DiffLine(context, text if tag == " " else "", old_no, new_no))
            old_no += 1
            new_no += 1
            old_left -= 1
            new_left -= 1
    return tuple(lines), at


def strip_ending(value: str) -> str:
    """Return a line without its terminator ("\\r\\n" or "\\n")."""
    if value.endswith("\r\n"):
        return value[:-2]
    return value[:-1] if value.endswith("\n") else value


def _header_path(info: Sequence[str], prefix: str) -> str | None:
    """Return the path of a ``rename from``/``copy to`` style header line, unquoted."""
    for line in info:
        if line.startswith(prefix):
            return _unquote(strip_ending(line[len(prefix) :]))
    return None


def _strip_prefix(path: str) -> str:
    """Drop git's ``a/``/``b/`` prefix."""
    return path[2:] if path[:2] in ("a/", "b/") else path


def _unquote(path: str) -> str:
    """Undo git's C-style quoting of unusual paths (``"a/r\\303\\251sum\\303\\251.md"``)."""
    path = path.rstrip("\t")
    if len(path) < 2 or not (path.startswith('"') and path.endswith('"')):
        return path
    raw = path[1:-1].encode("utf-8", "surrogateescape")

    def unescape(match: re.Match[bytes]) -> bytes:
        token = match.group(1)
        if len(token) == 3:
            return bytes([int(token, 8) & 0xFF])
        return _C_ESCAPES.get(token, token)

    return _OCTAL_ESCAPE.sub(unescape, raw).decode("utf-8", "surrogateescape")
