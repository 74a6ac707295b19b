"""``make bench``: run every ``bench/*.py`` module that has a ``main()``, then the reliability report.

Each benchmark's printed figures go into its generated section of ``docs/benchmarks.md`` (with the machine
and the command); ``bench.report`` then measures reliability at full size and writes ``docs/reliability.md``.
``python -m bench NAME...`` runs only the named modules (and records only their sections).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from bench.report import RELIABILITY_MODULES, capture, record_benchmark


def discover() -> list[str]:
    """Return the names of the benchmark modules beside this file."""
    here = Path(__file__).resolve().parent
    return sorted(p.stem for p in here.glob("*.py") if not p.stem.startswith("_"))


def main(argv: list[str]) -> int:
    """Run the named benchmarks (default: all, then the report); return non-zero if any failed."""
    everything = not argv
    names = argv or [name for name in discover() if name not in RELIABILITY_MODULES]
    failed = []
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        run = getattr(module, "main", None)
        if run is None:
            continue
        print(f"== bench.{name} ==", flush=True)
        code, output, seconds = capture(run)
        print(f"== bench.{name}: {seconds:.1f} s ==\n", flush=True)
        if name not in RELIABILITY_MODULES:
            record_benchmark(name, code, output, seconds)
        if code:
            failed.append(name)
    if everything:
        from bench import report

        print("== bench.report ==", flush=True)
        if report.main([]):
            failed.append("report")
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
