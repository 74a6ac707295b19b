"""The benchmark report: run the benchmarks and the reliability suite, and write what they printed into docs.

``make bench`` (``python -m bench``) runs every benchmark module and then this report. It writes:

- ``docs/benchmarks.md``: a generated section per benchmark (machine, command, printed figures) between
  ``<!-- generated:NAME -->`` markers; the hand-written text other engineers keep there is left alone.
- ``docs/reliability.md``: load, Redis outage and SIGTERM figures from ``bench.chaos`` at full size
  (20,000 deliveries at concurrency 64), throughput with 1, 2 and 4 worker processes, fuzzing of the intake
  (1,000,000 inputs) and of the answer parsers, the security suite's result, and scale on paper.

Run: ``python -m bench.report`` (all of it) or ``python -m bench.report --quick`` (small sizes, minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# Modules the report runs itself (at full size), so `python -m bench` does not run them twice.
RELIABILITY_MODULES = ("chaos", "fuzz_intake", "report")
# GitHub's documented secondary limit on content-creating requests, per installation.
CONTENT_WRITES_PER_MINUTE = 80


class _Tee(io.TextIOBase):
    """Write to the real stdout and keep a copy."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.copy = io.StringIO()

    def write(self, text: str) -> int:
        """Write ``text`` to both."""
        self.real.write(text)
        self.copy.write(text)
        return len(text)

    def flush(self) -> None:
        """Flush the real stdout."""
        self.real.flush()


def capture(run: Callable[[], int | None]) -> tuple[int, str, float]:
    """Run ``run`` and return (exit code, what it printed, seconds); an exception is a failed run."""
    tee = _Tee(sys.stdout)
    started = time.monotonic()
    with contextlib.redirect_stdout(tee):
        try:
            code = run() or 0
        except Exception as exc:  # one broken benchmark must not hide the others' figures
            print(f"failed: {type(exc).__name__}: {exc}")
            code = 1
    return code, tee.copy.getvalue(), time.monotonic() - started


def machine() -> str:
    """Return a short description of this machine: CPU, cores, memory, Python, Redis, load."""
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        found = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        cpu = found.group(1).strip() if found else cpu
    memory = ""
    with contextlib.suppress(OSError, AttributeError):
        total_kb = int(re.findall(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text())[0])
        memory = f", {total_kb / 1024 / 1024:.1f} GiB RAM"
    redis_version = "unknown"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        from bot.redis_server import redis_server_binary

        out = subprocess.run([redis_server_binary(), "--version"], capture_output=True, text=True).stdout
        redis_version = out.split()[2].removeprefix("v=") if len(out.split()) > 2 else out.strip()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{cpu}, {os.cpu_count()} CPUs{memory}; {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}; redis-server {redis_version}; load average {load} at the start"
    )


def update_section(path: Path, name: str, body: str, title: str = "# Benchmarks\n") -> None:
    """Replace (or append) the generated section ``name`` of ``path``, keeping everything else."""
    start, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
    block = f"{start}\n{body.rstrip()}\n{end}"
    text = path.read_text() if path.exists() else title
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    text = (
        pattern.sub(lambda _m: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    )
    path.write_text(text)


def benchmark_section(name: str, command: str, code: int, output: str, seconds: float, host: str) -> str:
    """Return the generated Markdown for one benchmark run."""
    status = "ok" if code == 0 else f"exit code {code}"
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"### Latest run: `{command}` ({status}, {seconds:.0f} s, {when})\n\n"
        f"Machine: {host}.\n\n```text\n{output.strip()}\n```"
    )


def record_benchmark(name: str, code: int, output: str, seconds: float) -> None:
    """Write one benchmark's printed figures into its generated section of docs/benchmarks.md."""
    command = f"python -m bench {name}"
    update_section(
        DOCS / "benchmarks.md", name, benchmark_section(name, command, code, output, seconds, machine())
    )


# ---- reliability -----------------------------------------------------------------------------------------


def _fuzz_share(args: tuple[int, int]) -> tuple[int, dict[str, int], float]:
    from bench import fuzz_intake

    crashes, tally, seconds = fuzz_intake.run(args[0], args[1], quiet=False)
    return crashes, dict(tally), seconds


def fuzz_intake_parallel(inputs: int, processes: int) -> dict[str, Any]:
    """Fuzz the intake with ``inputs`` cases over ``processes`` processes (distinct seeds)."""
    share = inputs // processes
    started = time.monotonic()
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        parts = pool.map(_fuzz_share, [(share, seed) for seed in range(1, processes + 1)])
    tally: Counter[str] = Counter()
    for _, part, _ in parts:
        tally.update(part)
    return {
        "inputs": share * processes,
        "crashes": sum(p[0] for p in parts),
        "outcomes": dict(sorted(tally.items())),
        "seconds": time.monotonic() - started,
    }


def run_pytest(paths: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run pytest on ``paths``; return its exit code and summary line."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *paths],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    failed = [line.split(" - ")[0] for line in lines if line.startswith("FAILED ")]
    return {
        "exit": done.returncode,
        "summary": "; ".join([lines[-1] if lines else "", *failed]),
        "seconds": time.monotonic() - started,
    }


def reliability(
    deliveries: int, fuzz_inputs: int, parser_seconds: float, saved: Path | None = None
) -> dict[str, Any]:
    """Run every reliability measurement; return the figures.

    With ``saved``, figures are kept in that JSON file as each step ends, and steps already there are not
    measured again (a run that failed late resumes instead of starting over).
    """
    from bench import chaos, fuzz_parsers

    results: dict[str, Any] = {
        "machine": machine(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if saved is not None and saved.exists():
        results.update(json.loads(saved.read_text()))

    def keep(name: str, value: Any) -> None:
        results[name] = value
        if saved is not None:
            saved.write_text(json.dumps(results, indent=2, default=str))

    side = max(500, deliveries // 10)
    with tempfile.TemporaryDirectory(prefix="spark-report-") as tmp:
        steps: list[tuple[str, Callable[[Path], dict[str, Any]]]] = [
            ("load", lambda d: chaos.run_load(d, deliveries, 64)),
            ("redis_outage", lambda d: chaos.run_redis_outage(d, side, 64)),
            ("sigterm", lambda d: chaos.run_sigterm(d, side, 64)),
        ]
        steps += [
            (f"workers_{p}", lambda d, p=p: chaos.run_load(d, side, 64, processes=p))  # type: ignore[misc]
            for p in (1, 2, 4)
        ]
        for name, step in steps:
            if name in results:
                continue
            workdir = Path(tmp) / name
            workdir.mkdir()
            print(f"reliability: {name} ...", flush=True)
            keep(name, step(workdir))
            print(json.dumps(results[name], default=str), flush=True)
    if "fuzz_intake" not in results:
        print(f"reliability: fuzzing the intake with {fuzz_inputs:,} inputs ...", flush=True)
        keep("fuzz_intake", fuzz_intake_parallel(fuzz_inputs, max(1, min(4, os.cpu_count() or 1))))
    if "fuzz_parsers" not in results:
        print(f"reliability: fuzzing the answer parsers for {parser_seconds:.0f} s ...", flush=True)
        code, output, seconds = capture(lambda: fuzz_parsers.main(["--seconds", str(parser_seconds)]))
        keep("fuzz_parsers", {"exit": code, "output": output.strip(), "seconds": seconds})
    print("reliability: security and reliability test suites ...", flush=True)
    keep("security_tests", run_pytest(["tests/security"], {"SPARK_FUZZ_EXAMPLES": "1000"}))
    keep("reliability_tests", run_pytest(["tests/reliability"], {}))
    return results


def _row(name: str, r: dict[str, Any]) -> str:
    return (
        f"| {name} | {r['sent']:,} | {r['accepted_2xx']:,} | {r['unstored_2xx']} | {r['jobs']:,} | "
        f"{r['runs']:,} | {r['retries']} | **{r['lost']}** | {r.get('ran_again', '-')} | "
        f"**{r['duplicated']}** |"
    )


def _answers(r: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {v:,}" for k, v in r["answers"].items())


def scale_on_paper(r: dict[str, Any]) -> str:
    """Return the 'what limits a fleet' section from the measured figures."""
    ops = r["load"]["redis_commands_per_delivery"]
    writes_per_fix = 4  # reaction, commit (GraphQL createCommitOnBranch), reply comment, final reaction
    rates = {p: r[f"workers_{p}"]["jobs_per_s"] for p in (1, 2, 4)}
    return f"""## Scale beyond one machine

Measured here: {ops:.1f} Redis commands per delivery over the whole load (intake, queueing, the worker's
dequeue, bookkeeping and the job's own writes, including ignored deliveries), i.e. one Redis at ~100,000
simple commands/s carries roughly {100_000 / ops:,.0f} deliveries/s before it is the bottleneck; workers and
web processes scale out horizontally (KEDA on queue length, see `deploy/`).

Throughput of the same mixed load with 1, 2 and 4 `spark worker` processes on this {os.cpu_count()}-CPU
machine (jobs/s from the first delivery to the last job; the sandbox GitHub, model and web run on the same
cores, so more processes than cores mostly shows contention): 1 → {rates[1]:.1f}, 2 → {rates[2]:.1f},
4 → {rates[4]:.1f} jobs/s.

What limits a fleet is GitHub, not Spark: GitHub allows about {CONTENT_WRITES_PER_MINUTE} content-creating
requests per minute per installation (secondary rate limit). A `/spark fix` makes about {writes_per_fix}
(reaction, commit, reply, reaction), so one installation tops out near
{CONTENT_WRITES_PER_MINUTE // writes_per_fix} fixes per minute whatever the fleet size; a review posts one
review plus a check run (2 to 3 writes). The sandbox enforces GitHub's 403 + `Retry-After`, which the worker
honours.

**Per-installation limit.** So that one busy installation cannot starve the others, each running job holds
a slot in `spark:installation:<id>:running` (a Redis sorted set scored by when the slot lapses);
`SPARK_INSTALLATION_JOB_LIMIT` (default 8) caps the slots. A worker that dequeues a job of an
installation at its cap puts it back at the tail of its queue in the same Lua step and takes the next job
(`workers/limits.py`, used by `workers/runtime.py`); slots lapse after the job timeout, so a killed worker
cannot leak one. Tested in `tests/reliability/test_installation_limit.py` with two real workers and a
limit of 1: installation 1's six queued jobs never run two at a time, and installation 2's job starts while
installation 1's first job still runs (without the cap the test fails).
"""


def write_reliability(r: dict[str, Any], command: str) -> None:
    """Write docs/reliability.md from the figures."""
    fuzz = r["fuzz_intake"]
    outage, term = r["redis_outage"], r["sigterm"]
    rows = [
        _row(name, r[name])
        for name in ("load", "redis_outage", "sigterm", "workers_1", "workers_2", "workers_4")
    ]
    outcomes = ", ".join(f"{k}: {v:,}" for k, v in fuzz["outcomes"].items())
    text = f"""# Reliability

Generated by `{command}` on {r["started"]}; numbers below are this run's, not goals. Machine: {r["machine"]}.

Everything runs for real on 127.0.0.1: `spark serve` (granian, 2 processes), `spark worker --processes N`
(`SimpleWorker`s under RQ's `WorkerPool`), a private `redis-server` with an append-only file, the local GitHub
(seeded with an installation, a repository and a pull request that every delivery is aimed at) and the local
Cerebras.
Deliveries are the real ones in `../shared/github/webhooks` plus the project's fixtures, mixed at random,
3% of them replays of an earlier delivery id, signed and posted by 64 concurrent keep-alive connections
(`bench/chaos.py`). The workers run with `SPARK_RUN_LOG` set (off in production), so every job appends its
name, id, worker and start time to `spark:jobs:ran` before it acts; a job is **lost** if an accepted (2xx,
stored) delivery's job never ran, and **ran again** if it ran more often than once plus the retries RQ
recorded after failures. **Duplicated** counts second visible effects, read from the local GitHub
afterwards: every object Spark creates carries its identity (a comment's or review's `reply` marker, a check
run's external id, a reaction's subject and content), so a second object with one identity is a duplicate; a
job that ran again without one had its visible effects once. "2xx unstored" counts 2xx answers for a delivery
id Redis does not hold.

| run | deliveries | 2xx accepted | 2xx unstored | jobs | runs | retries | lost | ran again | duplicated |
|---|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

- **load**: {r["load"]["sent"]:,} deliveries at concurrency 64; answers: {_answers(r["load"])}; intake
  {r["load"]["intake_per_s"]:,.0f} deliveries/s while the workers ran the jobs; all jobs done after
  {r["load"]["seconds"]:.0f} s. {r["load"]["failed_jobs"]:,} jobs ended as failed after RQ's retries (each
  counted, none lost); the local GitHub answered the workers
  {r["load"].get("github_answers", "(not recorded)")} (it enforces GitHub's primary limit of 5,000
  requests per hour per installation with a 403, and this load aims every job at one installation).
- **Redis outage**: Redis stopped for {outage["down_s"]:.1f} s in the middle of the load and restarted.
  Answers while it was down: {outage["answers_while_down"]} (503 for every delivery that needed Redis;
  ignored and ping deliveries need none). The local GitHub's {outage["webhooks_failed_while_down"]} webhooks
  sent meanwhile failed; `spark redeliver --since 1h` (exit {outage["redeliver_exit"]},
  {outage["redeliver"]}) redelivered them and {outage["webhooks_unrecovered"]} remained unstored. The
  {outage["direct_failed_then_resent"]} direct posts that failed were re-sent with the same ids
  ({outage["direct_still_failing"]} still failing). {outage.get("ran_again", 0)} job(s) ran again, each
  on another worker ({outage.get("ran_again_other_worker", 0)}; runs in seconds from Redis going down:
  {outage.get("ran_again_at", [])}): a job in progress when Redis went away could not record its end, its
  worker died with Redis and was replaced, and the reaper queued the orphan once more (at-least-once).
  {outage["duplicated"]} second visible effects: the flows' writes are idempotent (marked comments and
  reviews are edited, not posted again; a check run is found again by its external id).
- **SIGTERM**: `spark serve` and then `spark worker` got SIGTERM mid-load (exit codes
  {term["exit_codes"]}) and were restarted; {term["deliveries_resent_during_restart"]:,} deliveries that
  found no listener were re-sent with the same id, as a redelivery would.

## Hostile input and fuzzing

- Intake fuzzer (`bench/fuzz_intake.py`): **{fuzz["inputs"]:,} inputs, {fuzz["crashes"]} crashes**
  in {fuzz["seconds"]:.0f} s. Real deliveries with fields replaced by values of other types, deleted, comment
  bodies made huge (up to 1 MB) or exotic unicode, truncated or corrupted bytes; each goes through parsing,
  routing and job-argument building, and queued arguments are checked to be the small typed JSON workers need.
  Outcomes: {outcomes}.
- Answer parsers (`bench/fuzz_parsers.py`, SEARCH/REPLACE and review answers):

```text
{r["fuzz_parsers"]["output"]}
```

- `tests/security` (forged, replayed, malformed, oversized, unicode and bot deliveries; hypothesis through the
  receiver with 1,000 examples; authorization; prompt injection and path traversal; secrets):
  {r["security_tests"]["summary"]} (exit {r["security_tests"]["exit"]}).
- `tests/reliability` at CI size: {r["reliability_tests"]["summary"]} (exit {r["reliability_tests"]["exit"]}).

{scale_on_paper(r)}"""
    (DOCS / "reliability.md").write_text(text)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--quick`` or explicit sizes; write docs/reliability.md; exit 1 if anything was lost."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a few minutes)")
    parser.add_argument("--deliveries", type=int, default=None, help="load size (default 20,000)")
    parser.add_argument(
        "--fuzz-inputs", type=int, default=None, help="intake fuzz inputs (default 1,000,000)"
    )
    parser.add_argument("--parser-seconds", type=float, default=None, help="parser fuzz time (default 120)")
    parser.add_argument("--saved", type=Path, default=None, help="keep/resume figures in this JSON file")
    args = parser.parse_args([] if argv is None else argv)
    deliveries = args.deliveries or (2_000 if args.quick else 20_000)
    fuzz_inputs = args.fuzz_inputs or (50_000 if args.quick else 1_000_000)
    parser_seconds = args.parser_seconds or (20.0 if args.quick else 120.0)
    results = reliability(deliveries, fuzz_inputs, parser_seconds, args.saved)
    command = "python -m bench.report" + (" --quick" if args.quick else "")
    write_reliability(results, command)
    print(f"wrote {DOCS / 'reliability.md'}")
    bad = [k for k, v in results.items() if isinstance(v, dict) and (v.get("lost") or v.get("unstored_2xx"))]
    return 1 if bad or results["fuzz_intake"]["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
