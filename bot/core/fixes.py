"""The pure steps of a fix: judge a model answer, and word the commit and the reply.

A model answer is data to check, never an instruction: it is parsed, applied to the (redacted) file the model
saw, mapped back onto the real file without touching any redacted line, and verified to parse before anything
is committed or suggested.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.core.edits import apply_edits, error_feedback, parse_edits
from bot.core.render import code, prose
from bot.core.verify import verify

HEADLINE_LIMIT = 72


@dataclass(frozen=True, slots=True)
class Attempt:
    """What came of one model answer for one file: the new text, or the errors to feed back once."""

    path: str
    text: str | None
    errors: tuple[str, ...] = ()
    no_changes: bool = False
    applied: int = 0
    verified_language: str = ""
    notes: tuple[str, ...] = ()
    # The shown text with the blocks that did apply, so a retry only resends the failed ones.
    partial: str | None = None

    @property
    def ok(self) -> bool:
        """Return whether the answer produced a verified new text."""
        return self.text is not None and not self.errors


@dataclass(frozen=True, slots=True)
class FileChange:
    """A verified change to one file, with its line counts for the reply."""

    path: str
    before: str
    after: str
    added: int = field(default=0)
    removed: int = field(default=0)

    @classmethod
    def of(cls, path: str, before: str, after: str) -> FileChange:
        """Return the change with its added/removed line counts."""
        added = removed = 0
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0):
            if line.startswith("+") and not line.startswith("+++"):
                added += 1
            elif line.startswith("-") and not line.startswith("---"):
                removed += 1
        return cls(path, before, after, added, removed)


def restore_secrets(original: str, shown: str, edited: str) -> str | None:
    """Map an edit of the redacted ``shown`` text back onto ``original``; None if it touches a redacted line.

    Redaction keeps line count, so lines the edit left equal are taken from the original (secrets intact) and
    only the lines the model rewrote come from ``edited``.
    """
    if original == shown:
        return edited
    real, seen, new = (
        original.splitlines(keepends=True),
        shown.splitlines(keepends=True),
        edited.splitlines(keepends=True),
    )
    if len(real) != len(seen):
        return None
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, seen, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.extend(real[i1:i2])
            continue
        if real[i1:i2] != seen[i1:i2]:
            return None
        out.extend(new[j1:j2])
    return "".join(out)


def judge_answer(
    path: str, original: str, shown: str, answer: str, *, base: str | None = None, truncated: bool = False
) -> Attempt:
    """Parse, apply, restore and verify one model answer for ``path``.

    ``original`` is the file at the head, ``shown`` the text the model saw (redacted), ``base`` the text
    to apply to (``shown`` plus the blocks of an earlier answer that applied; default ``shown``).
    """
    parsed = parse_edits(answer, path)
    if truncated:
        return Attempt(path, None, ("the answer was cut off (length limit); send fewer, smaller blocks",))
    if parsed.no_changes and not parsed.blocks:
        return Attempt(path, None, no_changes=True)
    if not parsed.blocks:
        errors = parsed.errors or ("the answer held no SEARCH/REPLACE block and no NO_CHANGES",)
        return Attempt(path, None, tuple(errors))
    result = apply_edits(shown if base is None else base, parsed.blocks)
    if not result.ok or parsed.errors:
        feedback = error_feedback(result, parsed.errors)
        return Attempt(path, None, (feedback,), applied=len(result.applied), partial=result.text)
    restored = restore_secrets(original, shown, result.text)
    if restored is None:
        return Attempt(
            path, None, ("an edit touched a line whose secret value was redacted; leave those lines alone",)
        )
    if restored == original:
        return Attempt(path, None, no_changes=True, applied=len(result.applied))
    after = verify(path, restored)
    if not after.ok:
        before = verify(path, original)
        if before.ok:
            where = f" at line {after.line}" if after.line else ""
            return Attempt(
                path,
                None,
                (f"the edited file no longer parses as {after.language}{where}: {after.message}",),
                applied=len(result.applied),
            )
        notes = (f"{path} did not parse before the fix either ({before.message}); not blamed on the edit",)
        return Attempt(path, restored, applied=len(result.applied), notes=notes)
    return Attempt(
        path,
        restored,
        applied=len(result.applied),
        verified_language=(after.language or "") if after.checked else "",
    )


def commit_message(instruction: str, author: str, comment_url: str, paths: Sequence[str]) -> tuple[str, str]:
    """Return the commit headline (the instruction's summary) and body, with a trailer linking the comment."""
    summary = " ".join(instruction.split()) or "Apply the requested fix"
    summary = summary[0].upper() + summary[1:]
    if len(summary) > HEADLINE_LIMIT:
        summary = summary[: HEADLINE_LIMIT - 1].rstrip() + "…"
    files = ", ".join(paths)
    body = f"Requested by @{author} with /spark fix on {files}.\n\nSpark-Requested-In: {comment_url}"
    return summary, body


def format_timings(timings: Mapping[str, float]) -> str:
    """Render named millisecond timings as a compact line (``queue 12 ms · first token 130 ms · ...``)."""
    labels = {
        "queue_wait_ms": "queue",
        "ttft_ms": "first token",
        "model_ms": "model",
        "commit_ms": "commit",
        "total_ms": "total",
    }
    parts = [f"{label} {timings[key]:.0f} ms" for key, label in labels.items() if key in timings]
    if "completion_tokens" in timings:
        parts.append(f"{timings['completion_tokens']:.0f} tokens")
    if timings.get("tokens_per_second"):
        parts.append(f"{timings['tokens_per_second']:.0f} tok/s")
    return " · ".join(parts)


def fix_reply(
    changes: Sequence[FileChange],
    commit_url: str,
    timings: Mapping[str, float],
    unchanged: Sequence[tuple[str, str]] = (),
) -> str:
    """Return the reply after a committed fix: what changed, what was left and why, commit and timings."""
    files = "\n".join(f"- {code(c.path)} (+{c.added} −{c.removed})" for c in changes)
    if unchanged:
        # Why a file was left alone may quote the model's answer: shown inert.
        files += "\n\nNot changed:\n" + "\n".join(f"- {code(path)}: {prose(why)}" for path, why in unchanged)
    return f"Pushed a fix in {commit_url}\n\n{files}\n\n<sub>{format_timings(timings)}</sub>"
