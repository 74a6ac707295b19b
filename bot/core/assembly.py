"""Assemble the review to publish from parsed findings: anchored inline comments, a body, a coverage table.

Pure: it receives the PR's diff, each file's findings and head text, the ledger of fingerprints already known,
and the limits; it returns what to post. The model's words are data here: titles and bodies are quoted, never
trusted for line numbers, and cannot forge a finding marker.
One module past 400 lines because assembly is one ordered pass (cap, anchor, body, coverage) whose steps
share the same few values; the ledger it consults is ``bot.core.ledger``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from bot.core import markers
from bot.core.anchors import anchor_edit, fence_for, read_suggestion, replacement_lines, right_side_hunks
from bot.core.diff import format_patch, split_lines, strip_ending
from bot.core.findings import (
    finding_marker,
    fingerprint_of,
)
from bot.core.ledger import LedgerState
from bot.core.render import code, permalink, prose
from bot.core.types import SEVERITY_ORDER, Diff, FileDiff, Finding, ReviewComment, Severity
from bot.core.window import Coverage, CoverageStatus, skipped
from bot.core.wording import plural

__all__ = [
    "FileResult",
    "Links",
    "Placed",
    "ReviewDraft",
    "ReviewLimits",
    "assemble_review",
    "coverage_section",
    "locate_code",
    "preview",
    "summarise",
]

# GitHub rejects review bodies over 65,536 characters; keep room for the coverage table.
_BODY_BUDGET = 60_000


@dataclass(frozen=True, slots=True)
class FileResult:
    """What reviewing one file produced: its findings, the head text they refer to, and how much was seen."""

    path: str
    findings: tuple[Finding, ...] = ()
    head_text: str | None = None
    # What the model saw of the file (from the context builder); ``None`` means all of it.
    coverage: Coverage | None = None


@dataclass(frozen=True, slots=True)
class ReviewLimits:
    """How much one review may say: the inline comment cap and the lowest severity reported."""

    max_inline: int = 20
    min_severity: Severity = "low"


@dataclass(frozen=True, slots=True)
class Links:
    """Where the review's body links lines it names: permalinks to ``repo`` at ``sha`` on ``web``."""

    repo: str
    sha: str
    web: str  # GITHUB_URL

    def to(self, path: str, start: int, end: int) -> str:
        """Return the permalink to lines ``start..end`` of ``path``."""
        return permalink(self.repo, self.sha, path, start, end, self.web)


@dataclass(frozen=True, slots=True)
class Placed:
    """A finding and where it went: inline comments, or the body (with a patch when it has a verified fix)."""

    finding: Finding
    fingerprint: str
    comments: tuple[ReviewComment, ...] = ()
    patch: str = ""
    # Lines ``(start, end)`` of the head file the finding's code was found on, if any.
    span: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class ReviewDraft:
    """The review to publish, and the counts a check-run summary reports."""

    body: str
    comments: tuple[ReviewComment, ...]
    inline: tuple[Placed, ...]
    in_body: tuple[Placed, ...]
    over_cap: tuple[Placed, ...]
    coverage: tuple[Coverage, ...]
    already_known: int = 0
    below_threshold: int = 0
    # Findings not repeated, by the ledger state that held them back (posted, resolved, answered, dismissed).
    known_states: Mapping[str, int] = field(default_factory=dict)
    by_severity: Mapping[str, int] = field(default_factory=dict)
    # The findings the body lists (a finding cut from a full body is not among them).
    body_fingerprints: tuple[str, ...] = ()

    @property
    def fingerprints(self) -> tuple[str, ...]:
        """Return the fingerprints this review publishes (for the ledger): its comments' and its body's.

        Taken from what Spark placed, never read back from the text (which quotes the model's words and code).
        A finding cut from a full body is not among them, so a later review may still report it.
        """
        carried = [c.fingerprint for c in self.comments if c.fingerprint] + list(self.body_fingerprints)
        return tuple(dict.fromkeys(carried))

    @property
    def finding_count(self) -> int:
        """Return how many new findings this review reports."""
        return len(self.inline) + len(self.in_body) + len(self.over_cap)


def assemble_review(
    diff: Diff,
    files: Iterable[FileResult],
    ledger: Mapping[str, LedgerState] | None = None,
    limits: ReviewLimits | None = None,
    links: Links | None = None,
) -> ReviewDraft:
    """Return the review to publish: new findings ordered by severity, anchored where GitHub allows.

    A finding at lines of a file the pull request does not change (a caller it left behind, named by the
    finding's ``line``) goes to the body, linked at the head by ``links`` when given.
    """
    ledger = ledger or {}
    limits = limits or ReviewLimits()
    results = tuple(files)
    floor = SEVERITY_ORDER.index(limits.min_severity)
    heads = {result.path: result.head_text for result in results}
    fresh: list[tuple[Finding, str]] = []
    seen: set[str] = set()
    known = below = 0
    known_states: Counter[str] = Counter()
    for result in results:
        for finding in result.findings:
            fp = fingerprint_of(finding)
            if fp in ledger:
                known += 1
                known_states[ledger[fp]] += 1
                continue
            if fp in seen:
                continue  # the same finding twice in one answer
            if SEVERITY_ORDER.index(finding.severity) > floor:
                below += 1
                continue
            seen.add(fp)
            fresh.append((finding, fp))
    fresh.sort(key=lambda pair: (SEVERITY_ORDER.index(pair[0].severity), pair[0].path, pair[0].line or 0))

    inline: list[Placed] = []
    in_body: list[Placed] = []
    over_cap: list[Placed] = []
    suggested: dict[str, set[int]] = {}
    for finding, fp in fresh:
        placed = _place(finding, fp, diff.file(finding.path), heads.get(finding.path), suggested)
        if not placed.comments:
            in_body.append(placed)
        elif len(inline) < limits.max_inline:
            inline.append(placed)
            taken = suggested.setdefault(finding.path, set())
            for comment in placed.comments:
                if read_suggestion(comment.body) is not None:
                    taken.update(range(comment.start_line or comment.line, comment.line + 1))
        else:
            over_cap.append(placed)

    coverage = _coverage(diff, results)
    by_severity = Counter(p.finding.severity for p in (*inline, *in_body, *over_cap))
    draft = ReviewDraft(
        body="",
        comments=tuple(c for p in inline for c in p.comments),
        inline=tuple(inline),
        in_body=tuple(in_body),
        over_cap=tuple(over_cap),
        coverage=coverage,
        already_known=known,
        below_threshold=below,
        known_states=dict(known_states),
        by_severity={s: by_severity[s] for s in SEVERITY_ORDER if by_severity[s]},
    )
    # The body reports the counts above, so it is written last.
    body, listed = _body(draft, limits, links)
    return replace(draft, body=body, body_fingerprints=listed)


def locate_code(
    head_text: str, code: str, *, hint: int | None = None, prefer: Mapping[int, int] | None = None
) -> tuple[int, int] | None:
    """Return the 1-based ``(start, end)`` lines where ``code`` is in ``head_text``, ignoring indentation.

    Of several matches, one inside a single hunk of ``prefer`` (line -> hunk) wins, then the nearest ``hint``.
    """
    wanted = [row.strip() for row in code.replace("\r\n", "\n").split("\n")]
    while wanted and not wanted[0]:
        wanted.pop(0)
    while wanted and not wanted[-1]:
        wanted.pop()
    if not wanted:
        return None
    rows = [strip_ending(line).strip() for line in split_lines(head_text)]
    size = len(wanted)
    spans = [
        (start + 1, start + size)
        for start in range(len(rows) - size + 1)
        if rows[start] == wanted[0] and rows[start : start + size] == wanted
    ]
    if not spans:
        return None
    hunks = prefer or {}

    def rank(span: tuple[int, int]) -> tuple[int, int]:
        holders = {hunks.get(line) for line in range(span[0], span[1] + 1)}
        inside = 0 if None not in holders and len(holders) == 1 else 1
        return inside, abs(span[0] - hint) if hint is not None else 0

    return min(spans, key=rank)


def preview(draft: ReviewDraft) -> str:
    """Return what publishing ``draft`` would post (for a dry run): each inline comment, then the body."""
    parts = ["### Inline comments", ""] if draft.comments else []
    for comment in draft.comments:
        where = (
            f"{comment.path}:{comment.start_line}-{comment.line}"
            if comment.start_line
            else (f"{comment.path}:{comment.line}")
        )
        parts += [f"**{code(where)}**", "", markers.strip(comment.body).rstrip(), ""]
    parts += ["### Review body", "", markers.strip(draft.body).rstrip()]
    return "\n".join(parts) + "\n"


def summarise(draft: ReviewDraft, timings: Mapping[str, float] | None = None) -> str:
    """Return a check-run summary (Markdown): counts by severity, where findings went, coverage, timings."""
    total = draft.finding_count
    severities = ", ".join(f"{count} {name}" for name, count in draft.by_severity.items())
    headline = f"**{plural(total, 'new finding')}**" + (f" ({severities})" if severities else "")
    lines = [
        f"Inline: {len(draft.inline)} · in the review body: {len(draft.in_body)} · "
        f"over the inline limit: {len(draft.over_cap)}",
    ]
    states = Counter(row.status for row in draft.coverage)
    reviewed, partial = states[CoverageStatus.REVIEWED], states[CoverageStatus.PARTIAL]
    lines.append(
        f"Files: {reviewed} reviewed, {partial} partially reviewed, {states[CoverageStatus.SKIPPED]} skipped"
    )
    if draft.already_known or draft.below_threshold:
        held = ", ".join(f"{count} {name}" for name, count in sorted(draft.known_states.items()))
        lines.append(
            f"Not repeated (already reported): {draft.already_known}"
            + (f" ({held})" if held else "")
            + f" · below the severity threshold: {draft.below_threshold}"
        )
    if timings:
        lines.append("Timings: " + " · ".join(f"{name} {seconds:.2f} s" for name, seconds in timings.items()))
    return "\n".join([headline, "", *(f"- {line}" for line in lines)])


def _place(
    finding: Finding,
    fp: str,
    file_diff: FileDiff | None,
    head_text: str | None,
    suggested: Mapping[str, set[int]],
) -> Placed:
    """Anchor one finding: a suggestion, else a plain comment on its code, else the body (with a patch)."""
    at = _named_span(head_text, finding)
    if head_text is None:
        # A file the review did not read (one the pull request does not change): only the body names it.
        return Placed(finding, fp, span=at)
    if not finding.code.strip():
        return Placed(finding, fp)
    hunks = right_side_hunks(file_diff) if file_diff is not None else {}
    span = (
        _applied_span(head_text, finding)
        or at
        or locate_code(head_text, finding.code, hint=finding.line, prefer=hunks)
    )
    if span is None:
        return Placed(finding, fp)
    message = _comment_text(finding)
    edited = (
        _replace_span(head_text, span, finding.replacement) if finding.replacement is not None else head_text
    )
    if edited != head_text:
        if file_diff is None:
            return Placed(finding, fp, patch=format_patch(finding.path, head_text, edited), span=span)
        anchored = anchor_edit(finding.path, head_text, edited, file_diff, message=message)
        taken = suggested.get(finding.path, set())
        clash = any(
            taken.intersection(range(c.start_line or c.line, c.line + 1)) for c in anchored.suggestions
        )
        if anchored.suggestions and not anchored.leftovers and not clash:
            comments = tuple(_marked(c, fp) for c in anchored.suggestions)
            return Placed(finding, fp, comments=comments, span=span)
        return Placed(finding, fp, patch=format_patch(finding.path, head_text, edited), span=span)
    inside = _commentable_part(span, hunks)
    if inside is None:
        return Placed(finding, fp, span=span)
    start, end = inside
    comment = ReviewComment(
        path=finding.path,
        line=end,
        body=message,
        start_line=start if end > start else None,
        start_side="RIGHT" if end > start else None,
    )
    return Placed(finding, fp, comments=(_marked(comment, fp),), span=span)


def _named_span(head_text: str | None, finding: Finding) -> tuple[int, int] | None:
    """Return the lines a finding without a fix names as its place (code from another file Spark checked it
    showed), where they still hold its code in ``head_text`` when that is known."""
    if finding.replacement is not None or finding.line is None:
        return None
    span = (finding.line, max(finding.line, finding.end_line or finding.line))
    if head_text is None:
        return span
    rows = [strip_ending(row).strip() for row in split_lines(head_text)[span[0] - 1 : span[1]]]
    wanted = [row.strip() for row in finding.code.replace("\r\n", "\n").split("\n")]
    return span if rows and rows == wanted else None


def _applied_span(head_text: str, finding: Finding) -> tuple[int, int] | None:
    """Return the lines a finding's verified edit replaced, when it carries them and they still hold its code.

    A suggestion then replaces exactly those lines: a SEARCH that starts with a blank line is not re-located
    (without the blank) onto an identical pair of lines elsewhere.
    """
    if finding.replacement is None or finding.line is None or finding.end_line is None:
        return None
    rows = [strip_ending(row).strip() for row in split_lines(head_text)[finding.line - 1 : finding.end_line]]
    wanted = [row.strip() for row in finding.code.replace("\r\n", "\n").split("\n")]
    if wanted and not wanted[-1]:
        wanted.pop()
    return (finding.line, finding.end_line) if rows and rows == wanted else None


def _marked(comment: ReviewComment, fp: str) -> ReviewComment:
    """Return ``comment`` carrying the hidden marker of ``fp``."""
    return replace(comment, body=markers.append(comment.body, "finding", fp), fingerprint=fp)


def _commentable_part(span: tuple[int, int], hunks: Mapping[int, int]) -> tuple[int, int] | None:
    """Return the longest run of ``span`` lying in one hunk (comments may not cross hunks), if any."""
    best: tuple[int, int] | None = None
    run_start: int | None = None
    for line in range(span[0], span[1] + 2):
        same = line <= span[1] and line in hunks and (run_start is None or hunks[line] == hunks[run_start])
        if same:
            run_start = line if run_start is None else run_start
            continue
        if run_start is not None:
            run = (run_start, line - 1)
            if best is None or run[1] - run[0] > best[1] - best[0]:
                best = run
        run_start = line if line <= span[1] and line in hunks else None
    return best


def _replace_span(text: str, span: tuple[int, int], replacement: str) -> str:
    """Return ``text`` with lines ``span`` replaced by ``replacement``, in the file's line endings."""
    lines = split_lines(text)
    rows = [strip_ending(row) for row in split_lines(replacement)]
    new = replacement_lines(lines[span[0] - 1 : span[1]], rows)
    return "".join([*lines[: span[0] - 1], *new, *lines[span[1] :]])


def _comment_text(finding: Finding) -> str:
    """Return the visible text of a finding: severity, title, prose (model text, made inert)."""
    head = f"**{finding.severity}** · {_title(finding)}"
    body = prose(finding.body.strip())
    return f"{head}\n\n{body}" if body else head


def _title(finding: Finding) -> str:
    """Return the finding's title on one line, inert (model text)."""
    return prose(" ".join(finding.title.split())) or "Finding"


def _where(placed: Placed, links: Links | None = None) -> str:
    """Return ``path`` or ``path:start-end`` for a listing (a permalink at the head with ``links``)."""
    if placed.span is None:
        return code(placed.finding.path)
    start, end = placed.span
    where = code(f"{placed.finding.path}:{start}" if start == end else f"{placed.finding.path}:{start}-{end}")
    return f"[{where}]({links.to(placed.finding.path, start, end)})" if links is not None else where


def _body(draft: ReviewDraft, limits: ReviewLimits, links: Links | None) -> tuple[str, tuple[str, ...]]:
    """Return the review body (counts, findings not inline, the over-cap list, coverage) and what it lists."""
    parts = ["## Spark review", "", summarise(draft), ""]
    budget = _BODY_BUDGET - len(coverage_section(draft.coverage))
    sections: list[str] = []
    listed: list[tuple[str, ...]] = []
    if draft.in_body:
        sections += ["### Findings outside the diff", ""]
        listed += [(), ()]
        for placed in draft.in_body:
            head, _, prose = _comment_text(placed.finding).partition("\n\n")
            entry = [f"- {_where(placed, links)} {head}"]
            if prose:
                entry.append("\n" + _indent(prose).rstrip("\n"))
            if placed.patch:
                fence = fence_for(placed.patch.split("\n"))
                entry.append(f"\n  {fence}diff\n" + _indent(placed.patch) + f"  {fence}")
            entry.append(f"  {finding_marker(placed.fingerprint)}")
            sections.append("\n".join(entry))
            listed.append((placed.fingerprint,))
        sections.append("")
        listed.append(())
    if draft.over_cap:
        sections += [f"### More findings (over the limit of {limits.max_inline} inline comments)", ""]
        listed += [(), ()]
        for placed in draft.over_cap:
            sections.append(
                f"- **{placed.finding.severity}** {_where(placed, links)} {_title(placed.finding)} "
                + finding_marker(placed.fingerprint)
            )
            listed.append((placed.fingerprint,))
        sections.append("")
        listed.append(())
    used = 0
    shown: list[str] = []
    for index, section in enumerate(sections):
        if used + len(section) > budget:
            left = sum(1 for s in sections[index:] if s.startswith("- "))
            parts.append(f"_… {left} more not shown (the review body is full)._\n")
            break
        parts.append(section)
        shown.extend(listed[index])
        used += len(section) + 1
    parts.append(coverage_section(draft.coverage))
    return "\n".join(parts).rstrip() + "\n", tuple(shown)


def _indent(text: str) -> str:
    """Return ``text`` indented two spaces per line, to sit inside a list item."""
    return "".join(f"  {line}" for line in split_lines(text if text.endswith("\n") else text + "\n"))


def _coverage(diff: Diff, results: Sequence[FileResult]) -> tuple[Coverage, ...]:
    """Return one coverage row per file: what the context builder recorded, or "not reviewed"."""
    rows = {r.path: r.coverage or Coverage(r.path, CoverageStatus.REVIEWED) for r in results}
    ordered = [rows.pop(f.path) if f.path in rows else skipped(f.path, "not reviewed") for f in diff.files]
    return (*ordered, *rows.values())


def coverage_section(coverage: Sequence[Coverage]) -> str:
    """Return the coverage section: one line per file, as the context builder describes it."""
    if not coverage:
        return ""
    rows = [f"- {row.describe()}" for row in coverage]
    return "\n".join(["### Coverage", "", *rows]) + "\n"
