"""What the model sees of one file: changed code with enough surroundings, within a token budget, honestly.

Decisions (see the research note on edit formats):

- Code is shown verbatim, **without line numbers**: models copy numbers into SEARCH blocks, and the bot
  anchors comments itself. Windows carry a ``[lines a-b]`` header instead, so the model sees the gaps.
- A review shows the new version of each hunk with a one-character marker column (``+`` added, ``-`` removed,
  space unchanged), as a unified diff does; the prompt says the marker is not part of the file.
- A fix shows the whole file when it fits, else windows around the focus (the PR's hunks, a thread's lines).
- Each window reaches up to the enclosing function/class (found by indentation and keywords, within
  ``SCOPE_LOOKBACK`` lines), else ``context`` lines around the change.
- Over budget, the view degrades step by step (scopes dropped, then hunks taken in order, a long hunk cut at a
  line) and every left-out line range is recorded in the ``Coverage``: nothing is ever clipped silently.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from bot.core.render import code, prose
from bot.core.types import FileDiff, FileStatus, Hunk, LineKind

# Token estimate: one token per 3 UTF-8 bytes, rounded up. o200k-family tokenizers average about 3.5-4.2
# characters per token on source code and English, so this over-counts ASCII by roughly 20% (a safety margin:
# a prompt estimated to fit really fits), and counts CJK and emoji (3-4 bytes each) at about one token per
# character, which is what those tokenizers do. No tokenizer download is possible offline.
BYTES_PER_TOKEN = 3
# How far above a change to look for the enclosing function or class.
SCOPE_LOOKBACK = 40
# Lines of context around a change when no enclosing scope is found.
REVIEW_CONTEXT = 3
FIX_CONTEXT = 10

Span = tuple[int, int]  # inclusive 1-based new-file line range

_SCOPE = re.compile(
    r"\s*(?:export\s+|pub(?:\([^)]*\))?\s+|public\s+|private\s+|protected\s+|static\s+|async\s+|abstract\s+)*"
    r"(?:def|class|function|func|fn|impl|struct|enum|interface|trait|module|sub|procedure|object|namespace)\b"
)


def estimate_tokens(text: str) -> int:
    """Return a conservative token count for ``text`` (see ``BYTES_PER_TOKEN``)."""
    return -(-len(text.encode("utf-8", "surrogatepass")) // BYTES_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class Limits:
    """The model's context window, the operator's cap, and the tokens kept free for the answer."""

    model_context: int
    cap: int
    completion_reserve: int

    def budget(self, prompt_tokens: int) -> int:
        """Return the tokens left for code: min(context, cap) minus the prompt and the completion reserve."""
        return max(0, min(self.model_context, self.cap) - prompt_tokens - self.completion_reserve)


class CoverageStatus(StrEnum):
    """How much of a file's changes the model saw."""

    REVIEWED = "reviewed"
    PARTIAL = "partial"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class Coverage:
    """For the coverage report: what was seen of one file, the new-file line ranges left out, and why."""

    path: str
    status: CoverageStatus
    omitted: tuple[Span, ...] = ()
    reason: str = ""

    def describe(self) -> str:
        """Render one line of the coverage report."""
        # The path and the reason (an error message may quote anything) are made inert: a fork names files.
        text = f"{code(self.path)}: {self.status.value}"
        if self.omitted:
            text += " (left out: lines " + ", ".join(_span_text(s) for s in self.omitted) + ")"
        if self.reason:
            text += f": {prose(' '.join(self.reason.split()))}"
        return text


def skipped(path: str, reason: str) -> Coverage:
    """Return the coverage of a file that was not sent at all (ignored, binary, deleted, over limits)."""
    return Coverage(path, CoverageStatus.SKIPPED, (), reason)


@dataclass(frozen=True, slots=True)
class FileView:
    """The rendered code of one file for one request, with its token estimate and coverage."""

    path: str
    text: str
    tokens: int
    coverage: Coverage
    # True when ``text`` is the complete file, verbatim (a fix may then rewrite anything in it).
    whole_file: bool = False
    shown: tuple[Span, ...] = ()
    # True when each code line starts with a +/-/space marker column (review views), not part of the file.
    marked: bool = False


def file_lines(text: str) -> list[str]:
    r"""Split file content into lines as git numbers them (only ``\n`` splits; a final ``\r`` is dropped)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def excerpt(text: str, start: int, end: int) -> str:
    """Return lines ``start..end`` (1-based, inclusive) of ``text``, e.g. the code a thread is about."""
    lines = file_lines(text)
    return "\n".join(lines[max(start, 1) - 1 : max(end, 0)])


def review_view(
    file: FileDiff, new_text: str | None, budget: int, *, context: int = REVIEW_CONTEXT
) -> FileView:
    """Return the changed hunks of ``file`` with their surroundings, fitted into ``budget`` tokens.

    ``new_text`` is the file at the PR head; without it only the hunks' own lines are shown.
    """
    if file.is_binary:
        return _empty(file.path, "binary file")
    if file.status is FileStatus.DELETED:
        return _empty(file.path, "file deleted")
    if not file.hunks:
        return _empty(file.path, "no textual changes")
    source = _source(file, new_text)
    removed = _removed_by_anchor(file.hunks)
    added = {dl.new_no for h in file.hunks for dl in h.lines if dl.kind is LineKind.ADDED and dl.new_no}
    required = merge_spans(_hunk_span(h) for h in file.hunks)

    def render(spans: Sequence[Span]) -> str:
        return _render(spans, source, lambda n: "+" if n in added else " ", removed, file.hunks)

    return _fit(file.path, source, required, required, render, budget, context, marked=True)


def fix_view(
    path: str,
    text: str,
    budget: int,
    *,
    file: FileDiff | None = None,
    focus: Sequence[Span] = (),
    context: int = FIX_CONTEXT,
) -> FileView:
    """Return the file to fix: whole when it fits in ``budget``, else windows around ``focus`` and the hunks.

    Coverage counts the whole file as required, so a windowed fix is reported as partial with the gaps.
    """
    lines = file_lines(text)
    source = dict(enumerate(lines, start=1))
    whole = "\n".join(lines)
    if lines and estimate_tokens(whole) <= budget:
        reviewed = Coverage(path, CoverageStatus.REVIEWED)
        return FileView(path, whole, estimate_tokens(whole), reviewed, True, ((1, len(lines)),))
    if not lines:
        return FileView(path, "", 0, Coverage(path, CoverageStatus.REVIEWED), True, ())
    hunk_spans = [_hunk_span(h) for h in file.hunks] if file is not None else []
    wanted = merge_spans([*focus, *hunk_spans]) or [(1, min(len(lines), 2 * context + 1))]

    def render(spans: Sequence[Span]) -> str:
        return _render(spans, source, None, {}, ())

    return _fit(path, source, wanted, [(1, len(lines))], render, budget, context)


def quote(label: str, text: str) -> str:
    """Wrap untrusted ``text`` (PR body, comments, config instructions) as clearly delimited, inert data.

    The delimiter carries a tag derived from the text's own hash, which the text cannot contain (it would
    have to hold its own hash); as a second guard, any ``<untrusted-``/``</untrusted-`` in the text is
    defused, so the block cannot be closed, or a new one opened, from inside.
    """
    safe = _DELIMITER.sub(lambda m: m.group(0).replace("<", "<\u200b"), text)
    tag = hashlib.sha256(safe.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    name = re.sub(r"[^a-z0-9_]+", "_", label.lower()).strip("_") or "data"
    return f'<untrusted-{tag} kind="{name}">\n{safe}\n</untrusted-{tag}>'


_DELIMITER = re.compile(r"</?\s*untrusted-", re.IGNORECASE)


def _empty(path: str, reason: str) -> FileView:
    return FileView(path, "", 0, skipped(path, reason))


def _source(file: FileDiff, new_text: str | None) -> dict[int, str]:
    if new_text is not None:
        return dict(enumerate(file_lines(new_text), start=1))
    return {dl.new_no: dl.text for h in file.hunks for dl in h.lines if dl.new_no is not None}


def _hunk_span(hunk: Hunk) -> Span:
    # A deletion-only hunk has no new lines; it is anchored on the line before it (or line 1).
    if hunk.new_len == 0:
        line = max(hunk.new_start, 1)
        return (line, line)
    return (hunk.new_start, hunk.new_start + hunk.new_len - 1)


def _removed_by_anchor(hunks: Iterable[Hunk]) -> dict[int, list[str]]:
    """Map "after new line N" (0: before line 1) to the removed lines shown there."""
    out: dict[int, list[str]] = {}
    for hunk in hunks:
        previous = hunk.new_start - 1 if hunk.new_len else hunk.new_start
        for dl in hunk.lines:
            if dl.new_no is not None:
                previous = dl.new_no
            elif dl.kind is LineKind.REMOVED:
                out.setdefault(previous, []).append(dl.text)
    return out


def merge_spans(spans: Iterable[Span]) -> list[Span]:
    """Return ``spans`` sorted, with overlapping or adjacent ones joined."""
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _subtract(spans: Sequence[Span], shown: Sequence[Span]) -> list[Span]:
    out: list[Span] = []
    for start, end in spans:
        cursor = start
        for s, e in shown:
            if e < cursor or s > end:
                continue
            if s > cursor:
                out.append((cursor, s - 1))
            cursor = max(cursor, e + 1)
        if cursor <= end:
            out.append((cursor, end))
    return out


def _runs(span: Span, source: dict[int, str]) -> list[Span]:
    """Split ``span`` into the runs of lines ``source`` actually holds."""
    runs: list[Span] = []
    for n in range(span[0], span[1] + 1):
        if n in source:
            if runs and runs[-1][1] == n - 1:
                runs[-1] = (runs[-1][0], n)
            else:
                runs.append((n, n))
    return runs


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _scope_start(first: int, source: dict[int, str]) -> int | None:
    """Return the line of the function/class enclosing line ``first``, if one is near enough above it."""
    anchor = next((source[n] for n in range(first, first + 5) if source.get(n, "").strip()), None)
    if anchor is None or _indent(anchor) == 0:
        return None
    for n in range(first - 1, max(first - SCOPE_LOOKBACK, 0), -1):
        line = source.get(n)
        if line is None:
            return None
        if line.strip() and _indent(line) < _indent(anchor):
            if _SCOPE.match(line):
                return n
            if _indent(line) == 0:
                return None  # left the enclosing top-level block without meeting a scope keyword
    return None


def _expand(spans: Sequence[Span], source: dict[int, str], context: int, scopes: bool) -> list[Span]:
    last = max(source) if source else 0
    out: list[Span] = []
    for start, end in spans:
        top = _scope_start(start, source) if scopes else None
        out.append((top if top is not None else max(1, start - context), min(last, end + context)))
    return [run for span in merge_spans(out) for run in _runs(span, source)]


def _render(
    spans: Sequence[Span],
    source: dict[int, str],
    marker: Callable[[int], str] | None,
    removed: dict[int, list[str]],
    hunks: Sequence[Hunk],
) -> str:
    out: list[str] = []
    for start, end in spans:
        section = next((h.section for h in hunks if h.new_start <= end and _hunk_span(h)[1] >= start), "")
        header = f"[lines {_span_text((start, end))}"
        out.append(header + (f", in: {section.strip()}]" if section.strip() else "]"))
        if marker is not None:
            out.extend(f"-{text}" for text in removed.get(start - 1, ()))
        for n in range(start, end + 1):
            out.append(source[n] if marker is None else marker(n) + source[n])
            if marker is not None:
                out.extend(f"-{text}" for text in removed.get(n, ()))
    return "\n".join(out)


def _fit(
    path: str,
    source: dict[int, str],
    wanted: Sequence[Span],
    required: Sequence[Span],
    render: Callable[[Sequence[Span]], str],
    budget: int,
    context: int,
    *,
    marked: bool = False,
) -> FileView:
    """Render the best view that fits: scoped windows, then plain windows, then as many hunks as fit."""
    reason = f"over the token budget ({budget} tokens)"
    for scopes in (True, False):
        spans = _expand(wanted, source, context, scopes)
        text = render(spans)
        if estimate_tokens(text) <= budget:
            return _view(path, text, spans, required, reason, marked)
    # Greedy, in file order: each wanted span whole if it fits, else its longest prefix that does.
    chosen: list[Span] = []
    for span in [run for want in wanted for run in _runs(want, source)]:
        if estimate_tokens(render(merge_spans([*chosen, span]))) <= budget:
            chosen = merge_spans([*chosen, span])
            continue
        low, high = span[0] - 1, span[1]  # binary search the last line that still fits
        while low < high:
            mid = (low + high + 1) // 2
            if estimate_tokens(render(merge_spans([*chosen, (span[0], mid)]))) <= budget:
                low = mid
            else:
                high = mid - 1
        if low >= span[0]:
            chosen = merge_spans([*chosen, (span[0], low)])
    if not chosen:
        return _empty(path, reason)
    return _view(path, render(chosen), chosen, required, reason, marked)


def _view(
    path: str, text: str, shown: Sequence[Span], required: Sequence[Span], reason: str, marked: bool
) -> FileView:
    omitted = tuple(_subtract(required, shown))
    status = CoverageStatus.PARTIAL if omitted else CoverageStatus.REVIEWED
    coverage = Coverage(path, status, omitted, reason if omitted else "")
    return FileView(path, text, estimate_tokens(text), coverage, False, tuple(shown), marked)


def _span_text(span: Span) -> str:
    return str(span[0]) if span[0] == span[1] else f"{span[0]}-{span[1]}"
