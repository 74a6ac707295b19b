"""Diff benchmark: parse a 10,000-line diff built from the real fixtures, and fuzz the parser at length.

Prints the median and best of several parses (target: well under 100 ms), unidiff's own share of it, and
anchoring time for a large edit. ``--fuzz SECONDS`` mutates the real fixtures for that long and reports
anything other than a DiffParseError.

Run: ``python -m bench diff_parse`` (or ``python -m bench.diff_parse --fuzz 60``).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from unidiff.patch import PatchSet

from bot.core.anchors import anchor_edit
from bot.core.diff import DiffParseError, format_patch, parse_diff

DIFFS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "diffs"
NOISE = (
    b"@@ -1 +1 @@\n",
    b"@@ -0,0 +0,0 @@\n",
    b"\\ No newline at end of file\n",
    b"+",
    b"-",
    b" ",
    b"\n",
    b"\r",
    b"\xff\xfe",
    b"diff --git a/x b/x\n",
    b"--- a/x\n",
    b"+++ b/x\n",
    b"Binary files a/x and b/x differ\n",
    b"new file mode 100644\n",
    b"deleted file mode 100644\n",
    b"rename from x\n",
    b"GIT binary patch\n",
)


def samples() -> list[bytes]:
    """Return the real fixture diffs."""
    return [path.read_bytes() for path in sorted(DIFFS.glob("*.diff"))]


def mutate(data: bytes, rnd: random.Random) -> bytes:
    """Return ``data`` with a few random cuts, inserted diff fragments and duplicated stretches."""
    for _ in range(rnd.randint(1, 4)):
        at = rnd.randint(0, len(data))
        action = rnd.randrange(3)
        if action == 0:
            data = data[:at] + data[at + rnd.randint(1, 20) :]
        elif action == 1:
            data = data[:at] + rnd.choice(NOISE) + data[at:]
        else:
            end = min(len(data), at + rnd.randint(1, 60))
            data = data[:at] + data[at:end] + data[at:]
    return data


def fixtures_diff(lines: int = 10_000) -> bytes:
    """Return a diff of at least ``lines`` lines: the real fixtures repeated under distinct paths.

    Header-heavy (a file every ten lines): the worst case for per-file work.
    """
    parts: list[bytes] = []
    total = copy = 0
    while total < lines:
        for sample in samples():
            renamed = sample.replace(b" a/", b" a/copy%d/" % copy).replace(b" b/", b" b/copy%d/" % copy)
            parts.append(renamed if renamed.endswith(b"\n") else renamed + b"\n")
            total += renamed.count(b"\n")
        copy += 1
    return b"".join(parts)


def sources_diff(lines: int = 10_000) -> bytes:
    """Return a diff of at least ``lines`` lines editing this repository's Python sources (every 7th line).

    Shaped like a large pull request: tens of files, long hunks.
    """
    root = Path(__file__).resolve().parent.parent
    parts: list[str] = []
    total = 0
    while total < lines:
        for path in sorted((root / "bot").rglob("*.py")):
            before = path.read_text(encoding="utf-8")
            rows = before.split("\n")
            after = "\n".join(row + "  # edited" if i % 7 == 3 else row for i, row in enumerate(rows))
            name = f"copy{total}/{path.relative_to(root)}"
            patch = format_patch(name, before, after)
            parts.append(f"diff --git a/{name} b/{name}\n{patch}")
            total += patch.count("\n") + 1
            if total >= lines:
                break
    return "".join(parts).encode()


def timed(run: Callable[[], object], repeat: int) -> list[float]:
    """Return the wall times of ``repeat`` calls, in milliseconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return times


def fuzz(seconds: float, seed: int) -> int:
    """Mutate real diffs for ``seconds``; return how many inputs raised anything but DiffParseError."""
    rnd, pool, deadline = random.Random(seed), samples(), time.monotonic() + seconds
    runs = rejected = bad = 0
    while time.monotonic() < deadline:
        data = mutate(rnd.choice(pool), rnd)
        runs += 1
        try:
            parse_diff(data)
        except DiffParseError:
            rejected += 1
        except Exception:  # the point of a fuzzer: report whatever escapes, keep going
            bad += 1
            print(f"escaped on input {data!r}:\n{traceback.format_exc()}")
    print(
        f"fuzz: {runs} inputs in {seconds:.0f} s, {rejected} rejected with DiffParseError, {bad} other errors"
    )
    return bad


def main(argv: list[str] | None = None) -> int:
    """Print parse and anchoring figures; optionally fuzz; return non-zero if the fuzzer found a bug."""
    parser = argparse.ArgumentParser(prog="bench.diff_parse")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--fuzz", type=float, default=5.0, help="seconds of fuzzing (0 to skip)")
    parser.add_argument("--seed", type=int, default=4)
    args = parser.parse_args(argv if argv is not None else [])

    # Figures depend on what else the machine runs; say how busy it was.
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for label, data in (("pull-request-shaped", sources_diff()), ("real fixtures repeated", fixtures_diff())):
        text = data.decode("utf-8", "surrogateescape")
        diff = parse_diff(data)
        hunks = sum(len(f.hunks) for f in diff.files)
        print(f"{label} diff: {len(text.splitlines())} lines, {len(diff.files)} files, {hunks} hunks")
        ours = timed(lambda data=data: parse_diff(data), args.repeat)  # type: ignore[misc]
        raw = timed(lambda text=text: PatchSet(text, metadata_only=True), args.repeat)  # type: ignore[misc]
        print(
            f"  parse_diff: median {statistics.median(ours):.1f} ms, best {min(ours):.1f} ms (target: < 100)"
        )
        print(f"  of which unidiff's structural pass: median {statistics.median(raw):.1f} ms")

    before = "".join(f"    value_{i} = compute({i})\n" for i in range(2000))
    whole = parse_diff(format_patch("big.py", "", before)).files[0]  # every line is in the one hunk
    for edit in ("value_1000 = compute(", "00 = compute(", "0 = compute("):  # 1, 20 and 200 scattered edits
        after = before.replace(edit, edit.replace("compute", "fast"))
        anchor = timed(lambda after=after: anchor_edit("big.py", before, after, whole), 5)  # type: ignore[misc]
        count = len(anchor_edit("big.py", before, after, whole).suggestions)
        print(f"anchor_edit, 2,000-line file, {count} suggestions: median {statistics.median(anchor):.1f} ms")
    return 1 if args.fuzz and fuzz(args.fuzz, args.seed) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
