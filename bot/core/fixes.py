"""The pure steps of a fix: judge a model answer, and word the commit and the reply.

A model answer is data to check, never an instruction: it is parsed, applied to the (redacted) file the model
saw, mapped back onto the real file without touching any redacted line, and verified to parse before anything
is committed or suggested.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.core.answers import EditBlock, parse_edits
from bot.core.edits import ApplyResult, apply_edits, error_feedback
from bot.core.render import code, prose
from bot.core.secrets import PLACEHOLDER_PREFIX
from bot.core.verify import verify
from bot.core.wording import plural

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
    # For the reply: each block of the fix that was not applied, and why (across all answers).
    failed: tuple[str, ...] = ()
    # Blocks the answers addressed to another of this fix's targets, to be judged with that file.
    routed: tuple[EditBlock, ...] = ()

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
    only the lines the model rewrote come from ``edited``. An edit that writes a redaction placeholder
    (``[REDACTED:…]``, copied from what it saw) is refused too: nothing may commit one.
    """
    restored = _restore(original, shown, edited)
    if restored is None or writes_placeholder(original, restored):
        return None
    return restored


def _restore(original: str, shown: str, edited: str) -> str | None:
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


def writes_placeholder(original: str, edited: str) -> bool:
    """Return whether ``edited`` holds more redaction placeholders than the real file: a secret was lost."""
    return edited.count(PLACEHOLDER_PREFIX) > original.count(PLACEHOLDER_PREFIX)


def _describe(where: str, result: ApplyResult, parse_errors: Sequence[str]) -> list[str]:
    """Return one line per block of an answer that was not applied, for the reply."""
    return [f"{where}: {e}" for e in parse_errors] + [
        f"{where}, block {f.index}: {f.message}" for f in result.failures
    ]


# One answer as judged: (text it was located in, blocks applied before it, failures before it), its result
# and its blocks.
_Judged = tuple[tuple[str, list[EditBlock], list[str]], ApplyResult, Sequence[EditBlock]]
# Retry blocks are numbered from here when they take the place of earlier blocks (kept apart from those).
_SUBSTITUTE_INDEX = 1000


def _substitute(
    previous: _Judged, retry: Sequence[EditBlock], failed: int
) -> tuple[ApplyResult, list[EditBlock]] | None:
    """Return the earlier answer with ``retry``'s blocks in place of those they overlap, if all then apply.

    Each of the ``failed`` blocks of the earlier answer needs a retry block of its own (one that replaces
    no block that applied).
    """
    (base, done, _), earlier, blocks = previous
    located = apply_edits(base, [dataclasses.replace(b, index=_SUBSTITUTE_INDEX + b.index) for b in retry])
    if located.failures:
        return None
    spans = [(a.source_start, a.source_end) for a in located.applied]

    def overlaps(start: int, end: int) -> bool:
        return any(start <= e and s <= end for s, e in spans)

    kept = [
        b
        for b in blocks
        for a in earlier.applied
        if a.index == b.index and not overlaps(a.source_start, a.source_end)
    ]
    replacing = {
        s for s, e in spans if any(a.source_start <= e and s <= a.source_end for a in earlier.applied)
    }
    if len(spans) - len(replacing) < failed:
        return None
    combined = [*kept, *(dataclasses.replace(b, index=_SUBSTITUTE_INDEX + b.index) for b in retry)]
    result = apply_edits(base, combined, done=done)
    return None if result.failures else (result, combined)


def judge_answers(
    path: str,
    original: str,
    shown: str,
    answers: Sequence[str],
    *,
    truncated: bool = False,
    targets: Sequence[str] = (),
    routed: Sequence[EditBlock] = (),
) -> Attempt:
    """Judge every answer of one fix of ``path`` together: the first answer, then each retry, as one whole.

    ``original`` is the file at the head and ``shown`` the text the model saw (redacted). Each answer's
    blocks are located in the text the model then saw: ``shown`` for the first, the first's applied blocks
    for a retry (never text holding a refused block). A retry must apply at least one block for each block
    that failed before it; the file is committed only when every block of every answer is accounted for.
    ``routed`` are blocks other targets' answers addressed to this file (judged with the first answer).
    """
    base = shown
    done: list[EditBlock] = []
    outstanding: list[str] = []
    result: ApplyResult | None = None
    elsewhere: list[EditBlock] = []
    retry_errors: tuple[str, ...] = ()
    previous: _Judged | None = None
    for number, answer in enumerate(answers, start=1):
        where = "the first answer" if number == 1 else f"retry {number - 1}"
        last = number == len(answers)
        if last and truncated:
            return Attempt(
                path,
                None,
                ("the answer was cut off (length limit); send fewer, smaller blocks",),
                failed=(*outstanding, f"{where}: the answer was cut off by the length limit"),
            )
        parsed = parse_edits(answer, path, targets=targets)
        elsewhere.extend(parsed.routed)
        blocks: Sequence[EditBlock] = parsed.blocks
        if number == 1:
            # Numbered after the answer's own blocks, so each block of the file has its own number.
            blocks = (
                *blocks,
                *(dataclasses.replace(b, index=len(blocks) + k) for k, b in enumerate(routed, 1)),
            )
        if parsed.no_changes and not blocks:
            if outstanding:
                # The model gave up on what failed: the blocks that did apply are only part of the fix.
                return Attempt(path, None, ("NO_CHANGES after failed blocks",), failed=tuple(outstanding))
            return Attempt(path, None, no_changes=True, routed=tuple(elsewhere))
        if not blocks and not parsed.routed:
            errors = parsed.errors or ("the answer held no SEARCH/REPLACE block and no NO_CHANGES",)
            return Attempt(
                path, None, tuple(errors), failed=(*outstanding, *(f"{where}: {e}" for e in errors))
            )
        before = (base, list(done), list(outstanding))
        result = apply_edits(base, blocks, done=done)
        substituted = (
            _substitute(previous, blocks, len(outstanding)) if previous and result.failures else None
        )
        if previous is not None and substituted is not None:
            # The retry was written against the text the earlier answer saw (a block that broke the syntax
            # resent whole, or the whole answer resent): its blocks take the place of those they overlap.
            before = previous[0]
            base, done, outstanding = before[0], list(before[1]), []
            result, blocks = substituted
        applied = {a.index for a in result.applied}
        if len(applied) < len(outstanding):
            # Fewer blocks applied than had failed: some failed block was never corrected (which one cannot
            # be told, so all are listed).
            short = f"{where} applied {plural(len(applied), 'block')} for the {len(outstanding)} that failed"
            outstanding = [*outstanding, short, *_describe(where, result, parsed.errors)]
        else:
            outstanding = _describe(where, result, parsed.errors)
        previous = (before, result, blocks)
        done.extend(b for b in blocks if b.index in applied)
        base = result.text
        if outstanding:
            feedback = error_feedback(result, parsed.errors)
            if not feedback:
                feedback = "Some blocks of your earlier answer were not corrected: " + "; ".join(outstanding)
            retry_errors = (feedback,)
            continue
        retry_errors = ()
    if result is None:
        return Attempt(path, None, ("no answer",), routed=tuple(elsewhere))
    applied_count = len(done)
    if retry_errors:
        return Attempt(
            path,
            None,
            retry_errors,
            applied=applied_count,
            failed=tuple(outstanding),
            routed=tuple(elsewhere),
        )
    return judge_edit(path, original, shown, base, applied_count, tuple(elsewhere))


def judge_edit(
    path: str, original: str, shown: str, edited: str, applied: int = 1, routed: tuple[EditBlock, ...] = ()
) -> Attempt:
    """Judge one proposed edit: ``edited`` (of the redacted ``shown``) mapped back onto ``original`` without
    touching a redacted line, and verified. One judge: a fix's whole edit, a finding's replacement."""
    restored = restore_secrets(original, shown, edited)
    if restored is None:
        error = (
            "an edit touched a line whose secret value was redacted, or wrote a redaction placeholder "
            "([REDACTED:...]); leave those lines and values alone"
        )
        return Attempt(path, None, (error,), applied=applied, failed=(error,), routed=routed)
    if restored == original:
        return Attempt(path, None, no_changes=True, applied=applied, routed=routed)
    after = verify(path, restored, before=original)
    if not after.ok:
        where = f" at line {after.line}" if after.line else ""
        error = f"the edited file no longer parses as {after.language}{where}: {after.message}"
        return Attempt(path, None, (error,), applied=applied, failed=(error,), routed=routed)
    notes = () if after.checked and not after.preexisting else (after.message,)
    return Attempt(
        path,
        restored,
        applied=applied,
        verified_language=(after.language or "") if after.checked else "",
        notes=notes,
        routed=routed,
    )


def not_applied(attempts: Mapping[str, Attempt]) -> str:
    """Return, per file that was not changed, each block that failed and why (Markdown list for a reply).

    The reasons may quote the model's answer, so they are shown inert.
    """
    lines: list[str] = []
    for path, attempt in attempts.items():
        if attempt.ok:
            continue
        if attempt.no_changes:
            lines.append(f"- {code(path)}: the model found nothing to change")
            continue
        reasons = attempt.failed or attempt.errors[:1] or ("no usable answer",)
        lines.append(f"- {code(path)}:")
        lines.extend(f"  - {prose(' '.join(reason.split()))}" for reason in reasons)
    return "\n".join(lines)


def check_notes(attempts: Mapping[str, Attempt]) -> list[str]:
    """Return a reply line for each changed file that could not be fully checked, saying why."""
    return [
        f"Check of {code(path)}: {prose(note)}"
        for path, attempt in attempts.items()
        if attempt.ok
        for note in attempt.notes
    ]


def commit_message(
    instruction: str, author: str, comment_url: str, paths: Sequence[str], *, command: str = "fix"
) -> tuple[str, str]:
    """Return the commit headline (the instruction's summary) and body, with a trailer linking the comment."""
    summary = " ".join(instruction.split()) or "Apply the requested fix"
    summary = summary[0].upper() + summary[1:]
    if len(summary) > HEADLINE_LIMIT:
        summary = summary[: HEADLINE_LIMIT - 1].rstrip() + "…"
    files = ", ".join(paths)
    body = f"Requested by @{author} with /spark {command} on {files}.\n\nSpark-Requested-In: {comment_url}"
    return summary, body


def format_timings(timings: Mapping[str, float]) -> str:
    """Render named millisecond timings as a compact line (``queue 12 ms · first token 130 ms · ...``)."""
    reasoned = timings.get("reasoning_tokens", 0) > 0
    labels = {
        "queue_wait_ms": "queue",
        # Without reasoning the first token is the first of content: one figure.
        "first_token_ms" if "first_token_ms" in timings else "ttft_ms": "first token",
        **({"ttft_ms": "first content"} if reasoned else {}),
        "model_ms": "model",
        "commit_ms": "commit",
        "suggestions_ms": "suggestions",
        "total_ms": "total",
    }
    parts = [f"{label} {timings[key]:.0f} ms" for key, label in labels.items() if key in timings]
    if "completion_tokens" in timings:
        parts.append(f"{timings['completion_tokens']:.0f} tokens")
    if reasoned:
        parts.append(f"{timings['reasoning_tokens']:.0f} of them reasoning")
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
