"""Fuzz the model-answer parsers at length: SEARCH/REPLACE fix answers and review answers.

First times parsing and applying a 20-block answer to a 10,000-line file. Then generates answers from marker
soup and from mutations of well-formed answers (lines dropped, duplicated, swapped, CRLF, fences, stray
characters, truncation), parses and applies them. Any exception is a crash; the run prints inputs, inputs/s,
how the answers were classified, and every crash with its seed.

Run: ``python -m bench fuzz_parsers`` (or ``python -m bench.fuzz_parsers --seconds 300 --seed 7``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable

from bot.core.answers import parse_edits, parse_review_answer
from bot.core.edits import apply_edits, error_feedback

TARGET = "src/app.py"
FILE = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(40))
TOKENS = (
    "<<<<<<< SEARCH",
    "<<<<< SEARCH",
    "<<<<<<<<< search",
    "=======",
    "=====",
    ">>>>>>> REPLACE",
    ">>>>> replace",
    "```",
    "```python",
    TARGET,
    "other.py",
    "../etc/passwd",
    ".github/workflows/ci.yml",
    "NO_CHANGES",
    "NO_FINDINGS",
    "### FINDING: high: title",
    "### FINDING: weird: t",
    "### FINDING:",
    "# ... existing code ...",
    "...",
    "def f3(x):",
    "    return x + 3",
    "    return x + 30",
    "",
    " ",
    "\t",
    "\u201cquoted\u201d",
    "\x00",
    "\ufeff",
)


def _good_answer(rng: random.Random) -> list[str]:
    """Return a well-formed fix or review answer against FILE, as lines."""
    lines: list[str] = []
    review = rng.random() < 0.4
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(40)
        if review:
            lines += [
                f"### FINDING: {rng.choice(['high', 'low', 'info', 'nit'])}: f{i} adds the wrong value",
                "why",
            ]
        if rng.random() < 0.5:
            lines.append(TARGET)
        lines += ["```python", "<<<<<<< SEARCH", f"def f{i}(x):", f"    return x + {i}", "======="]
        lines += [f"def f{i}(x):", f"    return x - {i}", ">>>>>>> REPLACE", "```"]
    return lines


def _mutate(lines: list[str], rng: random.Random) -> list[str]:
    """Apply a few random line-level mutations."""
    lines = list(lines)
    for _ in range(rng.randint(0, 4)):
        op = rng.randrange(6)
        at = rng.randrange(len(lines) + 1)
        if op == 0 and lines:
            del lines[min(at, len(lines) - 1)]
        elif op == 1 and lines:
            lines.insert(at, lines[rng.randrange(len(lines))])
        elif op == 2:
            lines.insert(at, rng.choice(TOKENS))
        elif op == 3 and len(lines) > 1:
            a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[a], lines[b] = lines[b], lines[a]
        elif op == 4 and lines:
            k = min(at, len(lines) - 1)
            line = lines[k]
            cut = rng.randrange(len(line) + 1)
            lines[k] = line[:cut] + chr(rng.randrange(0x20, 0x2FFF)) + line[cut:]
        else:
            lines = lines[: rng.randrange(len(lines) + 1)]  # truncation, as with finish_reason == "length"
    return lines


def _soup(rng: random.Random) -> list[str]:
    """Return a random sequence of marker and code tokens."""
    return [rng.choice(TOKENS) for _ in range(rng.randint(0, 40))]


def fuzz_edits(rng: random.Random, tally: Counter[str]) -> None:
    """Parse and apply one generated answer; raise on any broken invariant."""
    lines = _mutate(_good_answer(rng), rng) if rng.random() < 0.7 else _soup(rng)
    text = ("\r\n" if rng.random() < 0.2 else "\n").join(lines)
    parsed = parse_edits(text, TARGET)
    review = parse_review_answer(text, TARGET)
    result = apply_edits(FILE.replace("\n", "\r\n") if rng.random() < 0.2 else FILE, parsed.blocks)
    if len(result.applied) + len(result.failures) + len(result.already_applied) != len(parsed.blocks):
        raise AssertionError("apply lost track of a block")
    if not isinstance(error_feedback(result, parsed.errors), str):
        raise AssertionError("feedback is not text")
    if any(f.block is not None and not f.block.search and not f.block.replace for f in review.findings):
        raise AssertionError("a finding carries an empty block")
    tally[
        "fix: no changes" if parsed.no_changes else "fix: clean" if parsed.ok else "fix: errors reported"
    ] += 1
    if parsed.blocks:
        tally["apply: all blocks applied" if result.ok else "apply: refusals reported"] += 1
    tally["review: clean" if not review.errors else "review: errors reported"] += 1


# Other parsers' fuzz targets can be registered here by name.
TARGETS: dict[str, Callable[[random.Random, Counter[str]], None]] = {"edits": fuzz_edits}


def run(seconds: float, seed: int, targets: list[str]) -> int:
    """Fuzz the named targets for ``seconds``; print figures; return the number of crashes."""
    crashes = 0
    for name in targets:
        fuzz = TARGETS[name]
        tally: Counter[str] = Counter()
        count = 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            case_seed = seed * 1_000_003 + count
            try:
                fuzz(random.Random(case_seed), tally)
            except Exception:
                crashes += 1
                print(f"[{name}] crash at case seed {case_seed}:", file=sys.stderr)
                traceback.print_exc()
            count += 1
        elapsed = time.perf_counter() - started
        print(f"{name}: {count:,} inputs in {elapsed:.1f} s ({count / elapsed:,.0f}/s), {crashes} crashes")
        for label, n in sorted(tally.items()):
            print(f"  {label:28} {n:>10,}")
    return crashes


def time_apply(repeats: int = 5) -> None:
    """Print how long parsing and applying a 20-block answer to a 10,000-line file takes (median, best)."""
    big = "".join(f"def g{i}(x):\n    return x * {i}\n\n" for i in range(3334))
    pairs = [
        (f"def g{i}(x):\n    return x * {i}", f"def g{i}(x):\n    return x * {i} + 1")
        for i in range(0, 3334, 167)
    ]
    answer = "".join(f"<<<<<<< SEARCH\n{a}\n=======\n{b}\n>>>>>>> REPLACE\n" for a, b in pairs)
    timings: dict[str, list[float]] = {"parse": [], "apply": [], "apply (all miss, with hints)": []}
    misses = answer.replace("return x *", "return x //")
    for _ in range(repeats):
        started = time.perf_counter()
        parsed = parse_edits(answer, TARGET)
        timings["parse"].append(time.perf_counter() - started)
        started = time.perf_counter()
        result = apply_edits(big, parsed.blocks)
        timings["apply"].append(time.perf_counter() - started)
        if not result.ok:
            raise AssertionError("the timing answer should apply")
        started = time.perf_counter()
        apply_edits(big, parse_edits(misses, TARGET).blocks)
        timings["apply (all miss, with hints)"].append(time.perf_counter() - started)
    print(f"{len(pairs)} blocks against a {big.count(chr(10)):,}-line file:")
    for label, values in timings.items():
        median, best = statistics.median(values) * 1000, min(values) * 1000
        print(f"  {label:30} median {median:7.1f} ms   best {best:7.1f} ms")


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--seconds``, ``--seed``, ``--target``; exit 1 on any crash."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="time per target (default 20)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--target", action="append", choices=sorted(TARGETS), help="default: all")
    args = parser.parse_args([] if argv is None else argv)
    time_apply()
    return 1 if run(args.seconds, args.seed, args.target or sorted(TARGETS)) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
