"""CI log benchmark: the parsers' accuracy on the corpus of real tool logs, and a 50 MB job log read as it
streams (time and peak memory).

Accuracy: for each log in tests/fixtures/ci_logs, the failures its ``expected.yaml`` entry lists (read by
hand) against what the parsers find and locate among the project's files; "stray" counts files named that
the log does not blame. Target: >= 95 % found, 0 stray. The 50 MB log is a cargo build's output repeated
(every line time-stamped, as GitHub serves it) with one error at its end, fed in 64 KB chunks as the HTTP
download delivers them. Target: <= 1 s with bounded memory.

Run: ``python -m bench ci_logs``.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from bot.core.ci_failures import Failure, locate, parse_failures
from bot.core.ci_log import LogReader, read_log

LOGS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "ci_logs"
CHUNK = 64 * 1024
SIZE = 50 * 1024 * 1024


def expected() -> dict[str, Any]:
    """The corpus's hand-read answers."""
    data: dict[str, Any] = yaml.safe_load((LOGS / "expected.yaml").read_text())
    return data


def found(log: str, answers: dict[str, Any]) -> list[tuple[Failure, str | None]]:
    """Each failure the parsers find in ``log``, with the project file it locates to (or None)."""
    files = answers["projects"][answers["logs"][log]["project"]]
    excerpt = read_log([(LOGS / log).read_bytes()])
    return [(failure, locate(failure, files)) for failure in parse_failures(excerpt.lines)]


def score(log: str, answers: dict[str, Any]) -> tuple[int, int, list[str]]:
    """(failures the log blames, found at their file and line, files named that the log does not blame)."""
    rows = []
    for entry in answers["logs"][log]["failures"]:
        where, _, via = entry.partition(" via ")
        path, _, line = where.rpartition(":")
        rows.append((path, int(line), via or None))
    results = found(log, answers)
    located = Counter((path, failure.line) for failure, path in results if path is not None)
    hits = 0
    for path, line, _ in rows:
        if located[(path, line)] > 0:
            located[(path, line)] -= 1
            hits += 1
    blamed = {path for path, _, _ in rows} | {via for _, _, via in rows if via}
    stray = [f"{failure.where} ({path})" for failure, path in results if path not in blamed]
    stray += [f"via {failure.via}" for failure, _ in results if failure.via and failure.via not in blamed]
    return len(rows), hits, stray


def accuracy() -> None:
    answers = expected()
    by_tool: dict[str, list[int]] = {}
    strays = 0
    for log in sorted(answers["logs"]):
        total, hits, named = score(log, answers)
        tally = by_tool.setdefault(answers["logs"][log]["tool"], [0, 0, 0])
        tally[0] += total
        tally[1] += hits
        tally[2] += len(named)
        strays += len(named)
    print(f"{'tool':<12} {'failures':>8} {'found':>6} {'stray':>6}")
    for tool, (total, hits, stray) in sorted(by_tool.items()):
        print(f"{tool:<12} {total:>8} {hits:>6} {stray:>6}")
    total = sum(t[0] for t in by_tool.values())
    hits = sum(t[1] for t in by_tool.values())
    print(
        f"corpus: {len(answers['logs'])} logs, {total} failures, found {hits} ({100 * hits / total:.1f} %), "
        f"files named that the log does not blame: {strays}"
    )


def big_log() -> bytes:
    """About 50 MB of a cargo build's output, time-stamped, with one error at the end."""
    stamp = b"2026-11-28T17:02:11.1234567Z "
    body = b"".join(
        stamp + b"   Compiling crate-%d v0.1.0 (/home/runner/work/shop/shop/crates/c%d)\n" % (i, i)
        for i in range(600)
    )
    head = b"\xef\xbb\xbf" + stamp + b"##[group]Run cargo build\n"
    tail = (
        stamp
        + b"error[E0425]: cannot find value `missing` in this scope\n"
        + stamp
        + b"  --> src/price.rs:12:30\n"
        + stamp
        + b"##[error]Process completed with exit code 101.\n"
    )
    return head + body * (SIZE // len(body)) + tail


def read_time(data: bytes) -> tuple[float, int, list[Failure]]:
    """Seconds to read ``data`` in chunks and parse its excerpt, and the excerpt's line count."""
    started = time.perf_counter()
    reader = LogReader()
    for start in range(0, len(data), CHUNK):
        reader.feed(data[start : start + CHUNK])
    excerpt = reader.finish()
    failures = parse_failures(excerpt.lines)
    return time.perf_counter() - started, len(excerpt.lines), failures


def large() -> None:
    data = big_log()
    times = []
    for _ in range(5):
        seconds, kept, failures = read_time(data)
        times.append(seconds)
    lines = data.count(b"\n")
    print(
        f"50 MB log ({len(data) / 1e6:.1f} MB, {lines:,} lines) in {CHUNK // 1024} KB chunks: "
        f"median {statistics.median(times):.3f} s, best {min(times):.3f} s over {len(times)} reads"
    )
    print(f"  kept {kept} lines; found {[f.where for f in failures]}")
    tracemalloc.start()
    reader = LogReader()
    for start in range(0, len(data), CHUNK):
        reader.feed(data[start : start + CHUNK])
    reader.finish()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(
        f"  peak memory the reader allocated (tracemalloc, the log itself not counted): {peak / 1e6:.2f} MB"
    )


def main() -> int:
    accuracy()
    large()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
