"""Failed checks turned into what Spark says and fixes: each check's located failures, the check run's summary
line, the files a fix targets (with why), and the instruction the model is given."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase

from bot.core.ci_failures import Failure, locate, parse_failures, repo_path
from bot.core.ci_log import LogExcerpt
from bot.core.render import code
from bot.core.wording import plural

# The conclusions of a check that failed. `action_required` is a failure a person must act on first (a
# deployment review); Spark reads it like the others, its annotations say what is wanted.
FAILING = frozenset({"failure", "timed_out", "action_required"})
# How much of a log becomes the instruction: lines around each failure, the tail when nothing was located.
EVIDENCE_BEFORE = 2
EVIDENCE_AFTER = 8
MAX_EVIDENCE_LINES = 120
TAIL_LINES = 40
# A check's report lists this many failures at most (its log may have thousands).
MAX_FAILURES = 50


@dataclass(frozen=True, slots=True)
class Annotation:
    """One check-run annotation as GitHub lists it."""

    path: str
    start_line: int | None
    level: str  # notice, warning, failure
    message: str
    title: str = ""


@dataclass(frozen=True, slots=True)
class CheckReport:
    """One failed check as Spark read it: its failures located, the log lines showing them."""

    name: str
    check_run_id: int
    conclusion: str
    failures: tuple[Failure, ...]
    evidence: tuple[str, ...] = ()
    # "log" (the job's log was read), "annotations" (no log: not an Actions job, no `actions: read`, expired),
    # "pending" (known from its webhook only: what it reports is being read).
    source: str = "annotations"
    note: str = ""  # why the log was not read, when it was not

    @property
    def files(self) -> tuple[str, ...]:
        """The files blamed, in order, each once."""
        return tuple(dict.fromkeys(failure.path for failure in self.failures))


def pending(name: str, check_run_id: int, conclusion: str) -> CheckReport:
    """A failed check known from its webhook alone: shown at once, what it reports read meanwhile."""
    return CheckReport(name, check_run_id, conclusion, (), source="pending")


def selects_check(name: str, patterns: Sequence[str]) -> bool:
    """Whether ``ci.checks`` lets Spark act on a check of this name (no patterns: every check).

    Check names are not paths ("lint / ruff (3.12)"), so they are matched as whole names with shell
    wildcards, case-sensitively as GitHub shows them.
    """
    return not patterns or any(fnmatchcase(name, pattern) for pattern in patterns)


def annotation_failures(check: str, annotations: Iterable[Annotation]) -> list[Failure]:
    """Failures annotations name: failure-level, on a repository file.

    The annotation every failed Actions step leaves ("Process completed with exit code 1.") is on the path
    ``.github``, no file: it names nothing.
    """
    failures = []
    for annotation in annotations:
        path = repo_path(annotation.path) if annotation.level == "failure" else None
        if path is None:
            continue
        failures.append(Failure(check, path, annotation.start_line, annotation.message.splitlines()[0]))
    return failures


def read_check(
    name: str,
    check_run_id: int,
    conclusion: str,
    annotations: Sequence[Annotation],
    excerpt: LogExcerpt | None,
    files: Collection[str],
    *,
    note: str = "",
) -> CheckReport:
    """A failed check's report: the log's failures (else its annotations') located among ``files``."""
    found = parse_failures(excerpt.lines) if excerpt is not None else []
    seen = {(failure.path, failure.line) for failure in found}
    found += [a for a in annotation_failures(name, annotations) if (a.path, a.line) not in seen]
    located: list[Failure] = []
    for failure in found:
        path = locate(failure, files)
        if path is None:
            continue
        via = locate(replace(failure, path=failure.via), files) if failure.via else None
        located.append(replace(failure, path=path, via=via))
    located = located[:MAX_FAILURES]
    evidence = _evidence(excerpt, located) if excerpt is not None else ()
    source = "log" if excerpt is not None else "annotations"
    return CheckReport(name, check_run_id, conclusion, tuple(located), evidence, source, note)


def _evidence(excerpt: LogExcerpt, failures: Sequence[Failure]) -> tuple[str, ...]:
    """The log lines around each failure, or the failing step's tail when none was located."""
    if not failures:
        return tuple(line.text for line in excerpt.tail(TAIL_LINES))
    wanted: set[int] = set()
    for failure in failures:
        wanted.update(range(failure.log_line - EVIDENCE_BEFORE, failure.log_line + EVIDENCE_AFTER + 1))
    lines = [line.text for line in excerpt.lines if line.number in wanted]
    return tuple(lines[:MAX_EVIDENCE_LINES])


def _check_phrase(report: CheckReport) -> str:
    if report.source == "pending":
        return f"{report.name} (reading what failed)"
    count = len(report.failures)
    if not count:
        return f"{report.name} (nothing located in the repository)"
    tests = [failure for failure in report.failures if failure.test is not None]
    kind = "failure" if len(tests) == count else "error"
    files = report.files
    if len(files) == 1 and not report.failures[0].via:
        return f"{report.name} ({plural(count, kind)} in {code(files[0])})"
    moved = [f"{code(f.via)} → {code(f.path)}" for f in report.failures if f.via and f.via != f.path]
    shown = list(dict.fromkeys(moved)) + [code(path) for path in files if not any(path in m for m in moved)]
    more = f" and {len(shown) - 3} more" if len(shown) > 3 else ""
    return f"{report.name} ({plural(count, kind)}, {', '.join(shown[:3])}{more})"


def summary_line(reports: Sequence[CheckReport]) -> str:
    """The check run's line: "2 checks failed: ruff (3 errors in `src/x.py`), pytest (1 failure, ...)"."""
    return f"{plural(len(reports), 'check')} failed: " + ", ".join(_check_phrase(r) for r in reports)


@dataclass(frozen=True, slots=True)
class CiTargets:
    """What a CI fix edits, what it may not (with why), and where a failing test led to another file."""

    paths: tuple[str, ...]
    refused: tuple[tuple[str, str], ...]
    moved: tuple[tuple[str, str], ...]  # (test file, product file): the traceback ends in the product file


def ci_targets(reports: Sequence[CheckReport], refusal: Callable[[str], str | None]) -> CiTargets:
    """The files the failures point to, each once; those Spark may not edit are refused with the reason."""
    paths: list[str] = []
    refused: dict[str, str] = {}
    moved: dict[tuple[str, str], None] = {}
    for report in reports:
        for failure in report.failures:
            reason = refusal(failure.path)
            if reason is not None:
                refused.setdefault(failure.path, reason)
            elif failure.path not in paths:
                paths.append(failure.path)
            if failure.via and failure.via != failure.path:
                moved[(failure.via, failure.path)] = None
    return CiTargets(tuple(paths), tuple(refused.items()), tuple(moved))


def instruction(reports: Sequence[CheckReport], path: str) -> str:
    """What the model is asked for ``path``: the failures pointing to it, then the log lines showing them."""
    lines = ["Make the failing CI checks pass. Change only what these failures need."]
    for report in reports:
        mine = [failure for failure in report.failures if failure.path == path]
        if not mine:
            continue
        lines.append(f"\nCheck {report.name!r} ({report.conclusion}):")
        for failure in mine:
            where = f"line {failure.line}" if failure.line else "the file"
            test = f" in test {failure.test}" if failure.test else ""
            via = f" (the traceback started in {failure.via})" if failure.via else ""
            lines.append(f"- {failure.tool}: {where}{test}{via}: {failure.message}")
        if report.evidence:
            lines.append("Log lines:")
            lines.extend(f"    {text}" for text in report.evidence)
    return "\n".join(lines)


# Spark's own check run for failed checks, and its button (GitHub: label <= 20, description <= 40 characters).
CHECK_NAME = "Spark CI"
FIX_ACTION = "fix_ci"
FIX_BUTTON = {"label": "Fix CI", "identifier": FIX_ACTION, "description": "Commit a verified fix for these"}
GRANT_ACTIONS = (
    "Spark cannot read GitHub Actions logs here: this installation has not granted the App `actions: read`, "
    "so it reads the checks' annotations only. An owner can grant it under the organization's (or account's) "
    "Settings → GitHub Apps → Spark → Configure, by accepting the requested permissions."
)


def offer(reports: Sequence[CheckReport], *, mode: str, fixable: bool) -> dict[str, str]:
    """The output of Spark's CI check run: the summary line as title, each check's failures, what to do."""
    lines = []
    for report in reports:
        lines.append(f"**{report.name}** ({report.conclusion})")
        for failure in report.failures[:10]:
            via = f" (from {code(failure.via)})" if failure.via else ""
            lines.append(f"- {code(failure.where)}{via}: {failure.tool}: {failure.message}")
        if len(report.failures) > 10:
            lines.append(f"- and {len(report.failures) - 10} more")
        if report.source == "pending":
            lines.append("- Spark is reading what failed (annotations, the log); the files follow here.")
        if report.note:
            lines.append(f"- {report.note}")
    if not fixable:
        lines.append("\nNothing here points to a file Spark may edit, so there is no fix to offer.")
    elif mode == "auto":
        lines.append("\nSpark is fixing these by itself (`ci.fix: auto`).")
    else:
        lines.append(
            "\nPress **Fix CI** above, or comment `/spark fix ci`, for one verified commit that fixes them."
        )
    return {"title": summary_line(reports), "summary": "\n".join(lines)}


def withdrawn(reason: str) -> dict[str, str]:
    """The output of Spark's CI check run when an offer made from memory does not hold (``reason``)."""
    return {
        "title": "No fix offered",
        "summary": f"Spark offers no fix of these failures: {reason}.",
    }


def stop_notice(fixed_before: Collection[str], failing: Collection[str]) -> str | None:
    """What auto mode says, once, when checks its own fix was for fail again on that fix (else ``None``).

    Auto mode never fixes a failure on a commit Spark made itself; a check its fix did not fix is said, with
    ``/spark undo`` offered, instead of being tried twice.
    """
    again = sorted(set(failing) & set(fixed_before))
    if not again:
        return None
    names = ", ".join(code(name) for name in again)
    return (
        f"{names} failed again on Spark's own fix, so Spark stops here rather than try twice. "
        "Comment `/spark undo` to revert that commit, or push a fix yourself."
    )


def regressions(before: Mapping[str, str | None], after: Mapping[str, str | None]) -> list[str]:
    """Checks that passed on the previous head and fail on this one (conclusions by check name)."""
    return sorted(
        name for name, conclusion in after.items() if conclusion in FAILING and before.get(name) == "success"
    )
