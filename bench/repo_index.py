"""Indexing a real repository: a cold build from its archive, an incremental update, and lookups.

The repository is a bare git directory named in ``SPARK_BENCH_INDEX_REPO`` (nothing of it is kept in this
project). Its archive at HEAD is written as GitHub serves one (``git archive``: gzipped tar, one top
directory) and read in 256 KB chunks, as the download arrives, by a fresh process (one worker process: its
time, CPU and peak memory are measured alone). The update replays the newest stretch of first-parent
history that changed about ten indexed files: the blobs are read first (on GitHub: one parallel round of
``GET /git/blobs``), then the update is timed. Lookups choose a review's context for changes of definitions
at HEAD (the core's ``touched`` and ``choose`` over the store): the time is the worker's for one request.
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bot.core.symbols import index_language

ROUNDS = 3
UPDATE_ROUNDS = 5
CHUNK = 256 * 1024
UPDATE_FILES = 10
LOOKUPS = 60


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def cold_build(archive: Path, store_dir: Path, commit: str) -> None:
    """In this process: build the index of ``commit`` from ``archive`` as it would stream; print figures."""
    from bot.index.build import Indexer
    from bot.index.store import LocalStore

    def chunks():  # type: ignore[no-untyped-def]
        with archive.open("rb") as handle:
            while chunk := handle.read(CHUNK):
                yield chunk

    store = LocalStore(store_dir / "store.sqlite3", 2_000_000_000)
    started, cpu = time.perf_counter(), time.process_time()
    listing = Indexer(store).build("bench/repo", commit, chunks())
    wall, used = time.perf_counter() - started, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{wall:.2f} {used:.2f} {peak:.0f} {len(listing.files)} {len(listing.skipped)} {store.size()}")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--cold":
        cold_build(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])
        return 0
    source = os.environ.get("SPARK_BENCH_INDEX_REPO", "")
    if not source:
        print("SPARK_BENCH_INDEX_REPO names no repository (a bare git directory): skipped")
        return 0
    repo = Path(source)
    # The newest commit of the first-parent history that changed about ten indexed files: the cold build is
    # of its parent, the update replays it.
    head, pushed = "", ""
    for line in git(repo, "log", "--first-parent", "--no-merges", "--format=%H %P", "-n400").splitlines():
        commit, parent = line.split()[:2]
        paths = git(repo, "diff-tree", "-r", "--name-only", "--no-commit-id", parent, commit).split()
        if UPDATE_FILES - 2 <= sum(index_language(p) is not None for p in paths) <= UPDATE_FILES + 2:
            head, pushed = parent, commit
            break
    files = len(git(repo, "ls-tree", "-r", "--name-only", head).splitlines())
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "archive.tar.gz"
        with archive.open("wb") as out:
            prefix = f"--prefix=owner-repo-{head[:7]}/"
            subprocess.run(
                ["git", "-C", str(repo), "archive", "--format=tar.gz", prefix, head], stdout=out, check=True
            )
        size = archive.stat().st_size / 1e6
        print(f"repository: {repo.parent.name} at {head[:12]}: {files} files, archive {size:.1f} MB")
        print(
            "| cold build round | wall s | CPU s | peak RSS MB | files indexed | files listed as not indexed "
            "| store MB |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- |")
        store_dir = Path(tmp) / "round"
        for n in range(ROUNDS):
            subprocess.run(["rm", "-rf", str(store_dir)], check=True)
            store_dir.mkdir()
            out = subprocess.run(
                [sys.executable, "-m", "bench.repo_index", "--cold", str(archive), str(store_dir), head],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            wall, cpu, peak, indexed, skipped, stored = out
            print(f"| {n + 1} | {wall} | {cpu} | {peak} | {indexed} | {skipped} | {int(stored) / 1e6:.1f} |")
        update_and_lookup(repo, head, pushed, store_dir)
    return 0


def update_and_lookup(repo: Path, head: str, target: str, store_dir: Path) -> None:
    from bot.core import crossref
    from bot.core.diff import format_patch, parse_diff
    from bot.core.symbols import extract
    from bot.index.build import Change, Indexer, load_listing
    from bot.index.lookup import RepoIndex
    from bot.index.store import LocalStore

    changes = []
    for line in git(repo, "diff-tree", "-r", "--no-renames", head, target).splitlines():
        meta, _, path = line.partition("\t")
        fields = meta.split()
        status = {"A": "added", "D": "removed"}.get(fields[4][0], "modified")
        changes.append(Change(path, status, fields[3] if status != "removed" else fields[2]))
    blobs = {
        c.blob: subprocess.run(
            ["git", "-C", str(repo), "cat-file", "blob", c.blob], capture_output=True, check=True
        ).stdout
        for c in changes
        if c.status != "removed"
    }
    # A worker has its grammars' queries compiled: so does this process before the update is timed.
    for change in changes:
        if change.status != "removed":
            extract(change.path, "x = 1\n")
    # Each round updates a copy of the cold build's store (a fresh connection, as a new job's).
    built = store_dir / "store.sqlite3"
    LocalStore(built, 2_000_000_000)._db().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    took: list[float] = []
    for n in range(UPDATE_ROUNDS):
        copy = store_dir.parent / f"update-{n}"
        copy.mkdir()
        shutil.copy(built, copy / "store.sqlite3")
        store = LocalStore(copy / "store.sqlite3", 2_000_000_000)
        listing = load_listing(store, "bench/repo", head)
        assert listing is not None
        started = time.perf_counter()
        updated = Indexer(store).update(
            "bench/repo", target, listing, changes, lambda shas: {s: blobs[s] for s in shas}
        )
        took.append((time.perf_counter() - started) * 1000)
    # What of it is parsing (tree-sitter and the names of each file), the rest being the store's writes.
    parsing: list[float] = []
    for _ in range(UPDATE_ROUNDS):
        started = time.perf_counter()
        for change in changes:
            if change.status != "removed" and index_language(change.path) is not None:
                extract(change.path, blobs[change.blob].decode("utf-8", "replace"))
        parsing.append((time.perf_counter() - started) * 1000)
    indexed = sum(index_language(c.path) is not None for c in changes)
    rounds = ", ".join(f"{t:.0f}" for t in took)
    print(
        f"\nincremental update {head[:8]} -> {target[:8]}: {len(changes)} files changed ({indexed} in "
        f"indexed languages), {len(blobs)} blobs read first; update (ms, {UPDATE_ROUNDS} rounds): {rounds}; "
        f"median {statistics.median(took):.0f} ms, of which parsing the changed files "
        f"{statistics.median(parsing):.0f} ms; {len(updated.files)} files indexed after"
    )
    store = LocalStore(built, 2_000_000_000)
    listing = load_listing(store, "bench/repo", head)
    assert listing is not None
    # Lookups: a review's context for a change of one definition, in files chosen at random.
    index = RepoIndex(store, "bench/repo", head, listing)
    rng = random.Random(7)
    paths = sorted(listing.files)
    timings: list[float] = []
    tokens: list[int] = []
    for path in rng.sample(paths, min(LOOKUPS, len(paths))):
        symbols = index.symbols([path])[path]
        text = index.texts([path])[path]
        functions = [d for d in symbols.definitions if d.kind in ("function", "method") and d.end > d.start]
        if not functions:
            continue
        target_def = rng.choice(functions)
        lines = text.split("\n")
        lines[target_def.start - 1] += " "  # the definition's first line changed
        diff = parse_diff(format_patch(path, text, "\n".join(lines)))
        fresh = RepoIndex(store, "bench/repo", head, listing)  # nothing cached between requests
        started = time.perf_counter()
        what = crossref.touched(list(diff.files), {path: symbols}, {path: symbols})
        context = crossref.choose(list(diff.files), what, fresh, crossref.REVIEW_TOKENS)
        timings.append((time.perf_counter() - started) * 1000)
        tokens.append(context.tokens)
    timings.sort()
    print(
        f"lookup (a review's context for one changed definition, {len(timings)} requests): median "
        f"{statistics.median(timings):.1f} ms, p90 {timings[int(0.9 * (len(timings) - 1))]:.1f} ms, "
        f"max {timings[-1]:.1f} ms; context tokens median {statistics.median(tokens):.0f}"
    )


if __name__ == "__main__":
    sys.exit(main())
