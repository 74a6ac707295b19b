"""Run every ``bench/*.py`` module that has a ``main()``, one after another, or only those named."""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path


def discover() -> list[str]:
    """Return the names of the benchmark modules beside this file."""
    here = Path(__file__).resolve().parent
    return sorted(p.stem for p in here.glob("*.py") if not p.stem.startswith("_"))


def main(argv: list[str]) -> int:
    """Run the named benchmarks (default: all); return non-zero if any failed."""
    failed = []
    for name in argv or discover():
        module = importlib.import_module(f"bench.{name}")
        run = getattr(module, "main", None)
        if run is None:
            continue
        print(f"== bench.{name} ==", flush=True)
        started = time.monotonic()
        try:
            code = run()
        except Exception as exc:  # one broken benchmark must not hide the others' figures
            print(f"bench.{name} failed: {type(exc).__name__}: {exc}", flush=True)
            code = 1
        print(f"== bench.{name}: {time.monotonic() - started:.1f} s ==\n", flush=True)
        if code:
            failed.append(name)
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
