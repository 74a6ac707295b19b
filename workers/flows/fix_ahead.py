"""A ``/spark fix`` started before GitHub answers: the model is asked at once on what the last fix read.

On a pull request a fix has read before (``workers.fix_memory``: its title, body, diff, config and the files'
texts by blob SHA), the same targets are chosen and the same requests built from that memory, and the model
is asked while the first round trip (the pull request, the diff, the config, the files at the head) is
still out. When it is in, the fix builds its inputs from what GitHub answered, as it always does; if every
one of them is what the early start used (the pull request's text, the diff, the config, the targets, each
file's text at the head the commit will name, the session, the request), the early answers are the answers
and the commit follows at once. Anything else and they are dropped unseen: the fix asks the model on what
GitHub answered, exactly as it would have. So a commit is never made against text GitHub no longer has,
and a fix that fell back reads, replies and commits exactly as one that never started early.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, replace

from bot.core.config import RepoConfig
from bot.core.diff import parse_diff
from bot.core.prompts import PullRequestText
from bot.core.targets import choose_targets
from bot.core.types import Diff
from workers import fix_memory, last_seen, own_commits
from workers.flows.edit import EditOutcome
from workers.flows.fix_run import FixRun
from workers.flows.parallel import submit_waiting
from workers.timings import Timings

# What asks the model for every target: ``propose(run, pr_text, diff, config, originals, instruction)``.
Propose = Callable[
    [FixRun, PullRequestText, Diff, RepoConfig, dict[str, tuple[str, str]], str], dict[str, EditOutcome]
]


@dataclass(frozen=True, slots=True)
class Inputs:
    """Everything a fix's requests to the model are built from (equal inputs, equal requests)."""

    pr_text: PullRequestText
    diff: str
    config: RepoConfig
    originals: Mapping[str, tuple[str, str]]
    history: str
    instruction: str


@dataclass(frozen=True, slots=True)
class Ahead:
    """A fix started early: its inputs, the run it asked the model in, and its answers to come."""

    inputs: Inputs
    run: FixRun
    outcomes: Future[dict[str, EditOutcome]]

    def adopt(self, run: FixRun, now: Inputs) -> dict[str, EditOutcome] | None:
        """Return the early answers if ``now`` (from GitHub's answers) is what they were built from, else
        None; adopted answers bring their model figures and notes into ``run``."""
        log = run.ctx.log
        if now != self.inputs:
            changed = [f for f in Inputs.__slots__ if getattr(now, f) != getattr(self.inputs, f)]
            log.info("fix.ahead_dropped", changed=changed)
            return None
        try:
            outcomes = self.outcomes.result()
        except Exception as exc:  # the fix asks again on GitHub's answers, and reports any error from there
            log.info("fix.ahead_failed", error=type(exc).__name__)
            return None
        run.ctx.timings.merge(self.run.ctx.timings)
        run.notes += self.run.notes
        log.info("fix.ahead_used", files=len(outcomes))
        return outcomes


def start(
    run: FixRun, seen: last_seen.Seen | None, history: Callable[[], str], propose: Propose
) -> Ahead | None:
    """Ask the model now on what the last fix of this pull request read, if it is all on this machine, names
    the targets, and the commenter's fix passed the permission check here before (``history`` returns the
    session as the prompt shows it, without recording)."""
    ctx, command = run.ctx, run.command
    if run.rerun:
        return None
    # Spark's own commit moved the head last: the texts it changed are not the ones the last fix read.
    if seen is not None and own_commits.is_own(ctx.redis, ctx.pr.key, seen.head_sha, wait=0):
        return None
    memory = fix_memory.recall(ctx.redis, ctx.clients.store, ctx.pr.key)
    if memory is None or command.author not in memory.authors:
        return None
    instruction = command.text.strip()
    diff = parse_diff(memory.diff)
    thread_path = command.path if run.on_thread else None
    choice = choose_targets(instruction, diff, thread_path=thread_path, selects=memory.config.selects)
    if choice.refused or choice.unresolved or not choice.paths:
        return None
    if any(path not in memory.files for path in choice.paths):
        return None
    originals = {path: memory.files[path] for path in choice.paths}
    inputs = Inputs(
        PullRequestText(memory.title, memory.body),
        memory.diff,
        memory.config,
        originals,
        history(),
        instruction,
    )
    # Its own timings and notes: a fix that falls back shows none of them.
    timings = Timings(queue_wait=ctx.timings.queue_wait)
    early = replace(run, ctx=replace(ctx, timings=timings), notes=[], encodings={})
    early.history = inputs.history
    size = ctx.settings.spark_review_concurrency
    outcomes = submit_waiting(
        size, propose, early, inputs.pr_text, diff, memory.config, dict(originals), instruction
    )
    return Ahead(inputs, early, outcomes)
