"""``/spark ask`` latency, webhook to posted answer, through the whole local stack.

The same stack and latencies as ``bench.fix_latency`` (its scenario, with the model scripted to answer the
question instead): the real receiver in process, a real Redis, a real ``spark worker`` process, the local
GitHub with 60 ms added to every API call and the local model at 1,000 tok/s after a 120 ms first token.
Each run comments ``/spark ask`` as a user and waits for the job; the timings come from both sandboxes'
request logs (on this process's monotonic clock) and from RQ's job record. The table is of warm runs (Spark
has seen the pull request's head: a review, a fix or an earlier question); the cold runs after it first
forget what Spark last saw of the pull request (``spark:last-seen:*``), as on Spark's first contact with it.
Last, a person replies in a review thread Spark started (no command), as many times as there were cold runs.

Target (issue 19): webhook -> answer posted <= model time + 2 sequential GitHub round trips + 30 ms.
The model reasons first with ``--reasoning`` as in ``bench.fix_latency``: one set of runs per further level.

    python -m bench.ask_latency [--runs N] [--latency-ms 60] [--ttft-ms 120] [--tokens-per-second 1000]
                                [--reasoning 0,100,500]
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import yaml

from bench.fix_latency import (
    HEAD,
    PATH,
    REPO,
    Steps,
    first_rows,
    latency_args,
    latency_stack,
    observe,
    reasoning_rows,
    scenario_yaml,
    step_row,
    summary_rows,
    table_head,
    waves,
)
from bot import keys
from sandbox.cerebras import Reasoning
from sandbox.stack import Stack, wait_for_jobs

QUESTION = "/spark ask why does average divide by len(values) - 1?"
ANSWER = f"""It divides by one less than the number of values, so the mean comes out too large:

```quote {PATH}
    return sum(values) / (len(values) - 1)
```

/spark fix divide by len(values)
"""


# Spark's finding on the bug's line starts a thread; a person asks in it (no command needed).
BUG_LINE = HEAD.splitlines().index("    return sum(values) / (len(values) - 1)") + 1
FINDING = "**Bug (high):** the mean divides by one less than the number of values."
THREAD_QUESTION = "is this really a bug? show an example"


def ask_scenario(latency_ms: float, ttft_ms: float, tokens_per_second: float) -> str:
    """Return fix_latency's scenario with the question asked instead, and the hour's budgets lifted."""
    document = yaml.safe_load(scenario_yaml(latency_ms, ttft_ms, tokens_per_second))
    document["name"] = "ask-latency-bench"
    # Hundreds of questions an hour from one person: this measures one answer's path, not the budget.
    document["repository"]["files"][".github/spark.yml"] += "ask:\n  user_budget: 1000\n  pr_budget: 1000\n"
    document["events"] = [{"comment": {"by": "alice", "body": QUESTION}}]
    # A reply in a thread carries no command: it takes the second script.
    document["model"]["replies"] = [
        {"name": "ask", "command": "ask", "reply": ANSWER, "repeat": True},
        {"name": "thread", "reply": ANSWER, "repeat": True},
    ]
    return yaml.safe_dump(document, sort_keys=False)


@dataclass(frozen=True)
class Run(Steps):
    """One ``/spark ask``, in seconds from the moment the comment (and its webhook) was created."""

    answer_start: float
    answer: float
    waves: int

    @property
    def budget(self) -> float:
        """Return the target for webhook -> answer: model time + 2 round trips + 30 ms."""
        return self.model + 2 * self.round_trip + 0.030


def one_run(stack: Stack, *, cold: bool = False, thread: int | None = None) -> Run:
    """Comment ``/spark ask`` once and measure it (``cold``: with nothing remembered of the pull request;
    ``thread``: reply in that review thread of Spark's instead)."""
    if cold:
        stack.redis.delete(*stack.redis.keys(keys.LAST_SEEN.glob))
    if thread is None:
        seen = observe(stack, QUESTION, "ask")
        answer = seen.posted("/issues/1/comments")
    else:
        seen = observe(stack, THREAD_QUESTION, "thread reply", reply_to=thread)
        answer = seen.posted("/replies")
    return Run(
        **seen.steps(),
        answer_start=answer.started - seen.t0,
        answer=seen.end(answer),
        calls=len(seen.requests),
        waves=waves([r for r in seen.requests if r.started <= answer.started]),
    )


def report(
    runs: Sequence[Run], latency_ms: float, cold: Sequence[Run] = (), thread: Sequence[Run] = ()
) -> str:
    """Return the figures as a table: per step p50/p95, then the total against the target; then the cold
    runs and the thread replies."""

    row = step_row
    lines = [
        *table_head("/spark ask", len(runs), latency_ms),
        *first_rows(runs),
        row("answer sent", [r.answer_start for r in runs]),
        row("answer posted", [r.answer for r in runs], "<- webhook -> answer"),
        row("GitHub round trip (median call)", [r.round_trip for r in runs]),
        row("target: model + 2 round trips + 30", [r.budget for r in runs]),
        row("beyond the model: answer - model", [r.answer - r.model for r in runs]),
        row("worker time: reads done -> model", [r.model_start - r.reads_end for r in runs]),
        row("worker time: last token -> answer", [r.answer_start - r.model_start - r.model for r in runs]),
        "",
        f"  GitHub calls per answer: {statistics.median(r.calls for r in runs):.0f}, in "
        f"{statistics.median(r.waves for r in runs):.0f} sequential rounds incl. the answer",
    ]
    met = sum(r.answer <= r.budget for r in runs)
    lines.append(f"  webhook -> answer within target: {met}/{len(runs)} runs")
    if cold:
        title = "cold (Spark had not seen the head)"
        lines.append(summary_rows(title, cold, [r.answer for r in cold], "answer", [r.waves for r in cold]))
    if thread:
        title = "a reply in Spark's review thread (its thread checked first, then as /spark ask)"
        lines.append(
            summary_rows(title, thread, [r.answer for r in thread], "answer", [r.waves for r in thread])
        )
    return "\n".join(lines)


def measure(
    runs: int, latency_ms: float, ttft_ms: float, tokens_per_second: float, reasoning: Sequence[int] = (0,)
) -> tuple[list[Run], list[Run], list[Run], dict[int, list[Run]]]:
    """Start the stack, warm it with one untimed run; time ``runs`` questions, then a third as many cold and
    as many replies in a review thread Spark started, then as many warm questions per further reasoning
    level (the model reasons ``reasoning[0]`` tokens before the others)."""
    with latency_stack(ask_scenario(latency_ms, ttft_ms, tokens_per_second)) as stack:
        assert stack.model is not None
        stack.model.set_reasoning(Reasoning.flat(reasoning[0]))
        one_run(stack)  # the first job pays for token minting and connection set-up
        warm = [one_run(stack) for _ in range(runs)]
        extra = max(3, runs // 3)
        cold = [one_run(stack, cold=True) for _ in range(extra)]
        gh = stack.github
        root = gh.review_comment(REPO, 1, PATH, BUG_LINE, FINDING, author=gh.bot_login)
        wait_for_jobs(stack, timeout=60)
        one_run(stack, thread=root)  # the worker's first look at a thread learns the App's login (GET /app)
        thread = [one_run(stack, thread=root) for _ in range(extra)]
        levels = {}
        for tokens in reasoning[1:]:
            stack.model.set_reasoning(Reasoning.flat(tokens))
            levels[tokens] = [one_run(stack) for _ in range(extra)]
        return warm, cold, thread, levels


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the figures."""
    args = latency_args("python -m bench.ask_latency", __doc__.splitlines()[0], argv)
    warm, cold, thread, levels = measure(
        args.runs, args.latency_ms, args.ttft_ms, args.tokens_per_second, args.reasoning
    )
    print(f"(the model reasons {args.reasoning[0]} tokens before each answer in these runs)")
    print(report(warm, args.latency_ms, cold, thread))
    for tokens, level in levels.items():
        print(reasoning_rows(tokens, level, [r.answer for r in level], "answer", [r.waves for r in level]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
