"""Context recall on real histories: does the model see the lines of other files a change breaks?

From each repository's git history (bare repositories named in ``SPARK_BENCH_REPOS``, comma-separated; none
is kept in this project), commits where a definition changed in one file (A) and lines referencing that
name changed in another file (B) of the same commit. A's change alone becomes a pull request on the parent
commit's tree; the index of that head is made the way Spark makes it (the parent's listing updated from the
previous one, then A's new blob), and the context chosen for a review of A (and for a fix of A) is checked
against B's changed lines that reference the name (at the parent): the recall is the share of those lines
the context shows. Precision is the share of shown code lines that define or reference a name the change
touches. Tokens are the context's estimate per request (every changed file of every sampled commit).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bot.core import crossref
from bot.core.diff import parse_diff
from bot.core.symbols import index_language
from bot.index.build import Change, Indexer, Listing, StaleAttributes
from bot.index.lookup import RepoIndex
from bot.index.store import LocalStore

COMMITS = int(os.environ.get("SPARK_BENCH_COMMITS", "400"))
MAX_FILES_PER_COMMIT = 12


def git(repo: Path, *args: str, text: bool = True) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=text, check=True).stdout


def blob(repo: Path, sha: str) -> bytes:
    command = ["git", "-C", str(repo), "cat-file", "blob", sha]
    return subprocess.run(command, capture_output=True, check=True).stdout


@dataclass
class Tally:
    truth: int = 0
    review_hits: int = 0
    fix_hits: int = 0
    cases: int = 0
    review_case_recall: list[float] = field(default_factory=list)
    fix_case_recall: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    fix_tokens: list[int] = field(default_factory=list)
    shown_lines: int = 0
    relevant_lines: int = 0


def changes_between(repo: Path, old: str, new: str) -> list[Change]:
    out: list[Change] = []
    for line in git(repo, "diff-tree", "-r", "--no-renames", old, new).splitlines():
        meta, _, path = line.partition("\t")
        fields = meta.split()
        status = {"A": "added", "D": "removed"}.get(fields[4][0], "modified")
        out.append(Change(path, status, fields[3] if status != "removed" else fields[2]))
    return out


def archive(repo: Path, commit: str) -> bytes:
    """Return the commit's archive as GitHub would serve it (gzipped tar under one top directory)."""
    command = [
        "git",
        "-C",
        str(repo),
        "archive",
        "--format=tar.gz",
        f"--prefix=owner-repo-{commit[:7]}/",
        commit,
    ]
    return subprocess.run(command, capture_output=True, check=True).stdout


def read_blobs(repo: Path):  # type: ignore[no-untyped-def]
    def read(shas):  # type: ignore[no-untyped-def]
        return {sha: blob(repo, sha) for sha in shas}

    return read


def precision_lines(context: crossref.CrossContext, index: RepoIndex, names: set[str]) -> tuple[int, int]:
    found = index.symbols(context.shown)
    shown = relevant = 0
    for path, spans in context.shown.items():
        symbols = found.get(path)
        if symbols is None:
            continue
        lines = {n for name in names for n in symbols.references.get(name, ())}
        lines |= {d.start for d in symbols.definitions if d.name in names}
        for start, end in spans:
            shown += end - start + 1
            relevant += sum(start <= n <= end for n in lines)
    return shown, relevant


def run_repo(repo: Path, tally: Tally) -> None:
    commits = git(repo, "log", "--no-merges", "--first-parent", "--format=%H %P", f"-n{COMMITS}").splitlines()
    candidates = [c.split() for c in reversed(commits) if len(c.split()) == 2]
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalStore(Path(tmp) / "store.sqlite3", 4_000_000_000)
        indexer = Indexer(store)
        name = repo.parent.name
        listing: Listing | None = None
        listed_at = ""
        for commit, parent in candidates:
            changed = [
                c
                for c in changes_between(repo, parent, commit)
                if c.status == "modified" and index_language(c.path) is not None
            ]
            if len(changed) < 2 or len(changed) > MAX_FILES_PER_COMMIT:
                continue
            # The parent's index, updated from the last one Spark made (the cold build once).
            try:
                if listing is None:
                    raise StaleAttributes
                changes = changes_between(repo, listed_at, parent)
                listing = indexer.update(name, parent, listing, changes, read_blobs(repo))
            except StaleAttributes:
                listing = indexer.build(name, parent, [archive(repo, parent)])
            listed_at = parent
            for a in changed:
                evaluate(repo, indexer, name, listing, parent, commit, a, changed, tally)


def evaluate(
    repo: Path,
    indexer: Indexer,
    name: str,
    listing: Listing,
    parent: str,
    commit: str,
    a: Change,
    changed: list[Change],
    tally: Tally,
) -> None:
    at_parent = RepoIndex(indexer.store, name, parent, listing)
    head_listing = indexer.update(name, f"{commit}-pr-{a.path}", listing, [a], read_blobs(repo))
    index = RepoIndex(indexer.store, name, commit, head_listing)
    base_a = at_parent.symbols([a.path]).get(a.path)
    head_a = index.symbols([a.path]).get(a.path)
    if base_a is None or head_a is None:
        return
    diff = parse_diff(git(repo, "diff", "-U3", parent, commit, "--", a.path))
    files = list(diff.files)
    what = crossref.touched(files, {a.path: head_a}, {a.path: base_a})
    names = {n for n, how in what.changed.items() if how != "added"}
    if not names:
        return
    # The lines of the other files that reference a changed name and changed too (at the parent).
    truths: dict[str, set[int]] = {}
    for b in changed:
        if b.path == a.path:
            continue
        base_b = at_parent.symbols([b.path]).get(b.path)
        if base_b is None:
            continue
        b_diff = parse_diff(git(repo, "diff", "-U0", parent, commit, "--", b.path))
        removed = {
            dl.old_no
            for f in b_diff.files
            for h in f.hunks
            for dl in h.lines
            if dl.old_no and dl.new_no is None
        }
        truth = {n for name_ in names for n in base_b.references.get(name_, ()) if n in removed}
        if truth:
            truths[b.path] = truth
    if not truths:
        return
    review = crossref.choose(files, what, index, crossref.REVIEW_TOKENS)
    fix = crossref.choose(files, what, index, crossref.FIX_TOKENS, references_first=False)
    tally.tokens.append(review.tokens)
    tally.fix_tokens.append(fix.tokens)
    shown, relevant = precision_lines(review, index, set(what.changed) | set(what.used))
    tally.shown_lines += shown
    tally.relevant_lines += relevant
    for path, truth in truths.items():
        review_hits = sum(any(s <= n <= e for s, e in review.shown.get(path, ())) for n in truth)
        fix_hits = sum(any(s <= n <= e for s, e in fix.shown.get(path, ())) for n in truth)
        if os.environ.get("SPARK_BENCH_DEBUG") and review_hits < len(truth):
            print(
                f"  miss {commit[:8]} {a.path} -> {path}: {sorted(names)} lines {sorted(truth)}; "
                f"shown {review.shown.get(path)}; notes {review.notes}; tokens {review.tokens}",
                file=sys.stderr,
            )
        tally.cases += 1
        tally.truth += len(truth)
        tally.review_hits += review_hits
        tally.fix_hits += fix_hits
        tally.review_case_recall.append(review_hits / len(truth))
        tally.fix_case_recall.append(fix_hits / len(truth))


def main() -> int:
    repos = [Path(p) for p in os.environ.get("SPARK_BENCH_REPOS", "").split(",") if p]
    if not repos:
        print("SPARK_BENCH_REPOS names no repository (bare git directories, comma-separated): skipped")
        return 0
    print(
        f"budgets: review {crossref.REVIEW_TOKENS} tokens, fix {crossref.FIX_TOKENS} tokens; "
        f"last {COMMITS} non-merge commits of each repository"
    )
    print(
        "| repository | cases | lines to see | review recall (lines; mean per case) | fix recall | "
        "context tokens per review request (median; p90) | fix tokens (median) | precision |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for repo in repos:
        tally = Tally()
        run_repo(repo, tally)
        if not tally.tokens:
            print(f"| {repo.parent.name} | 0 | | | | | | |")
            continue
        tokens = sorted(tally.tokens)
        p90 = tokens[int(0.9 * (len(tokens) - 1))]
        review = tally.review_hits / tally.truth if tally.truth else float("nan")
        fix = tally.fix_hits / tally.truth if tally.truth else float("nan")
        mean_review = statistics.mean(tally.review_case_recall) if tally.cases else float("nan")
        mean_fix = statistics.mean(tally.fix_case_recall) if tally.cases else float("nan")
        precision = tally.relevant_lines / tally.shown_lines if tally.shown_lines else float("nan")
        print(
            f"| {repo.parent.name} | {tally.cases} | {tally.truth} | {review:.1%}; {mean_review:.1%} | "
            f"{fix:.1%}; {mean_fix:.1%} | {statistics.median(tokens):.0f}; {p90} | "
            f"{statistics.median(tally.fix_tokens):.0f} | {precision:.1%} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
