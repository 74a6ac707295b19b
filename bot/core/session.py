"""A pull request's session with Spark: its last commands and what came of them, and how a prompt shows it.

Pure: the shape, the bounds (a few entries, each trimmed), the JSON form the store keeps, and the history a
follow-up ``/spark fix`` reads. ``workers.memory.session`` keeps it in Redis.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from bot.core.window import quote

# The last this many commands are kept: a follow-up refines the last change or two, not the whole history.
MAX_ENTRIES = 12
# Each entry's words are trimmed (instructions, questions, answers), and so is a fix's diff.
MAX_TEXT_CHARS = 2_000
MAX_DIFF_CHARS = 6_000
TRIMMED = "\n[... trimmed]"

# Outcomes a command's entry can carry; a fix that has not finished yet is "running".
RUNNING = "running"
COMMITTED = "committed"
SUPERSEDED = "superseded"
UNDONE = "undone"
ANSWERED = "answered"


def entry_id(command: str, comment_id: int | str) -> str:
    """Return the id of the entry of the command a comment gave (``fix-123``), or of a commit."""
    return f"{command}-{comment_id}"


def trim(text: str, limit: int) -> str:
    """Return ``text`` cut to at most ``limit`` characters, saying so when it was cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(TRIMMED))] + TRIMMED


@dataclass(frozen=True, slots=True)
class Entry:
    """One command on the pull request and what came of it (a commit, an answer, an undo).

    ``id`` names the command once (the comment that asked, e.g. ``fix-123``): recording it again replaces
    the entry, so a job run twice leaves one entry and a fix's outcome updates the entry its start made.
    """

    id: str
    command: str
    author: str
    text: str = ""
    outcome: str = RUNNING
    # The order commands of one kind were given in (the comment id): a newer fix supersedes an older one.
    order: int = 0
    # A commit Spark made for this command: the files it changed, its diff, its SHA and the head it was on.
    files: tuple[str, ...] = ()
    diff: str = ""
    sha: str = ""
    parent: str = ""
    # What Spark answered (ask, thread replies) or said it did.
    answer: str = ""
    # Another entry this one acts on (an undo names the fix it reverted).
    target: str = ""

    def trimmed(self) -> Entry:
        """Return the entry with its words and diff within the session's bounds."""
        return replace(
            self,
            text=trim(self.text, MAX_TEXT_CHARS),
            answer=trim(self.answer, MAX_TEXT_CHARS),
            diff=trim(self.diff, MAX_DIFF_CHARS),
        )

    def as_dict(self) -> dict[str, Any]:
        """Return the entry as JSON types, without the fields left at their defaults."""
        data: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value != f.default or f.name in ("id", "command", "author"):
                data[f.name] = list(value) if isinstance(value, tuple) else value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Entry:
        """Return the entry ``as_dict`` wrote, ignoring fields this version does not know."""
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        if "files" in known:
            known["files"] = tuple(str(p) for p in known["files"])
        return cls(**known)


@dataclass(frozen=True, slots=True)
class Session:
    """The last ``MAX_ENTRIES`` commands on one pull request, oldest first."""

    entries: tuple[Entry, ...] = field(default_factory=tuple)

    def with_entry(self, entry: Entry) -> Session:
        """Return the session with ``entry`` recorded (replacing the one with its id, else last), bounded."""
        entry = entry.trimmed()
        kept = list(self.entries)
        for n, old in enumerate(kept):
            if old.id == entry.id:
                kept[n] = entry
                break
        else:
            kept.append(entry)
        return Session(tuple(kept[-MAX_ENTRIES:]))

    def updated(self, entry_id: str, **changes: Any) -> Session:
        """Return the session with the entry ``entry_id`` changed (unchanged when it holds no such entry)."""
        old = self.get(entry_id)
        return self if old is None else self.with_entry(replace(old, **changes))

    def get(self, entry_id: str) -> Entry | None:
        """Return the entry recorded under ``entry_id``, if the session still holds it."""
        return next((e for e in self.entries if e.id == entry_id), None)

    def last_commit(self) -> Entry | None:
        """Return the newest entry that made a commit (a fix, or an undo), if any."""
        return next((e for e in reversed(self.entries) if e.sha and e.outcome != SUPERSEDED), None)

    def to_json(self) -> str:
        """Return the session as the JSON document the store keeps."""
        return json.dumps([e.as_dict() for e in self.entries], separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes | None) -> Session:
        """Return the session the store kept (an empty one for nothing, or for a document it cannot read)."""
        if not raw:
            return cls()
        try:
            items = json.loads(raw)
        except ValueError:
            return cls()
        if not isinstance(items, list):
            return cls()
        return cls(tuple(Entry.from_dict(item) for item in items if isinstance(item, dict)))


def superseded_by(session: Session, entry: Entry) -> list[Entry]:
    """Return the fixes ``entry`` (a newer ``/spark fix``) superseded: older, and never committed.

    Only those since the last commit count: words that led to a commit are shown with that commit instead.
    A fix still "running" when a newer one starts is superseded by it (the newer one cancels it).
    """
    found: list[Entry] = []
    for old in session.entries:
        if old.id == entry.id:
            break
        if old.sha:
            found = []
        elif old.command == "fix" and old.outcome in (RUNNING, SUPERSEDED) and old.order < entry.order:
            found.append(old)
    return found


def history_text(session: Session, entry: Entry) -> str:
    """Return what a follow-up (``entry``) is shown of the session: earlier commits, answers, and for a fix
    the words of fixes it superseded; empty when there is nothing to show.

    Every piece of text here came from users or the model, so each is quoted as data.
    """
    earlier = _before(session.entries, entry.id)
    parts: list[str] = []
    for old in earlier:
        if old.sha and old.command == "fix":
            state = "later undone" if old.outcome == UNDONE else f"commit {old.sha[:7]}"
            files = ", ".join(old.files)
            parts.append(
                f"Spark's earlier fix ({state}, files: {files}), asked by {old.author}:\n"
                + quote("earlier request", old.text or "(no instructions)")
                + "\n"
                + quote("earlier change", old.diff or "(no diff kept)")
            )
        elif old.sha and old.command == "safe-fixes":
            state = "later undone" if old.outcome == UNDONE else f"commit {old.sha[:7]}"
            files = ", ".join(old.files)
            parts.append(f"Spark applied its review's suggested fixes ({state}, files: {files}).")
        elif old.sha and old.command == "undo":
            parts.append(f"{old.author} undid that fix with `/spark undo` (commit {old.sha[:7]}).")
        elif old.answer and old.outcome == ANSWERED:
            how = (
                "asked Spark (`/spark ask`)" if old.command == "ask" else "wrote to Spark in a review thread"
            )
            if old.command == "describe":
                how = "asked Spark for a summary of the pull request (`/spark describe`)"
            parts.append(
                f"{old.author} {how}:\n"
                + quote("question", old.text)
                + "\n"
                + quote("Spark's answer", old.answer)
            )
    superseded = superseded_by(session, entry) if entry.command == "fix" else []
    if superseded:
        parts.append(
            "Requests this one replaced while they were still being worked on (nothing was committed for "
            "them); keep what they asked unless the new request says otherwise:\n"
            + "\n".join(
                quote(f"request by {old.author}", old.text or "(no instructions)") for old in superseded
            )
        )
    if not parts:
        return ""
    follow = (
        "The new request may refine or correct the last change"
        if entry.command == "fix"
        else "The question may be about any of it"
    )
    return (
        f"Earlier on this pull request (the session with Spark, oldest first). {follow}:\n\n"
        + "\n\n".join(parts)
        + "\n"
    )


def _before(entries: Iterable[Entry], entry_id: str) -> list[Entry]:
    earlier: list[Entry] = []
    for e in entries:
        if e.id == entry_id:
            break
        earlier.append(e)
    return earlier
