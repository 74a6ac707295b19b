"""A ``/spark fix`` started before GitHub answers: the model is asked at once on what the last fix read.

On a pull request a fix has read before (``workers.memory.fix_memory``: its title, body, diff, config and the
files' texts by blob SHA), the same targets are chosen and the same requests built from that memory, and the
model is asked while the first round trip (the pull request, the diff, the config, the files at the head) is
still out. When it is in, the fix builds its inputs from what GitHub answered, as it always does; if every one
of them is what the early start used (the pull request's text, the diff, the config, the targets, each file's
text at the head the commit will name, the session, the request), the early answers are the answers and the
commit follows at once. Anything else and they are dropped unseen: the fix asks the model on what GitHub
answered, exactly as it would have. So a commit is never made against text GitHub no longer has, and a fix
that fell back reads, replies and commits exactly as one that never started early.
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
from bot.refs import CommandRef
from workers.context import JobContext
from workers.flows.edit import EditOutcome
from workers.flows.parallel import submit_waiting
from workers.memory import fix_memory, last_seen, own_commits
from workers.timings import Timings

# What asks the model for every target:
# ``propose(ctx, command, pr_text, diff, config, originals, instruction, history)``.
Propose = Callable[
    [JobContext, CommandRef, PullRequestText, Diff, RepoConfig, dict[str, tuple[str, str]], str, str],
    dict[str, EditOutcome],
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
    """A fix started early: its inputs, the context it asked the model in, and its answers to come."""

    inputs: Inputs
    ctx: JobContext
    outcomes: Future[dict[str, EditOutcome]]

    def adopt(self, ctx: JobContext, now: Inputs) -> dict[str, EditOutcome] | None:
        """Return the early answers if ``now`` (from GitHub's answers) is what they were built from, else
        None; adopted answers bring their model figures (and notes) into ``ctx``'s timings."""
        if now != self.inputs:
            changed = [f for f in Inputs.__slots__ if getattr(now, f) != getattr(self.inputs, f)]
            ctx.log.info("fix.ahead_dropped", changed=changed)
            return None
        try:
            outcomes = self.outcomes.result()
        except Exception as exc:  # the fix asks again on GitHub's answers, and reports any error from there
            ctx.log.info("fix.ahead_failed", error=type(exc).__name__)
            return None
        ctx.timings.merge(self.ctx.timings)
        ctx.log.info("fix.ahead_used", files=len(outcomes))
        return outcomes


def start(
    ctx: JobContext,
    command: CommandRef,
    *,
    rerun: bool,
    seen: last_seen.Seen | None,
    history: Callable[[], str],
    propose: Propose,
) -> Ahead | None:
    """Ask the model now on what the last fix of this pull request read, if it is all on this machine, names
    the targets, and the commenter's fix passed the permission check here before (``history`` returns the
    session as the prompt shows it, without recording)."""
    if rerun:
        return None
    # Spark's own commit moved the head last: the texts it changed are not the ones the last fix read.
    if seen is not None and own_commits.is_own(ctx.redis, ctx.pr.key, seen.head_sha, wait=0):
        return None
    memory = fix_memory.recall(ctx.redis, ctx.clients.store, ctx.pr.key)
    if memory is None or command.author not in memory.authors:
        return None
    instruction = command.text.strip()
    diff = parse_diff(memory.diff)
    thread_path = command.path if command.kind == "review_comment" else None
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
    # Its own timings: a fix that falls back shows none of its figures.
    early = replace(ctx, timings=Timings(queue_wait=ctx.timings.queue_wait))
    size = ctx.settings.spark_review_concurrency
    outcomes = submit_waiting(
        size,
        propose,
        early,
        command,
        inputs.pr_text,
        diff,
        memory.config,
        dict(originals),
        instruction,
        inputs.history,
    )
    return Ahead(inputs, early, outcomes)
