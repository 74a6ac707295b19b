"""``/spark ask`` and replies in Spark's threads: the diff shown, the answer parsed, quotes made permalinks.

The model never writes line numbers that reach the user: it quotes code (a fenced block ``quote <path>``),
and Spark finds each quote in the file at the head commit and links those lines itself. A quote found nowhere
is dropped and said so; line numbers and GitHub links the model wrote in its prose are removed. Nothing the
model wrote can be committed: suggestion and SEARCH/REPLACE blocks are shown as plain text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.core.assembly import locate_code
from bot.core.fixes import format_timings
from bot.core.render import code, fence, permalink, prose
from bot.core.types import Diff, FileStatus
from bot.core.window import file_lines

# Files an answer is given besides a thread's: the ones the question names, then the diff's.
MAX_FILES = 6
# The diff shown is cut at this many lines (the files themselves are windowed by the token budget).
MAX_DIFF_LINES = 1500

# A fenced block the model opened with ``quote <path>`` (any fence length; the closing fence matches it).
_QUOTE = re.compile(
    r"^(?P<fence>`{3,}|~{3,})[ \t]*quote[ \t]*(?P<path>[^\n`]*?)[ \t]*\n(?P<code>.*?)\n?^(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
# Any other fenced block: shown as plain code (a ``suggestion`` block must not become committable).
_FENCE = re.compile(
    r"^(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*)\n(?P<code>.*?)\n?^(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
_FIX_LINE = re.compile(
    r"^[ \t>*_`-]*(?P<fix>/spark[ \t]+fix\b[^\n]*?)[ \t`*_.]*$", re.IGNORECASE | re.MULTILINE
)
_NOT_SHOWN = re.compile(
    r"^[ \t>*_]*NOT[ \t]+SHOWN[ \t]*:[ \t*_]*(?P<what>[^\n]*)$", re.IGNORECASE | re.MULTILINE
)
# Line numbers the model wrote ("line 42", "lines 3-5", "L12", "calc.py:42") and links to code it made up.
_LINE_WORDS = re.compile(
    r"(?:[ \t]+(?:on|at|in|see|near|around))?[ \t]*\(?\b(?:lines?|ll?\.)[ \t]*\d+"
    r"(?:[ \t]*(?:-|–|—|to|and|through)[ \t]*\d+)?\)?",
    re.IGNORECASE,
)
_LINE_ANCHOR = re.compile(r"#?\bL\d+(?:C\d+)?(?:-L\d+(?:C\d+)?)?\b")
_PATH_LINE = re.compile(r"(\.[A-Za-z0-9]{1,10}):\d+(?:[-:]\d+)?\b")
_BLOB_LINK = re.compile(r"https?://\S+/blob/[^\s)\]>]+", re.IGNORECASE)
_SEARCH_REPLACE = re.compile(r"^(?:<{5,}[ \t]*SEARCH|={5,}|>{5,}[ \t]*REPLACE)[ \t]*$", re.MULTILINE)
# Replies that dismiss a finding in its thread (the whole reply need not be only these words).
_DISMISS = re.compile(
    r"\b(?:won'?t[ \t-]*fix|wontfix|will[ \t]+not[ \t]+fix|false[ \t-]+positive)\b", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Quote:
    """Code the model quoted from a file, as it wrote it."""

    path: str
    code: str


@dataclass(frozen=True, slots=True)
class Answer:
    """The model's answer split up: prose and fenced blocks in order, quotes apart, and its two signals."""

    parts: tuple[str | Quote, ...]
    not_shown: tuple[str, ...] = ()
    fix: str = ""


@dataclass(frozen=True, slots=True)
class Citation:
    """A quote found in a file at the head commit: its lines and the code there (as shown to the model)."""

    path: str
    start: int
    end: int
    code: str


def is_dismissal(text: str) -> bool:
    """Return whether a reply in a finding's thread dismisses it (won't fix, wontfix, false positive)."""
    return _DISMISS.search(text) is not None


def diff_text(diff: Diff, max_lines: int = MAX_DIFF_LINES) -> tuple[str, bool]:
    """Return the (already redacted) diff as text without line numbers, and whether it was cut."""
    rows: list[str] = []
    for file in diff.files:
        if file.is_binary:
            rows.append(f"--- {file.path} (binary, not shown)")
            continue
        moved = f" (renamed from {file.old_path})" if file.status is FileStatus.RENAMED else ""
        rows.append(f"--- {file.path} ({file.status.value}){moved}")
        for n, hunk in enumerate(file.hunks):
            if n:
                rows.append("…")
            rows.extend(f"{line.kind.value}{line.text}" for line in hunk.lines)
    cut = len(rows) > max_lines
    return "\n".join(rows[:max_lines]), cut


def parse_answer(text: str) -> Answer:
    """Split the model's answer into prose, fenced code and quotes; take out NOT SHOWN and the fix."""
    text = text.replace("\r\n", "\n").strip()
    not_shown = tuple(m["what"].strip() for m in _NOT_SHOWN.finditer(text) if m["what"].strip())
    text = _NOT_SHOWN.sub("", text)
    fixes = [m["fix"].strip() for m in _FIX_LINE.finditer(text)]
    fix = " ".join(fixes[-1].split()) if fixes else ""
    text = _FIX_LINE.sub("", text)
    parts: list[str | Quote] = []
    cursor = 0
    for block in _FENCE.finditer(text):
        parts.append(text[cursor : block.start()])
        quoted = _QUOTE.fullmatch(block.group(0))
        if quoted is not None:
            parts.append(Quote(quoted["path"].strip(), quoted["code"]))
        else:
            # Code, never a suggestion: no info string (a "suggestion" block is committable).
            parts.append(block.group(0))
        cursor = block.end()
    parts.append(text[cursor:])
    return Answer(tuple(p for p in parts if not isinstance(p, str) or p.strip()), not_shown, fix)


def resolve_quote(quote: Quote, files: Mapping[str, str]) -> Citation | None:
    """Return where ``quote`` is in ``files`` (path -> text at the head, as shown), or None if nowhere.

    The path the model wrote decides when it names a file shown (or ends one: "calc.py"); otherwise a quote
    found in exactly one file is taken from there.
    """
    named = [p for p in files if p == quote.path] or [
        p for p in files if quote.path and p.endswith("/" + quote.path.lstrip("/"))
    ]
    candidates = named if len(named) == 1 else list(files)
    found = [(p, where) for p in candidates if (where := locate_code(files[p], quote.code)) is not None]
    if len(found) != 1:
        return None
    path, (start, end) = found[0]
    lines = file_lines(files[path])[start - 1 : end]
    return Citation(path, start, end, "\n".join(lines))


def strip_line_numbers(text: str) -> str:
    """Return prose without the line numbers and code links the model wrote (only Spark's links count)."""
    text = _BLOB_LINK.sub("", text)
    text = _LINE_ANCHOR.sub("", text)
    text = _PATH_LINE.sub(r"\1", text)
    return _LINE_WORDS.sub("", text)


@dataclass(frozen=True, slots=True)
class Rendered:
    """The reply's Markdown and how its quotes fared."""

    body: str
    cited: int
    dropped: int


def render_answer(
    answer: Answer,
    files: Mapping[str, str],
    *,
    repo: str,
    sha: str,
    timings: Mapping[str, float],
    web: str,
    notes: Sequence[str] = (),
) -> Rendered:
    """Return the reply: the answer inert, each quote a permalink at ``sha`` with its code, notes, timings."""
    out: list[str] = []
    cited = dropped = 0
    for part in answer.parts:
        if isinstance(part, Quote):
            citation = resolve_quote(part, files)
            if citation is None:
                dropped += 1
                where = f" in {code(part.path)}" if part.path else ""
                out.append(f"_(A quote{where} that is not in the code at {sha[:7]} was left out.)_")
                continue
            cited += 1
            link = permalink(repo, sha, citation.path, citation.start, citation.end, web)
            span = (
                f"line {citation.start}"
                if citation.start == citation.end
                else (f"lines {citation.start}-{citation.end}")
            )
            lines = citation.code.split("\n")
            mark = fence(lines)
            out.append(f"[{code(citation.path)} {span}]({link})\n{mark}\n{citation.code}\n{mark}")
        elif _FENCE.fullmatch(part.strip("\n")):
            block = _FENCE.fullmatch(part.strip("\n"))
            assert block is not None
            body = _SEARCH_REPLACE.sub("", block["code"])
            mark = fence(body.split("\n"))
            out.append(f"{mark}\n{body}\n{mark}")
        else:
            text = strip_line_numbers(_SEARCH_REPLACE.sub("", part)).strip("\n")
            if text.strip():
                out.append(prose(text))
    if not out:
        out.append("The model gave no answer. Ask again, or put the question another way.")
    for what in answer.not_shown:
        out.append(f"> Beyond what I was shown: {prose(strip_line_numbers(what))}")
    out.extend(notes)
    if answer.fix:
        fix = " ".join(answer.fix.split())
        out.append(f"If you want this change, comment:\n{fence([fix])}\n{fix}\n{fence([fix])}")
    out.append(f"<sub>{format_timings(timings)}</sub>")
    return Rendered("\n\n".join(out), cited, dropped)
