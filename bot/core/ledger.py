"""The ledger of findings: which ones Spark already reported on a pull request, and how people met them.

GitHub itself holds it (Spark's review threads carry their finding's marker); Redis keeps a copy per pull
request (the review flow). Every state means "never post it again"; the states say why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from bot.core.findings import read_finding_marker

# posted: Spark said it; resolved: its thread was resolved; answered: someone replied in its thread;
# dismissed: someone reacted 👎. Every state means "never post it again"; the states say why.
LedgerState = Literal["posted", "resolved", "answered", "dismissed"]
# When GitHub shows a finding in several states, the strongest human signal wins.
_LEDGER_RANK: dict[str, int] = {"posted": 0, "resolved": 1, "answered": 2, "dismissed": 3}


@dataclass(frozen=True, slots=True)
class ThreadReply:
    """One review comment as GitHub lists it: enough to tell Spark's findings and how people met them."""

    id: int
    in_reply_to_id: int | None
    author: str
    body: str
    thumbs_down: int = 0
    # The thread this comment opens (or belongs to) has been resolved.
    resolved: bool = False


def ledger_from_threads(comments: Iterable[ThreadReply], own_login: str) -> dict[str, LedgerState]:
    """Return the ledger GitHub itself shows: each finding Spark's threads carry, and how people met it.

    A thread's first comment, written by the App (``own_login``), carries the finding's marker as its last
    line; a marker in anyone else's comment counts for nothing. A 👎 on it dismisses the finding; a reply by
    anyone but the thread's author answers it; a resolved thread resolves it; otherwise it was posted.
    """
    items = list(comments)
    roots = {c.id: c for c in items if c.in_reply_to_id is None}
    answered = {
        c.in_reply_to_id
        for c in items
        if c.in_reply_to_id is not None
        and c.in_reply_to_id in roots
        and c.author != roots[c.in_reply_to_id].author
    }
    ledger: dict[str, LedgerState] = {}
    for root in roots.values():
        fp = read_finding_marker(root.body) if root.author == own_login else None
        if fp is not None:
            state: LedgerState = "posted"
            if root.thumbs_down:
                state = "dismissed"
            elif root.id in answered:
                state = "answered"
            elif root.resolved:
                state = "resolved"
            if _LEDGER_RANK[state] >= _LEDGER_RANK[ledger.get(fp, "posted")]:
                ledger[fp] = state
    return ledger


def merge_ledgers(*ledgers: Mapping[str, LedgerState]) -> dict[str, LedgerState]:
    """Return one ledger from several: each finding keeps its strongest state (👎 over answered over ...)."""
    merged: dict[str, LedgerState] = {}
    for ledger in ledgers:
        for fp, state in ledger.items():
            if fp not in merged or _LEDGER_RANK.get(state, 0) > _LEDGER_RANK.get(merged[fp], 0):
                merged[fp] = state
    return merged
