"""``spark demo``: run a scenario end to end on this machine and show what a user would see on GitHub.

The stack it runs against (and that end-to-end tests and benchmarks start too) is ``sandbox.stack``; this
module fires a scenario's events through it, times them, checks the expectations and renders the report.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bot.settings import Settings
from sandbox import scenario as scenarios
from sandbox.scenario import Check, Scenario, ScenarioError
from sandbox.stack import Step, collect_outcome, fire, start_stack


@dataclass
class DemoResult:
    """A scenario run: steps with timings, the final outcome, expectation checks, and honest notes."""

    scenario: str
    description: str
    steps: list[Step]
    outcome: dict[str, Any]
    checks: list[Check]
    model_requests: list[dict[str, Any]]
    notes: list[str]
    total_s: float

    @property
    def ok(self) -> bool:
        """True when no job failed and every expectation held."""
        failed_jobs = any(j["status"] == "failed" for s in self.steps for j in s.jobs)
        return not failed_jobs and all(c.ok for c in self.checks)

    def as_json(self) -> dict[str, Any]:
        """Return the machine-readable form written by ``--json``."""
        return {
            "scenario": self.scenario,
            "description": self.description,
            "ok": self.ok,
            "total_s": round(self.total_s, 4),
            "steps": [asdict(s) for s in self.steps],
            **{k: v for k, v in self.outcome.items() if k != "scenario"},
            "expectations": [asdict(c) for c in self.checks],
            "model_requests": self.model_requests,
            "notes": self.notes,
        }


def run_scenario(
    scenario: Scenario, base: Settings, data_dir: Path, *, live_model: bool = False, timeout: float = 60.0
) -> DemoResult:
    """Start the stack, fire every event in order, and collect what a user would see."""
    began = time.monotonic()
    with start_stack(scenario, base, data_dir, live_model=live_model) as stack:
        steps = [fire(stack, event, timeout=timeout) for event in scenario.events]
        outcome = collect_outcome(stack)
        requests = [_request_info(r) for r in stack.model.requests] if stack.model else []
    checks = scenarios.check(scenario.expect, outcome)
    notes: list[str] = []
    return DemoResult(
        scenario.name, scenario.description, steps, outcome, checks, requests, notes, time.monotonic() - began
    )


def _request_info(record: Any) -> dict[str, Any]:
    keep = ("index", "model", "stream", "status", "script", "fault", "error", "prompt_tokens")
    info = {k: getattr(record, k) for k in keep}
    info.update(completion_tokens=record.completion_tokens, cancelled=record.cancelled)
    if record.first_token_at is not None:
        info["ttft_s"] = round(record.first_token_at - record.received_at, 4)
    if record.finished_at is not None:
        info["total_s"] = round(record.finished_at - record.received_at, 4)
    return info


# -- output ----------------------------------------------------------------------------------------------


def render(result: DemoResult) -> str:
    """Return the human-readable report: what a user would see on GitHub, step by step, with timings."""
    out = [f"Scenario: {result.scenario}", f"  {result.description}", ""]
    for n, step in enumerate(result.steps, 1):
        out.append(
            f"{n}. {step.event}  (fired {ms(step.fired_s)}, delivered {ms(step.delivered_s)}, "
            f"settled {ms(step.jobs_s)}; {step.github_calls} GitHub calls, {step.model_calls} model calls)"
        )
        for d in step.deliveries:
            action = f".{d['action']}" if d.get("action") else ""
            out.append(f"   webhook {d['event']}{action} -> HTTP {d['status_code']} ({d['status']})")
        for job in step.jobs:
            wait, run = job["queue_wait_s"], job["run_s"]
            timing = f"waited {ms(wait)}, ran {ms(run)}" if wait is not None and run is not None else ""
            out.append(f"   job {job['func']} on {job['queue']}: {job['status']} {timing}")
            if job.get("error"):
                out.append("     " + job["error"].strip().splitlines()[-1])
    o = result.outcome
    app = {c["author"] for c in o["comments"] if c["by_app"]}
    out += ["", f"On GitHub, {o['pull_request']['repo']}#{o['pull_request']['number']}:"]
    if o["pull_request"].get("body"):
        out.append("  description:")
        out += ["    " + line for line in o["pull_request"]["body"].splitlines()]
    for c in o["comments"]:
        out.append(f"  comment by @{c['author']}:")
        out += ["    " + line for line in c["body"].splitlines()]
    for r in o["reactions"]:
        out.append(f"  reaction {r['content']} by @{r['author']} on comment {r['subject_id']}")
    for review in o["reviews"]:
        out.append(f"  review by @{review['author']} ({review['state']}):")
        out += ["    " + line for line in review["body"].splitlines()]
        for c in review["comments"]:
            where = f"lines {c['start_line']}-{c['line']}" if c.get("start_line") else f"line {c['line']}"
            out.append(f"    on {c['path']} {where}:")
            out += ["      " + line for line in c["body"].splitlines()]
    for commit in o["new_commits"]:
        verified = "verified" if commit.get("verified") else "unverified"
        out.append(f"  commit {commit['sha'][:7]} by {commit['author']} ({verified}): {commit['message']}")
        out += ["    " + line for line in commit["diff"].splitlines()]
    for run in o["check_runs"]:
        out.append(f"  check run {run['name']}: {run['status']} {run.get('conclusion') or ''}".rstrip())
    for thread in o.get("threads", []):
        if thread["resolved"]:
            out.append(f"  review thread on {thread['path']} line {thread['line']}: resolved")
    posted = app or o["reviews"] or o["new_commits"] or o["check_runs"] or o["reactions"]
    if not posted:
        out.append("  nothing from Spark.")
    if result.model_requests:
        out += ["", "Local model (scripted replies from the scenario, not a model's work):"]
        for r in result.model_requests:
            answered = f"script {r['script']!r}" if r["script"] else f"no script ({r['error']})"
            out.append(f"  request {r['index']}: {answered}, {r['completion_tokens']} tokens")
    out += ["", "Expectations:"]
    for c in result.checks:
        out.append(f"  [{'ok' if c.ok else 'FAIL'}] {c.name}: {c.detail}")
    if not result.checks:
        out.append("  (none declared)")
    for note in result.notes:
        out += ["", "Note: " + note]
    out += ["", f"Total {ms(result.total_s)}."]
    return "\n".join(out)


def ms(seconds: float | None) -> str:
    """Format seconds as milliseconds for people."""
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Entry point of ``spark demo [--scenario FILE] [--json OUT] [--live-model] [--list]``."""
    if getattr(args, "list", False):
        for path in scenarios.bundled():
            # Whole words only: a description is cut at a word, and says so with an ellipsis.
            text = " ".join(scenarios.load(path).description.split())
            print(f"{path.stem:24} {textwrap.shorten(text, width=90, placeholder=' …')}")
        return 0
    try:
        scenario = scenarios.load(args.scenario)
    except ScenarioError as exc:
        print(f"spark demo: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="spark-demo-") as tmp:
        try:
            result = run_scenario(scenario, settings, Path(tmp), live_model=bool(args.live_model))
        except (ScenarioError, RuntimeError, TimeoutError) as exc:
            print(f"spark demo: {exc}", file=sys.stderr)
            return 1
    print(render(result))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result.as_json(), indent=2, default=str) + "\n")
        print(f"Wrote {args.json_out}.")
    return 0 if result.ok else 1
