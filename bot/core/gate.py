"""The merge gate (``review.gate``): what Spark's "Spark" check run concludes, from the findings ledger.

With ``review.gate: high`` the check fails while a verified high-severity finding (high or critical) of the
pull request stands unresolved, and succeeds otherwise; an error in Spark's own run concludes ``neutral``
with its reason, never ``success``. With ``off`` the check concludes as the review says (neutral when it
found something, success when not), and nothing here changes it.

A finding counts for the gate when a review published it and its code was found in the file at the head
it was reported on (a claim about real lines, not a guess). It is released when its thread is resolved
(GitHub's thread state wins over the ledger: a thread unresolved again holds the gate again), when it is
dismissed (a "won't fix" or a 👎 in its thread), or when it is fixed: its code is no longer in the file at
the head, or the pull request no longer changes that file. A reply in its thread does not release it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from bot.core.assembly import ReviewDraft, locate_code
from bot.core.config import Gate
from bot.core.ledger import LedgerState
from bot.core.render import code, prose
from bot.core.types import SEVERITY_ORDER, Severity
from bot.core.wording import plural

# The severities that hold the gate at ``high``.
GATING: frozenset[Severity] = frozenset({"critical", "high"})
# How a gating finding stands: open holds the gate; the others release it, and say why.
Standing = Literal["open", "resolved", "fixed", "dismissed"]
_RELEASES: tuple[Standing, ...] = ("resolved", "fixed", "dismissed")
# A finding's code is kept (for "is it still at the head?") up to this many characters; a longer one is
# compared by its first lines, which still name the place.
MAX_CODE_CHARS = 4000
# The open findings a summary lists by name; the rest are counted.
MAX_LISTED = 20


@dataclass(frozen=True, slots=True)
class GateFinding:
    """A published high-severity finding: enough to list it and to tell whether the head still holds it."""

    fingerprint: str
    severity: Severity
    path: str
    title: str
    code: str
    fixed: bool = False

    def as_dict(self) -> dict[str, Any]:
        """Return the JSON-able form Spark remembers."""
        return {
            "severity": self.severity,
            "path": self.path,
            "title": self.title,
            "code": self.code,
            "fixed": self.fixed,
        }

    @classmethod
    def from_dict(cls, fingerprint: str, data: Mapping[str, Any]) -> GateFinding | None:
        """Return the finding remembered as ``data``, or ``None`` when it is not one."""
        severity = data.get("severity")
        path, title, text = data.get("path"), data.get("title", ""), data.get("code")
        if severity not in SEVERITY_ORDER or not isinstance(path, str) or not isinstance(text, str):
            return None
        return cls(fingerprint, severity, path, str(title), text, bool(data.get("fixed", False)))


@dataclass(frozen=True, slots=True)
class GateStatus:
    """The gating findings of a pull request and how each stands."""

    standing: Mapping[str, Standing] = field(default_factory=dict)
    findings: Mapping[str, GateFinding] = field(default_factory=dict)

    @property
    def open(self) -> tuple[GateFinding, ...]:
        """Return the findings that hold the gate, most severe first, then by file."""
        held = [self.findings[fp] for fp, state in self.standing.items() if state == "open"]
        return tuple(sorted(held, key=lambda f: (SEVERITY_ORDER.index(f.severity), f.path, f.title)))

    @property
    def released(self) -> dict[Standing, int]:
        """Return how many findings were released, by why (resolved, fixed, dismissed)."""
        counts: Counter[Standing] = Counter(s for s in self.standing.values() if s != "open")
        return {state: counts[state] for state in _RELEASES if counts[state]}


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the check run concludes: its conclusion, its title, and the gate's section of the summary."""

    conclusion: str
    title: str
    section: str = ""


def published(draft: ReviewDraft) -> tuple[GateFinding, ...]:
    """Return the findings of ``draft`` that can hold the gate: published, high or critical, and verified
    (their code was found in the file at the head)."""
    shown = set(draft.fingerprints)
    return tuple(
        GateFinding(
            placed.fingerprint,
            placed.finding.severity,
            placed.finding.path,
            " ".join(placed.finding.title.split()),
            placed.finding.code[:MAX_CODE_CHARS],
        )
        for placed in (*draft.inline, *draft.in_body, *draft.over_cap)
        if placed.fingerprint in shown and placed.span is not None and placed.finding.severity in GATING
    )


def fixed_at_head(
    findings: Iterable[GateFinding], texts: Mapping[str, str], gone: Set[str]
) -> tuple[str, ...]:
    """Return the fingerprints of findings the head fixed: their file is in ``gone`` (deleted, or no longer
    changed by the pull request), or its text at the head (``texts``) no longer holds their code.

    A file whose text is not known (not read, skipped) fixes nothing: its findings still stand.
    """
    fixed = []
    for finding in findings:
        if finding.fixed:
            continue
        if finding.path in gone:
            fixed.append(finding.fingerprint)
            continue
        text = texts.get(finding.path)
        if text is not None and locate_code(text, finding.code) is None:
            fixed.append(finding.fingerprint)
    return tuple(fixed)


def gate_status(
    findings: Iterable[GateFinding],
    ledger: Mapping[str, LedgerState],
    threads: Mapping[str, bool],
) -> GateStatus:
    """Return how each gating finding stands.

    ``ledger`` is the pull request's ledger (dismissals, and resolutions of findings whose thread is not
    listed); ``threads`` maps the finding of each of Spark's threads GitHub listed to whether the thread is
    resolved: GitHub's own state wins for a finding that has a thread.
    """
    standing: dict[str, Standing] = {}
    kept: dict[str, GateFinding] = {}
    for finding in findings:
        fp = finding.fingerprint
        kept[fp] = finding
        state = ledger.get(fp)
        if finding.fixed:
            standing[fp] = "fixed"
        elif state == "dismissed":
            standing[fp] = "dismissed"
        elif fp in threads:
            standing[fp] = "resolved" if threads[fp] else "open"
        else:
            standing[fp] = "resolved" if state == "resolved" else "open"
    return GateStatus(standing, kept)


def review_verdict(gate: Gate, conclusion: str, title: str, status: GateStatus, *, gaps: int = 0) -> Verdict:
    """Return the check run's verdict after a review (or a re-evaluation) of the head.

    ``conclusion`` and ``title`` are the review's own (success, or neutral with findings or ``gaps``: files
    not reviewed); with the gate off they stand as they are. With ``high`` an unresolved finding fails the
    check; files left unreviewed make it neutral (Spark cannot vouch for them); otherwise it succeeds.
    """
    if gate == "off":
        return Verdict(conclusion, title)
    held = status.open
    if held:
        return Verdict(
            "failure",
            f"{title}; {plural(len(held), 'high-severity finding')} unresolved",
            _section(status, "fails"),
        )
    if gaps:
        return Verdict("neutral", title, _section(status, "neutral", gaps=gaps))
    return Verdict("success", title, _section(status, "passes"))


def error_verdict(gate: Gate, conclusion: str, title: str, reason: str) -> Verdict:
    """Return the check run's verdict when Spark's own run broke (``reason``: Markdown the caller made inert,
    shown as written).

    With the gate off the review's own ``conclusion`` stands (failure, or neutral when the model was
    unavailable); with ``high`` it is neutral, never success: the gate was not evaluated.
    """
    if gate == "off":
        return Verdict(conclusion, title)
    said = reason.strip().rstrip(".")
    section = (
        f"**Merge gate** ({code('review.gate: high')}): not evaluated, because Spark's own run did not "
        f"complete. {said}. This check is neutral, not a pass; re-run it to evaluate the gate."
    )
    return Verdict("neutral", title, section)


def _section(status: GateStatus, outcome: Literal["fails", "neutral", "passes"], *, gaps: int = 0) -> str:
    """Return the gate's part of the summary: the findings that hold it, and what released the others."""
    head = f"**Merge gate** ({code('review.gate: high')})"
    released = status.released
    freed = ""
    if released:
        counted = ", ".join(f"{count} {state}" for state, count in released.items())
        freed = f" {plural(sum(released.values()), 'finding')} released ({counted})."
    if outcome == "passes":
        return f"{head}: no high-severity finding stands unresolved.{freed}"
    if outcome == "neutral":
        return (
            f"{head}: no high-severity finding stands unresolved, but {plural(gaps, 'file')} "
            f"of the head {'was' if gaps == 1 else 'were'} not reviewed, so this check is neutral, "
            f"not a pass.{freed}"
        )
    held = status.open
    rows = [f"- **{f.severity}** {code(f.path)} {prose(f.title) or 'Finding'}" for f in held[:MAX_LISTED]]
    if len(held) > MAX_LISTED:
        rows.append(f"- and {len(held) - MAX_LISTED} more")
    return "\n".join(
        [
            f"{head}: {plural(len(held), 'high-severity finding')} "
            f"{'stands' if len(held) == 1 else 'stand'} unresolved, so this check fails:",
            "",
            *rows,
            "",
            (f"{freed.strip()} " if freed else "")
            + "Resolve a finding's thread, fix it (a push whose code no longer holds it), or dismiss it "
            '(reply "won\'t fix" or 👎 in its thread); then re-run this check.',
        ]
    )


def with_fixed(findings: Iterable[GateFinding], fixed: Set[str]) -> tuple[GateFinding, ...]:
    """Return ``findings`` with those in ``fixed`` marked fixed."""
    return tuple(replace(f, fixed=True) if f.fingerprint in fixed else f for f in findings)


__all__ = [
    "GATING",
    "Gate",
    "GateFinding",
    "GateStatus",
    "Standing",
    "Verdict",
    "error_verdict",
    "fixed_at_head",
    "gate_status",
    "published",
    "review_verdict",
    "with_fixed",
]
