"""Typed values of the pure core: a parsed diff, review comments, findings. No I/O anywhere in bot.core."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

Side = Literal["LEFT", "RIGHT"]


class FileStatus(StrEnum):
    """What a diff did to one file."""

    ADDED = "added"
    DELETED = "deleted"
    MODIFIED = "modified"
    RENAMED = "renamed"


class LineKind(StrEnum):
    """The role of one line in a hunk."""

    ADDED = "+"
    REMOVED = "-"
    CONTEXT = " "


@dataclass(frozen=True, slots=True)
class DiffLine:
    """One hunk line with its numbers on each side (``None`` on the side it does not exist)."""

    kind: LineKind
    text: str
    old_no: int | None
    new_no: int | None
    # True when git printed "\\ No newline at end of file" after this line.
    no_newline: bool = False


@dataclass(frozen=True, slots=True)
class Hunk:
    """One ``@@ -old_start,old_len +new_start,new_len @@ section`` block."""

    old_start: int
    old_len: int
    new_start: int
    new_len: int
    section: str
    lines: tuple[DiffLine, ...]


@dataclass(frozen=True, slots=True)
class FileDiff:
    """The changes to one file: status, paths, modes and hunks."""

    path: str
    old_path: str | None
    status: FileStatus
    hunks: tuple[Hunk, ...] = ()
    is_binary: bool = False
    old_mode: str | None = None
    new_mode: str | None = None

    def hunk_for(self, line: int, side: Side = "RIGHT") -> Hunk | None:
        """Return the hunk holding ``line`` on ``side`` (where GitHub accepts a comment), else ``None``."""
        for hunk in self.hunks:
            for diff_line in hunk.lines:
                if side == "RIGHT" and diff_line.new_no == line:
                    return hunk
                if side == "LEFT" and diff_line.old_no == line:
                    return hunk
        return None

    def commentable(self, line: int, side: Side = "RIGHT") -> bool:
        """Return whether GitHub accepts a review comment on ``line`` of ``side``."""
        return self.hunk_for(line, side) is not None

    @property
    def added_lines(self) -> tuple[int, ...]:
        """Return the new-file numbers of added lines."""
        return tuple(
            dl.new_no
            for h in self.hunks
            for dl in h.lines
            if dl.kind is LineKind.ADDED and dl.new_no is not None
        )


@dataclass(frozen=True, slots=True)
class Diff:
    """A whole parsed diff."""

    files: tuple[FileDiff, ...]

    def file(self, path: str) -> FileDiff | None:
        """Return the diff of ``path`` (its new path), if present."""
        for file_diff in self.files:
            if file_diff.path == path:
                return file_diff
        return None

    def readable_paths(self) -> list[str]:
        """Return the paths of the files that exist at the head and hold text (what may be read there)."""
        return [f.path for f in self.files if f.status is not FileStatus.DELETED and not f.is_binary]


@dataclass(frozen=True, slots=True)
class ReviewComment:
    """An inline comment GitHub will accept: RIGHT/LEFT side lines inside one hunk, anchored by the bot."""

    path: str
    line: int
    body: str
    side: Side = "RIGHT"
    start_line: int | None = None
    start_side: Side | None = None
    # The finding fingerprint this comment carries (hidden marker in the body), if any.
    fingerprint: str | None = None


Severity = Literal["critical", "high", "medium", "low", "info"]
SEVERITY_ORDER: tuple[Severity, ...] = ("critical", "high", "medium", "low", "info")


@dataclass(frozen=True, slots=True)
class Finding:
    """Something a review says about the code, before it is anchored and posted."""

    path: str
    title: str
    body: str = ""
    severity: Severity = "medium"
    rule: str = ""
    # The code the finding is about (new-file text); the anchor is found by the bot, not the model.
    code: str = ""
    line: int | None = None
    end_line: int | None = None
    fingerprint: str = ""
    # A verified replacement for ``code`` (suggestion), when the model proposed one that applied.
    replacement: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
