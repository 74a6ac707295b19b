"""Failed check -> Spark's offer and, in auto mode, the verified fix committed, through the whole stack.

The real receiver (in process), a real Redis, a real ``spark worker`` process with the real PyGithub and
cerebras-cloud-sdk clients, the local GitHub with 60 ms added to every API call, and the local model at
1,000 tok/s with a 120 ms time to first token (the fix benchmark's latencies). Each run puts the broken file
back with a push (its review job, automatic review off, only notes the head), then a CI workflow fails on
that head: two jobs (ruff, pytest, their real output), whose ``workflow_job`` and ``check_run`` webhooks
Spark receives. Times are from that moment (the local GitHub sends the deliveries then) on this process's
monotonic clock, read from the local GitHub's request log and the local model's request log.

Targets (issue 26): the offer on Spark's CI check run <= 1 GitHub round trip + 30 ms after the webhook;
webhook -> fix committed (``ci.fix: auto``) <= model time + 3 sequential GitHub round trips + 30 ms.

    python -m bench.ci_latency [--runs N] [--latency-ms 60] [--ttft-ms 120] [--tokens-per-second 1000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from bench.fix_latency import latency_stack, step_row, waves
from sandbox import scenario as scenarios
from sandbox.stack import Stack, wait_for_jobs

REPO = "acme/shop"
BRANCH = "discount"
PATH = "src/shop/cart.py"


def scenario_yaml(latency_ms: float, ttft_ms: float, tokens_per_second: float) -> tuple[str, dict[str, Any]]:
    """The bundled ci-fix story with `ci.fix: auto`, automatic review off and a slow GitHub; and its CI."""
    data: dict[str, Any] = yaml.safe_load(scenarios.find("ci-fix").read_text())
    data["name"] = "ci-latency-bench"
    data["repository"]["files"][".github/spark.yml"] = "review:\n  auto: false\nci:\n  fix: auto\n"
    ci = next(event["ci"] for event in data["events"] if "ci" in event)
    data["events"] = [{"wait": 0}]
    data["github"] = {"latency_ms": latency_ms}
    data["model"]["speed"] = {"ttft_ms": ttft_ms, "tokens_per_second": tokens_per_second}
    data["model"]["replies"][0]["repeat"] = True
    data.pop("expect", None)
    return yaml.safe_dump(data, sort_keys=False), ci


@dataclass(frozen=True)
class Run:
    """One failed workflow, in seconds since its webhooks were sent."""

    first_call: float
    offer: float
    model: float
    commit: float
    round_trip: float
    waves_to_offer: int
    waves_before_commit: int

    @property
    def offer_budget(self) -> float:
        return self.round_trip + 0.030

    @property
    def commit_budget(self) -> float:
        return self.model + 3 * self.round_trip + 0.030


def one_run(stack: Stack, ci: dict[str, Any], broken: str) -> Run:
    """Break the head quietly, let CI fail on it, wait for Spark's jobs, and measure."""
    gh, model = stack.github, stack.model
    assert model is not None
    # A push Spark hears of (its review job, with automatic review off, only notes the new head).
    gh.push(REPO, BRANCH, {PATH: broken}, message="Break it again", author="bob")
    wait_for_jobs(stack, timeout=60)
    log_mark, model_mark = len(gh.request_log), len(model.requests)
    t0 = time.monotonic()
    stack.scene.run_ci(ci)
    settled = wait_for_jobs(stack, timeout=60)
    requests = gh.request_log[log_mark:]
    if not any(r.method == "POST" and r.path == "/graphql" and r.status == 200 for r in requests):
        said = [c["body"][:300] for c in gh.issue_comments(REPO, 1)]
        raise RuntimeError(f"no fix was committed: {settled['jobs']} {said}")
    created = next(r for r in requests if r.method == "POST" and r.path.endswith("/check-runs"))
    commit = next(r for r in requests if r.method == "POST" and r.path == "/graphql" and r.status == 200)
    [record] = model.requests[model_mark:]
    assert record.finished_at is not None
    before_offer = [r for r in requests if r.started < created.started]
    before_commit = [r for r in requests if r.started < commit.started]
    return Run(
        first_call=min(r.started for r in requests) - t0,
        offer=created.started + created.duration - t0,
        model=record.finished_at - record.received_at,
        commit=commit.started + commit.duration - t0,
        round_trip=statistics.median(r.duration for r in requests),
        waves_to_offer=waves([*before_offer, created]),
        waves_before_commit=waves([*before_commit, commit]),
    )


def report(runs: Sequence[Run], latency_ms: float) -> str:
    offer_met = sum(r.offer <= r.offer_budget for r in runs)
    commit_met = sum(r.commit <= r.commit_budget for r in runs)
    offer_waves = [r.waves_to_offer for r in runs]
    commit_waves = [r.waves_before_commit for r in runs]
    return "\n".join(
        [
            f"failed check -> offer and auto fix through the sandbox: {len(runs)} runs, "
            f"GitHub +{latency_ms:g} ms per call",
            f"  {'step (ms since the failed jobs webhooks)':38} {'p50':>8} {'p95':>8}",
            step_row("GitHub round trip (median call)", [r.round_trip for r in runs]),
            step_row("first GitHub call of Spark's job", [r.first_call for r in runs]),
            step_row("offer on Spark's CI check run", [r.offer for r in runs]),
            step_row("  target: 1 round trip + 30 ms", [r.offer_budget for r in runs]),
            step_row("model time (request -> last token)", [r.model for r in runs]),
            step_row("fix committed (auto mode)", [r.commit for r in runs]),
            step_row("  target: model + 3 round trips + 30 ms", [r.commit_budget for r in runs]),
            f"  sequential rounds of GitHub calls: to the offer {statistics.median(offer_waves):.0f}, "
            f"to the commit {statistics.median(commit_waves):.0f} (incl. the commit)",
            f"  within target: offer {offer_met}/{len(runs)} runs, commit {commit_met}/{len(runs)} runs",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ci_latency", description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=60.0)
    parser.add_argument("--ttft-ms", type=float, default=120.0)
    parser.add_argument("--tokens-per-second", type=float, default=1000.0)
    args = parser.parse_args(argv if argv is not None else [])
    text, ci = scenario_yaml(args.latency_ms, args.ttft_ms, args.tokens_per_second)
    broken = yaml.safe_load(text)["pull_request"]["files"][PATH]
    with latency_stack(text) as stack:
        runs = [one_run(stack, ci, broken) for _ in range(args.runs)]
    print(report(runs, args.latency_ms))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
