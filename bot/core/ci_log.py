"""A GitHub Actions job log read as it streams: the failing steps' tails and the lines around errors kept."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

# Every line of a job log starts with its time, e.g. "2026-11-28T17:02:11.1604560Z ".
# GitHub's logs start with a byte-order mark.
_TIMESTAMP = re.compile(rb"^(?:\xef\xbb\xbf)?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ?")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]")
_MARKER = b"##["
_COMMAND = re.compile(r"^##\[(group|endgroup|error|warning|notice|debug|command|section)\]")
_BOM = "\ufeff"

# How much is kept: the tail of each failing step, the lines either side of an error, a line's length.
STEP_TAIL = 1500
CONTEXT = 30
MAX_ERRORS = 100
MAX_FAILING_STEPS = 4
MAX_LINE = 4000


@dataclass(frozen=True, slots=True)
class LogLine:
    """One kept line: its number in the log, its text (no time, no colours, no ``##[...]``), its step."""

    number: int
    text: str
    step: str
    kind: str = ""  # "error", "warning", "notice", "command", ... from the line's ##[kind] prefix


@dataclass(frozen=True, slots=True)
class LogExcerpt:
    """What a log showed of its failure, bounded whatever the log's size."""

    lines: tuple[LogLine, ...]
    failing_steps: tuple[str, ...]
    total_lines: int
    total_bytes: int
    truncated: bool

    @property
    def errors(self) -> tuple[LogLine, ...]:
        """The lines GitHub marked as errors (``##[error]``), in order."""
        return tuple(line for line in self.lines if line.kind == "error")

    def tail(self, count: int) -> tuple[LogLine, ...]:
        """The last ``count`` kept lines of the failing steps (or of the log when no step failed)."""
        failing = [line for line in self.lines if line.step in self.failing_steps] or list(self.lines)
        return tuple(failing[-count:])


@dataclass(slots=True)
class _Step:
    title: bytes
    tail: deque[bytes]
    last: int = 0  # number of the step's last line so far
    failed: bool = False


@dataclass(slots=True)
class _Window:
    lines: dict[int, tuple[bytes, bytes]] = field(default_factory=dict)  # number -> (step title, raw line)


def _strip(raw: bytes) -> bytes:
    match = _TIMESTAMP.match(raw)
    return raw[match.end() :] if match else raw


class LogReader:
    """Feed a job log's bytes in chunks as they arrive; ``finish()`` returns the excerpt.

    Memory is bounded by the step tail, the error windows and the line cap, not by the log: a chunk with no
    ``##[`` marker in it is appended to the current step's tail in one call.
    """

    def __init__(
        self,
        *,
        step_tail: int = STEP_TAIL,
        context: int = CONTEXT,
        max_errors: int = MAX_ERRORS,
        max_line: int = MAX_LINE,
    ) -> None:
        self._tail_size = step_tail
        self._context = context
        self._max_errors = max_errors
        self._max_line = max_line
        self._rest = b""
        self._number = 0  # lines seen so far
        self._bytes = 0
        self._truncated = False
        self._step = _Step(b"", deque(maxlen=step_tail))
        self._recent: deque[bytes] = deque(maxlen=context)  # the lines before the next error
        self._after = 0  # lines still to keep after the last error
        self._errors = 0
        self._window = _Window()
        self._failed: list[_Step] = []

    @property
    def fed(self) -> int:
        """Bytes read so far."""
        return self._bytes

    def feed(self, chunk: bytes) -> None:
        """Read the next piece of the log (any size, split anywhere)."""
        self._bytes += len(chunk)
        data = self._rest + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            self._rest = self._capped_rest(data)
            return
        self._rest = self._capped_rest(data[cut + 1 :])
        block = data[:cut]
        self._lines(block.split(b"\n"), _MARKER in block)

    def _capped_rest(self, rest: bytes) -> bytes:
        if len(rest) > self._max_line:
            # A line without an end this long is cut, so one endless line cannot fill memory.
            self._truncated = True
            return rest[: self._max_line]
        return rest

    def _lines(self, lines: list[bytes], marked: bool) -> None:
        if max(map(len, lines)) > self._max_line:
            self._truncated = True
            lines = [line[: self._max_line] for line in lines]
        start = 0
        if marked:
            for index, line in enumerate(lines):
                if _MARKER in line:
                    self._plain(lines[start:index])
                    self._marked(line)
                    start = index + 1
        self._plain(lines[start:])

    def _plain(self, lines: list[bytes]) -> None:
        """Lines with no marker: the step's tail, the window after an error, the context before the next."""
        if not lines:
            return
        if self._after:
            first = self._number + 1
            for offset, line in enumerate(lines[: self._after]):
                self._window.lines[first + offset] = (self._step.title, line)
            self._after = max(0, self._after - len(lines))
        self._number += len(lines)
        self._step.tail.extend(lines)
        self._step.last = self._number
        self._recent.extend(lines)

    def _marked(self, raw: bytes) -> None:
        text = _strip(raw)
        if text.startswith(b"##[group]Run "):
            self._close_step()
            self._step = _Step(text[len(b"##[group]Run ") :].strip(), deque(maxlen=self._tail_size))
        is_error = text.startswith(b"##[error]")
        if is_error:
            self._step.failed = True
            if self._errors < self._max_errors:
                self._errors += 1
                first = self._number + 1 - len(self._recent)
                for offset, line in enumerate(self._recent):
                    self._window.lines.setdefault(first + offset, (self._step.title, line))
                self._window.lines[self._number + 1] = (self._step.title, raw)
                self._after = self._context
            else:
                self._truncated = True
        elif self._after:
            self._window.lines[self._number + 1] = (self._step.title, raw)
            self._after -= 1
        self._number += 1
        self._step.tail.append(raw)
        self._step.last = self._number
        self._recent.append(raw)

    def _close_step(self) -> None:
        if self._step.failed:
            self._failed.append(self._step)
            if len(self._failed) > MAX_FAILING_STEPS:
                self._failed.pop(0)
                self._truncated = True

    def finish(self) -> LogExcerpt:
        """The excerpt: every failing step's tail and the windows around errors, in log order."""
        if self._rest:
            self._lines([self._rest], _MARKER in self._rest)
            self._rest = b""
        self._close_step()
        kept: dict[int, tuple[bytes, bytes]] = dict(self._window.lines)
        for step in self._failed:
            first = step.last - len(step.tail) + 1
            for offset, line in enumerate(step.tail):
                kept[first + offset] = (step.title, line)
            if len(step.tail) == step.tail.maxlen:
                self._truncated = True
        lines = tuple(_line(number, step, raw) for number, (step, raw) in sorted(kept.items()))
        failing = tuple(dict.fromkeys(_decode(step.title) for step in self._failed))
        return LogExcerpt(lines, failing, self._number, self._bytes, self._truncated)


def _decode(raw: bytes) -> str:
    return _ANSI.sub("", raw.decode("utf-8", errors="replace")).replace(_BOM, "").rstrip("\r")


def _line(number: int, step: bytes, raw: bytes) -> LogLine:
    text = _decode(_strip(raw))
    kind = ""
    match = _COMMAND.match(text)
    if match:
        kind = match[1]
        text = text[match.end() :]
    return LogLine(number, text, _decode(step), kind)


def read_log(chunks: Iterable[bytes], **bounds: int) -> LogExcerpt:
    """Read a whole log from its chunks (bytes as they stream) into its bounded excerpt."""
    reader = LogReader(**bounds)
    for chunk in chunks:
        reader.feed(chunk)
    return reader.finish()


def clean_lines(text: str) -> list[str]:
    """Plain output (no job-log framing): each line without colours, for parsers fed a tool's own output."""
    return [_ANSI.sub("", line).rstrip("\r") for line in text.replace(_BOM, "").splitlines()]
