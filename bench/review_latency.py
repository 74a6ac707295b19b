"""Review latency, push webhook to concluded check run, through the whole local stack.

The same stack and latencies as ``bench.fix_latency``: the real receiver in process, a real Redis, a real
``spark worker`` process with the real PyGithub and cerebras-cloud-sdk clients, the local GitHub with 60 ms
added to every API call and the local model at 1,000 tok/s after a 120 ms first token. A pull request of 1, 12
and 40 changed files; each run pushes a new head that adds a bug to every file (so each file gets a model call
and a finding the ledger has not seen) and waits for the review job. The end is the check run
concluded (what a required check and a merge queue wait for); the review itself is posted before or with it.
Rounds are counted as in the fix benchmark: the longest chain of GitHub calls each sent after the one before
it came back, up to and including the check run's conclusion. Each run is a new pull request that Spark
reviewed when it was opened (it remembers what it saw); the first-review runs open theirs quietly, so the
timed review is Spark's first contact with the pull request.

Target (issue 27): on a pull request Spark has seen, push -> concluded check <= the slowest model call + 4
sequential GitHub round trips + 50 ms; a first review one round trip more.

    python -m bench.review_latency [--runs 10] [--latency-ms 60] [--ttft-ms 120] [--tokens-per-second 1000]
                                   [--sizes 1,12,40] [--reasoning 0,100,500]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from bench.fix_latency import latency_args, latency_stack, pct, reasoning_rows, step_row, waves
from sandbox.cerebras import Reasoning, Script
from sandbox.stack import Stack, wait_for_jobs

REPO = "acme/review-bench"
BRANCH = "helpers"


def path(i: int) -> str:
    """Return the path of the pull request's ``i``-th file."""
    return f"src/helpers_{i:02d}.py"


def head_text(i: int, bugs: Sequence[int]) -> str:
    """Return file ``i`` with one helper per bug ``k``, each dividing by ``len(values) - k``."""
    helpers = "".join(
        f"\n\ndef mean_{i}_{k}(values: list[float]) -> float:\n"
        f'    """Return the arithmetic mean of values."""\n'
        f"    return sum(values) / (len(values) - {k})\n"
        for k in bugs
    )
    return f'"""Helpers, part {i}."""\n{helpers}'


def answer(i: int, k: int) -> str:
    """Return the model's review of file ``i`` with bug ``k``: one finding with a verified fix."""
    return (
        f"### FINDING: high: mean_{i}_{k} divides by len(values) - {k}\n"
        f"The mean must divide by the number of values, not {k} fewer.\n"
        "<<<<<<< SEARCH\n"
        f"    return sum(values) / (len(values) - {k})\n"
        "=======\n"
        "    return sum(values) / len(values)\n"
        ">>>>>>> REPLACE\n"
    )


def scenario_yaml(files: int, latency_ms: float, ttft_ms: float, tokens_per_second: float) -> str:
    """Return the benchmark's scenario: one PR of ``files`` changed files, opened quietly, slow GitHub."""
    base = {path(i): f'"""Helpers, part {i}."""\n' for i in range(files)}
    document: dict[str, Any] = {
        "name": f"review-latency-bench-{files}",
        "repository": {"owner": "acme", "name": "review-bench", "files": base},
        "pull_request": {
            "title": "Add the helpers",
            "author": "alice",
            "head_branch": BRANCH,
            "files": {path(i): head_text(i, [1]) for i in range(files)},
        },
        "collaborators": {"alice": "write"},
        "events": [{"wait": 0}],
        "github": {"latency_ms": latency_ms},
        "model": {"speed": {"ttft_ms": ttft_ms, "tokens_per_second": tokens_per_second}, "replies": []},
    }
    return yaml.safe_dump(document, sort_keys=False)


@dataclass(frozen=True)
class Run:
    """One review, in seconds from the push (and its webhook)."""

    files: int
    intake: float
    queue_wait: float
    reads_end: float
    model_start: float
    # The slowest model call (request -> last token), and the first call's first tokens.
    ttft: float
    first_content: float
    model: float
    posted: float
    concluded: float
    round_trip: float
    calls: int
    rounds: int
    first: bool

    @property
    def budget(self) -> float:
        """Return the target: the slowest model call + 4 round trips + 50 ms (5 on a first review)."""
        return self.model + (5 if self.first else 4) * self.round_trip + 0.050


def one_run(stack: Stack, files: int, k: int, *, first: bool = False) -> Run:
    """Open a pull request of ``files`` files with a bug each, then time the review of a push that adds a
    second bug to every file (``first``: the pull request was opened quietly, so Spark has not seen it;
    otherwise Spark reviewed it on open, as it does every new pull request, and remembers it).

    A fresh pull request per run keeps every review alike: the same threads to read, one new finding a file.
    """
    gh, model = stack.github, stack.model
    assert model is not None
    branch = f"{BRANCH}-{k}"
    model.clear_scripts()
    model.add_scripts(Script(answer(i, k), name=f"open-{i}", path=path(i)) for i in range(files))
    gh.faults.webhooks_enabled = not first
    try:
        number = gh.open_pull_request(
            REPO, branch, {path(i): head_text(i, [k]) for i in range(files)}, title=f"Run {k}", author="alice"
        )
    finally:
        gh.faults.webhooks_enabled = True
    wait_for_jobs(stack, timeout=120)
    model.clear_scripts()
    # The model sees both bugs and reports both: the first is already in a thread (not posted again).
    model.add_scripts(
        Script(answer(i, k) + "\n" + answer(i, k + 1), name=f"review-{i}", path=path(i)) for i in range(files)
    )
    log_mark, model_mark, delivery_mark = len(gh.request_log), len(model.requests), len(gh.deliveries)
    t0 = time.monotonic()
    gh.push(REPO, branch, {path(i): head_text(i, [k, k + 1]) for i in range(files)}, author="alice")
    settled = wait_for_jobs(stack, timeout=120)
    delivery = next(
        d for d in gh.deliveries[delivery_mark:] if d.event == "pull_request" and d.action == "synchronize"
    )
    jobs = [j for j in settled["jobs"] if j["func"] == "workers.jobs.review"]
    if [j["status"] for j in jobs] != ["finished"]:
        raise RuntimeError(f"the review jobs ended {[(j['status'], j.get('error', '')) for j in jobs]}")
    requests = gh.request_log[log_mark:]
    records = model.requests[model_mark:]
    if len(records) != files or any(r.first_content_at is None for r in records):
        raise RuntimeError(f"expected {files} answered model calls, got {len(records)}")
    conclude = [r for r in requests if r.method == "PATCH" and "/check-runs/" in r.path][-1]
    review = [r for r in requests if r.method == "POST" and r.path == f"/repos/{REPO}/pulls/{number}/reviews"]
    if not review:
        raise RuntimeError("the review was not posted")
    first_call = min(records, key=lambda r: r.received_at)
    assert first_call.first_token_at is not None and first_call.first_content_at is not None

    def end(request: Any) -> float:
        return float(request.started + request.duration - t0)

    return Run(
        files=files,
        intake=delivery.duration,
        queue_wait=float(jobs[0]["queue_wait_s"] or 0.0),
        reads_end=max(end(r) for r in requests if r.started < first_call.received_at),
        model_start=first_call.received_at - t0,
        ttft=first_call.first_token_at - first_call.received_at,
        first_content=first_call.first_content_at - first_call.received_at,
        model=max((r.finished_at or r.received_at) - r.received_at for r in records),
        posted=end(review[0]),
        concluded=end(conclude),
        round_trip=statistics.median(r.duration for r in requests),
        calls=len(requests),
        rounds=waves([r for r in requests if r.started <= conclude.started]),
        first=first,
    )


def report(size: int, runs: Sequence[Run], first: Sequence[Run], latency_ms: float) -> str:
    """Return one size's figures: per step p50/p95, the totals against the targets, the rounds."""
    row = step_row
    met = sum(r.concluded <= r.budget for r in runs)
    met_first = sum(r.concluded <= r.budget for r in first)
    lines = [
        f"review of a {size}-file pull request through the sandbox: {len(runs)} runs, "
        f"GitHub +{latency_ms:g} ms per call",
        f"  {'step (ms since the push webhook)':38} {'p50':>8} {'p95':>8}",
        row("intake (webhook answered 202)", [r.intake for r in runs]),
        row("queue wait (enqueued -> job started)", [r.queue_wait for r in runs]),
        row("GitHub reads done (before the model)", [r.reads_end for r in runs]),
        row("first model request sent", [r.model_start for r in runs]),
        row("model time to first token (any kind)", [r.ttft for r in runs]),
        row("model time to first content token", [r.first_content for r in runs]),
        row("slowest model call (request -> last)", [r.model for r in runs]),
        row("review posted", [r.posted for r in runs]),
        row("check run concluded", [r.concluded for r in runs], "<- push -> concluded"),
        row("GitHub round trip (median call)", [r.round_trip for r in runs]),
        row("target: slowest + 4 round trips + 50", [r.budget for r in runs]),
        row("beyond the model: concluded - slowest", [r.concluded - r.model for r in runs]),
        "",
        f"  GitHub calls per review: {statistics.median(r.calls for r in runs):.0f}, in "
        f"{statistics.median(r.rounds for r in runs):.0f} sequential rounds incl. the conclusion",
        f"  push -> concluded within target: {met}/{len(runs)} runs",
    ]
    if first:
        lines += [
            "",
            f"  first review (nothing remembered of the pull request), {len(first)} runs:",
            row("check run concluded", [r.concluded for r in first]),
            row("target: slowest + 5 round trips + 50", [r.budget for r in first]),
            f"  in {statistics.median(r.rounds for r in first):.0f} sequential rounds incl. the conclusion; "
            f"within target: {met_first}/{len(first)} runs",
        ]
    return "\n".join(lines)


def measure(
    size: int,
    runs: int,
    latency_ms: float,
    ttft_ms: float,
    tokens_per_second: float,
    reasoning: Sequence[int] = (0,),
) -> tuple[list[Run], list[Run], dict[int, list[Run]]]:
    """Start the stack for a ``size``-file pull request; warm it with one untimed review, time ``runs``
    reviews, then a third as many first reviews, then as many reviews per further reasoning level."""
    text = scenario_yaml(size, latency_ms, ttft_ms, tokens_per_second)
    with latency_stack(text) as stack:
        assert stack.model is not None
        stack.model.set_reasoning(Reasoning.flat(reasoning[0]))
        counter = iter(range(1, 10_000, 2))
        one_run(stack, size, next(counter))  # token minting, connection set-up, the first look at the PR
        timed = [one_run(stack, size, next(counter)) for _ in range(runs)]
        extra = max(2, runs // 3)
        first = [one_run(stack, size, next(counter), first=True) for _ in range(extra)]
        levels = {}
        for tokens in reasoning[1:]:
            stack.model.set_reasoning(Reasoning.flat(tokens))
            levels[tokens] = [one_run(stack, size, next(counter)) for _ in range(extra)]
        return timed, first, levels


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark for each size and print the figures."""
    argv = list(argv if argv is not None else [])
    sizes = [1, 12, 40]
    if "--sizes" in argv:
        at = argv.index("--sizes")
        sizes = [int(n) for n in argv[at + 1].split(",")]
        del argv[at : at + 2]
    if "--runs" not in argv:
        argv += ["--runs", "10"]  # each run is two reviews (on open, then the timed push), up to 40 files
    args = latency_args("python -m bench.review_latency", __doc__.splitlines()[0], argv)
    for size in sizes:
        timed, first, levels = measure(
            size, args.runs, args.latency_ms, args.ttft_ms, args.tokens_per_second, args.reasoning
        )
        print(f"(the model reasons {args.reasoning[0]} tokens before each answer in these runs)")
        print(report(size, timed, first, args.latency_ms))
        for tokens, level in levels.items():
            print(
                reasoning_rows(
                    tokens, level, [r.concluded for r in level], "concluded", [r.rounds for r in level]
                )
            )
        print(
            f"  p50 of the slowest model call: {pct([r.model for r in timed], 0.5) * 1000:.1f} ms\n",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
