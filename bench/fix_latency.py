"""``/spark fix`` latency, webhook to verified commit, through the whole local stack.

The real receiver (in process), a real Redis, a real ``spark worker`` process with the real PyGithub and
cerebras-cloud-sdk clients, the local GitHub with 60 ms added to every API call, and the local model at
1,000 tok/s with a 120 ms time to first token. Each run puts the bug back with a push whose webhook Spark
handles (its review job, with automatic review off, only notes the new head), comments ``/spark fix`` as a
user and waits for the job; the timings come from the local GitHub's request log and the local model's
request log (both on this process's monotonic clock) and from RQ's job record. The cold runs after the table
reset the PR quietly (no webhook): Spark has not seen the head the fix starts from.

Target (issue 5): webhook -> verified commit <= model time + 4 sequential GitHub round trips + 30 ms, and
the 👀 reaction within one round trip of the intake's answer.

The local model reasons first when told to (``--reasoning``, tokens per answer, at its throughput, before the
first token of content): the table is of the first level, and each further level prints its own runs' figures,
so the cost of an effort level is a number (issue 27).

    python -m bench.fix_latency [--runs N] [--latency-ms 60] [--ttft-ms 120] [--tokens-per-second 1000]
                                [--reasoning 0,100,500]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.worker_throughput import AcceptCounter
from bot.redis_server import PrivateRedis
from bot.settings import Settings
from sandbox import scenario as scenarios
from sandbox.cerebras import Reasoning, RequestRecord
from sandbox.github.server import LoggedRequest
from sandbox.stack import Stack, start_stack, wait_for_jobs

REPO = "acme/calculator"
PATH = "src/calc.py"
BRANCH = "average"
HEAD = '''"""Small arithmetic helpers."""


def add(a: float, b: float) -> float:
    """Return the sum of a and b."""
    return a + b


def average(values: list[float]) -> float:
    """Return the arithmetic mean of values."""
    return sum(values) / (len(values) - 1)
'''
ANSWER = f"""{PATH}
<<<<<<< SEARCH
    return sum(values) / (len(values) - 1)
=======
    return sum(values) / len(values)
>>>>>>> REPLACE
"""
COMMAND = "/spark fix average divides by the wrong count"


def scenario_yaml(latency_ms: float, ttft_ms: float, tokens_per_second: float) -> str:
    """Return the benchmark's scenario: one PR, opened quietly, automatic review off, slow GitHub."""
    document: dict[str, Any] = {
        "name": "fix-latency-bench",
        "repository": {
            "owner": "acme",
            "name": "calculator",
            "files": {
                PATH: HEAD.split("\n\n\ndef average")[0] + "\n",
                ".github/spark.yml": "review:\n  auto: false\n",
            },
        },
        "pull_request": {
            "title": "Add an average helper",
            "author": "alice",
            "head_branch": BRANCH,
            "files": {PATH: HEAD},
        },
        "collaborators": {"alice": "write"},
        "events": [{"comment": {"by": "alice", "body": COMMAND}}],
        "github": {"latency_ms": latency_ms},
        "model": {
            "speed": {"ttft_ms": ttft_ms, "tokens_per_second": tokens_per_second},
            "replies": [{"name": "fix", "path": PATH, "command": "fix", "reply": ANSWER, "repeat": True}],
        },
    }
    return yaml.safe_dump(document, sort_keys=False)


@dataclass(frozen=True)
class Steps:
    """What every command's run measures, in seconds since its comment: the webhook to the model's last token
    (``Observed.steps``), the GitHub calls and the median call's round trip."""

    intake: float
    queue_wait: float
    eyes: float
    reads_end: float
    model_start: float
    ttft: float
    first_content: float
    model: float
    calls: int
    round_trip: float


@dataclass(frozen=True)
class Run(Steps):
    """One ``/spark fix``, in seconds from the moment the comment (and its webhook) was created."""

    commit_start: float
    commit: float
    reply: float
    calls_before_commit: int
    waves_before_commit: int

    @property
    def budget(self) -> float:
        """Return the target for webhook -> commit: model time + 4 round trips + 30 ms."""
        return self.model + 4 * self.round_trip + 0.030

    @property
    def ahead_budget(self) -> float:
        """Return issue 27's target on a seen head: model time + 1 round trip + 30 ms (the model asked while
        the reads are out; the commit the one round trip after it)."""
        return self.model + self.round_trip + 0.030


def waves(requests: Sequence[LoggedRequest]) -> int:
    """Return how many sequential rounds the requests form: the longest chain of requests each sent after
    the one before it came back (a read that waited for another is a round of its own)."""
    depth: list[tuple[float, int]] = []  # (end, rounds up to and including the request)
    for request in sorted(requests, key=lambda r: r.started):
        before = max((n for end, n in depth if end <= request.started), default=0)
        depth.append((request.started + request.duration, before + 1))
    return max((n for _, n in depth), default=0)


def reset_head(stack: Stack, *, seen: bool = True) -> None:
    """Put the bug back on the PR's branch: a push whose review job ends before the next comment, or a quiet
    one (no webhook: Spark does not see the new head)."""
    gh = stack.github
    gh.faults.webhooks_enabled = seen
    try:
        gh.push(REPO, BRANCH, {PATH: HEAD}, message="Reset for the next run", author="alice")
    finally:
        gh.faults.webhooks_enabled = True
    if seen:
        wait_for_jobs(stack, timeout=60)


@dataclass(frozen=True)
class Observed:
    """What one comment command left behind: its GitHub calls, its webhook, its job and its one model call."""

    t0: float
    requests: list[LoggedRequest]
    intake: float
    queue_wait: float
    record: RequestRecord

    def end(self, request: LoggedRequest) -> float:
        """Return when ``request`` was answered, in seconds since the comment."""
        return request.started + request.duration - self.t0

    def posted(self, path_end: str) -> LoggedRequest:
        """Return the first POST whose path ends with ``path_end``."""
        return next(r for r in self.requests if r.method == "POST" and r.path.endswith(path_end))

    def steps(self) -> dict[str, float]:
        """Return the figures every command's run starts with: from the webhook to the model's last token."""
        record = self.record
        assert record.first_token_at is not None and record.finished_at is not None
        assert record.first_content_at is not None
        return {
            "intake": self.intake,
            "queue_wait": self.queue_wait,
            "eyes": self.end(self.posted("/reactions")),
            # The reads before the model request (none, for a fix asked before GitHub answers).
            "reads_end": max(
                (self.end(r) for r in self.requests if r.started < record.received_at), default=0.0
            ),
            "model_start": record.received_at - self.t0,
            "ttft": record.first_token_at - record.received_at,
            "first_content": record.first_content_at - record.received_at,
            "model": record.finished_at - record.received_at,
            "round_trip": statistics.median(r.duration for r in self.requests),
        }


def observe(stack: Stack, body: str, what: str, *, reply_to: int | None = None) -> Observed:
    """Comment ``body`` on the pull request as a user (in the review thread ``reply_to``, if given), wait for
    its job, and return what it did."""
    gh, model = stack.github, stack.model
    assert model is not None
    log_mark, model_mark, delivery_mark = len(gh.request_log), len(model.requests), len(gh.deliveries)
    t0 = time.monotonic()
    if reply_to is None:
        gh.comment(REPO, 1, body, author="alice")
    else:
        gh.reply(REPO, 1, reply_to, body, author="alice")
    settled = wait_for_jobs(stack, timeout=60)
    # The user's comment is the first delivery of its event; Spark's own reply fires the next one.
    event = "issue_comment" if reply_to is None else "pull_request_review_comment"
    delivery = next(d for d in gh.deliveries[delivery_mark:] if d.event == event)
    [job] = [j for j in settled["jobs"] if j["func"] == "workers.jobs.command"]
    if job["status"] != "finished":
        raise RuntimeError(f"the {what} job ended {job['status']}: {job.get('error', '')}")
    [record] = model.requests[model_mark:]
    return Observed(
        t0, gh.request_log[log_mark:], delivery.duration, float(job["queue_wait_s"] or 0.0), record
    )


def one_run(stack: Stack, *, cold: bool = False) -> Run:
    """Comment ``/spark fix`` once and measure it (``cold``: on a head Spark has not seen)."""
    reset_head(stack, seen=not cold)
    seen = observe(stack, COMMAND, "fix")
    requests = seen.requests
    commit = next(r for r in requests if r.method == "POST" and r.path == "/graphql" and r.status == 200)
    before_commit = [r for r in requests if r.started < commit.started]
    # Every read the commit waited for: before the model request, or while it streamed (a fix asked early).
    steps = {**seen.steps(), "reads_end": max(seen.end(r) for r in before_commit)}
    return Run(
        **steps,
        commit_start=commit.started - seen.t0,
        commit=seen.end(commit),
        reply=seen.end(seen.posted("/issues/1/comments")),
        calls=len(requests),
        calls_before_commit=len(before_commit) + 1,
        waves_before_commit=waves([*before_commit, commit]),
    )


def pct(values: Sequence[float], q: float) -> float:
    """Return the ``q`` quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def step_row(name: str, values: Sequence[float], note: str = "") -> str:
    """Return one line of a latency table: the step's p50 and p95 in milliseconds."""
    return f"  {name:38} {pct(values, 0.5) * 1000:8.1f} {pct(values, 0.95) * 1000:8.1f}  {note}"


def summary_rows(
    title: str, runs: Sequence[Any], ends: Sequence[float], what: str, rounds: Sequence[int]
) -> str:
    """Return the lines of a second set of runs (cold ones, thread replies): the total against the target."""
    met = sum(end <= r.budget for end, r in zip(ends, runs, strict=True))
    return "\n".join(
        [
            "",
            f"  {title}, {len(runs)} runs:",
            step_row(f"{what} (webhook -> {what})", list(ends)),
            step_row("target", [r.budget for r in runs]),
            f"  in {statistics.median(rounds):.0f} sequential rounds incl. the {what}; "
            f"within target: {met}/{len(runs)} runs",
        ]
    )


def table_head(what: str, runs: int, latency_ms: float) -> list[str]:
    """Return the two header lines of a latency table."""
    return [
        f"{what} through the sandbox: {runs} runs, GitHub +{latency_ms:g} ms per call",
        f"  {'step (ms since the comment webhook)':38} {'p50':>8} {'p95':>8}",
    ]


def first_rows(runs: Sequence[Any]) -> list[str]:
    """Return the rows both latency tables start with: from the webhook to the model's last token."""
    row = step_row
    return [
        row("intake (webhook answered 202)", [r.intake for r in runs]),
        row("queue wait (enqueued -> job started)", [r.queue_wait for r in runs]),
        row("👀 on the comment", [r.eyes for r in runs]),
        row("GitHub reads done", [r.reads_end for r in runs]),
        row("model request sent", [r.model_start for r in runs]),
        row("model time to first token (any kind)", [r.ttft for r in runs]),
        row("model time to first content token", [r.first_content for r in runs]),
        row("model time (request -> last token)", [r.model for r in runs]),
    ]


@contextlib.contextmanager
def latency_stack(scenario_text: str) -> Iterator[Stack]:
    """Start the whole stack on a private Redis for a latency scenario; close it on exit."""
    scenario = scenarios.parse(scenario_text, source="<bench>")
    # The in-process receiver logs bytes to the real stdout; a runner may have swapped in a text-only one.
    with (
        contextlib.redirect_stdout(sys.__stdout__),
        PrivateRedis() as server,
        tempfile.TemporaryDirectory(prefix="spark-bench-") as tmp,
    ):
        # Thirty commands a minute on one installation is over GitHub's 80 writes a minute: this measures the
        # round trips of one command, so both Spark's write budget and the sandbox's are lifted.
        # No debounce: the review of each run's reset push ends at once (it only notes the head).
        base = Settings.load({"REDIS_URL": server.url, "SPARK_REVIEW_DEBOUNCE_SECONDS": "0"}, env_file=None)
        stack = start_stack(scenario, base, Path(tmp), unlimited_writes=True)
        try:
            assert stack.model is not None
            yield stack
        finally:
            stack.close()


def latency_args(prog: str, description: str, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the options both latency benchmarks take (runs, GitHub latency, model speed)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--latency-ms", type=float, default=60.0)
    parser.add_argument("--ttft-ms", type=float, default=120.0)
    parser.add_argument("--tokens-per-second", type=float, default=1000.0)
    parser.add_argument(
        "--reasoning",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[0, 100, 500],
        help="reasoning tokens per answer, one table per level (comma-separated)",
    )
    return parser.parse_args(argv if argv is not None else [])


def reasoning_rows(
    tokens: int, runs: Sequence[Any], ends: Sequence[float], what: str, rounds: Sequence[int]
) -> str:
    """Return the figures of one reasoning level's runs: the model's first tokens, its time and the total."""
    met = sum(end <= r.budget for end, r in zip(ends, runs, strict=True))
    return "\n".join(
        [
            "",
            f"  with {tokens} reasoning tokens per answer, {len(runs)} runs:",
            step_row("model time to first token (any kind)", [r.ttft for r in runs]),
            step_row("model time to first content token", [r.first_content for r in runs]),
            step_row("model time (request -> last token)", [r.model for r in runs]),
            step_row(f"{what} (webhook -> {what})", list(ends)),
            step_row("target", [r.budget for r in runs]),
            f"  in {statistics.median(rounds):.0f} sequential rounds incl. the {what}; "
            f"within target: {met}/{len(runs)} runs",
        ]
    )


def report(runs: Sequence[Run], latency_ms: float) -> str:
    """Return the figures as a table: per step p50/p95, then the totals against the target."""

    row = step_row
    lines = [
        *table_head("/spark fix", len(runs), latency_ms),
        *first_rows(runs),
        row("commit mutation sent", [r.commit_start for r in runs]),
        row("verified commit on the branch", [r.commit for r in runs], "<- webhook -> commit"),
        row("reply posted", [r.reply for r in runs]),
        row("GitHub round trip (median call)", [r.round_trip for r in runs]),
        row("target: model + 4 round trips + 30", [r.budget for r in runs]),
        row("target: model + 1 round trip + 30", [r.ahead_budget for r in runs], "(issue 27, seen head)"),
        row("👀 after intake", [r.eyes - r.intake for r in runs], "target: <= one round trip"),
        row("👀 after the job started", [r.eyes - r.intake - r.queue_wait for r in runs]),
        row("worker time: reads done -> model", [r.model_start - r.reads_end for r in runs]),
        row("worker time: last token -> commit", [r.commit_start - r.model_start - r.model for r in runs]),
        "",
        f"  GitHub calls per fix: {statistics.median(r.calls for r in runs):.0f} "
        f"({statistics.median(r.calls_before_commit for r in runs):.0f} up to the commit, in "
        f"{statistics.median(r.waves_before_commit for r in runs):.0f} sequential rounds incl. the commit)",
    ]
    met = sum(r.commit <= r.budget for r in runs)
    ahead = sum(r.commit <= r.ahead_budget for r in runs)
    eyes_ok = sum(r.eyes - r.intake <= r.round_trip for r in runs)
    lines.append(
        f"  webhook -> commit within target: {met}/{len(runs)} runs (model + 1 round trip + 30: "
        f"{ahead}/{len(runs)}); 👀 within a round trip: {eyes_ok}/{len(runs)}"
    )
    return "\n".join(lines)


def measure(
    runs: int, latency_ms: float, ttft_ms: float, tokens_per_second: float, reasoning: Sequence[int] = (0,)
) -> tuple[list[Run], list[Run], tuple[int, int], dict[int, list[Run]]]:
    """Start the stack, warm it with one untimed run, time ``runs`` fixes, then a third as many cold; also
    return TCP connects made to (GitHub, the model) during the timed warm runs, and a third as many warm runs
    at each further reasoning level. The model reasons ``reasoning[0]`` tokens in the main runs."""
    with latency_stack(scenario_yaml(latency_ms, ttft_ms, tokens_per_second)) as stack:
        assert stack.model is not None
        stack.model.set_reasoning(Reasoning.flat(reasoning[0]))
        # Counted at each sandbox's accept(): a worker that keeps its pools warm connects about never.
        github_accepts = AcceptCounter(stack.github.server._server)
        model_accepts = AcceptCounter(stack.model._server)
        one_run(stack)  # the first job pays for token minting and connection set-up
        github_accepts.take(), model_accepts.take()
        timed = [one_run(stack) for _ in range(runs)]
        connects = (github_accepts.take(), model_accepts.take())
        cold = [one_run(stack, cold=True) for _ in range(max(3, runs // 3))]
        levels = {}
        for tokens in reasoning[1:]:
            stack.model.set_reasoning(Reasoning.flat(tokens))
            levels[tokens] = [one_run(stack) for _ in range(max(3, runs // 3))]
        return timed, cold, connects, levels


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the figures."""
    args = latency_args("python -m bench.fix_latency", __doc__.splitlines()[0], argv)
    runs, cold, (github_connects, model_connects), levels = measure(
        args.runs, args.latency_ms, args.ttft_ms, args.tokens_per_second, args.reasoning
    )
    print(f"(the model reasons {args.reasoning[0]} tokens before each answer in these runs)")
    print(report(runs, args.latency_ms))
    per_100 = 100 / len(runs)
    print(
        f"  TCP connects per 100 fixes: GitHub {github_connects * per_100:.1f}, "
        f"model {model_connects * per_100:.1f} (counted at the sandboxes' accept())"
    )
    ends, rounds = [r.commit for r in cold], [r.waves_before_commit for r in cold]
    print(summary_rows("cold (Spark had not seen the head)", cold, ends, "commit", rounds))
    for tokens, level in levels.items():
        print(
            reasoning_rows(
                tokens, level, [r.commit for r in level], "commit", [r.waves_before_commit for r in level]
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
