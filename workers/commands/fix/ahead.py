"""A ``/spark fix`` asked before GitHub answers: the model starts at once on what Spark already has.

On a head Spark has seen (``workers.memory.last_seen``), by a commenter whose fix passed the permission check
on this pull request before, the fix's requests are built at once from what the last fix read
(``workers.memory.fix_memory``: the pull request's words, its diff, the config) and from this machine's
store: each target's text by blob SHA (as the repository index lists it at the head last seen, else at the
head the last fix read; else the one the last fix read: a file the last fix did not edit starts early too)
and the code from other files the index gives. The model is asked before the rest of the first round trip
(permission, pull request, diff, config, the targets at the head last seen, the index of that head) leaves.
When it is in, the fix builds its requests from GitHub's answers, as always; the early answers are used only
when the pull request's head is still the head last seen and every request is equal to the one asked early
(``asks.FileRequest``: the file's text, its diff, the code from other files, the words, the history, the
config, the models), so the model saw exactly what GitHub holds at the head the commit names with
``expectedHeadOid``. Otherwise they are dropped unseen (their stream is cut) and the fix asks on GitHub's
answers, as if it had never started early: the same reads, reply and commit.

Only a commenter the memory lists starts early: nobody else makes Spark spend a model call before the
permission check, and the early answers are looked at only after the check passed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, fields, replace

from bot import keys
from bot.adapters.github_port import PullInfo
from bot.core.diff import parse_diff
from bot.core.edits import decode_source
from bot.core.prompts import PullRequestText
from bot.core.targets import choose_targets
from bot.index.build import load_listing
from bot.index.context import PullIndex, local_store
from bot.index.lookup import RepoIndex
from bot.refs import CommandRef
from workers.commands.fix.asks import (
    FileRequest,
    build_requests,
    fit,
    propose_one,
    session_entry,
    shown_history,
)
from workers.context import JobContext
from workers.flows.ci import CHECK_RUN, asks_ci
from workers.flows.edit import EditOutcome
from workers.flows.parallel import submit
from workers.memory import fix_memory
from workers.memory import session as sessions
from workers.memory.last_seen import Seen
from workers.timings import Timings

# Why an early stream is cut when its answers are not used.
DROPPED = "the fix went on without the answer asked early"
# How long the rest of round trip 1 waits for the model's request to be out: its reads are needed only once
# the answer is in, and the threads building them would slow the request down.
HEAD_START_SECONDS = 0.025


@dataclass(frozen=True, slots=True)
class Ahead:
    """A fix asked early: the head it assumed, its requests, its own context, and the answers to come."""

    seen: Seen
    requests: Mapping[str, FileRequest]
    ctx: JobContext
    outcomes: Mapping[str, Future[EditOutcome]]

    def adopt(
        self, ctx: JobContext, pull: PullInfo, requests: Mapping[str, FileRequest]
    ) -> dict[str, EditOutcome] | None:
        """Return the early answers if the pull request is at the head assumed and ``requests`` (built from
        GitHub's answers) are the ones asked; else drop them and return None. Adopted answers bring their
        model figures into ``ctx``'s timings."""
        if not self.seen.matches_head(pull):
            self.drop(ctx, ["head"])
            return None
        if dict(requests) != dict(self.requests):
            self.drop(ctx, _changed(self.requests, requests))
            return None
        try:
            outcomes = {path: future.result() for path, future in self.outcomes.items()}
        except Exception as exc:  # the fix asks again on GitHub's answers, and reports any error from there
            self.drop(ctx, [], error=type(exc).__name__)
            return None
        ctx.timings.merge(self.ctx.timings)
        ctx.log.info("fix.ahead_used", files=len(outcomes))
        return outcomes

    def wait_sent(self, timeout: float = HEAD_START_SECONDS) -> bool:
        """Wait (at most ``timeout``) until the first early request is out; return whether it is."""
        sent = self.ctx.model_sent
        return sent is None or sent.wait(timeout)

    def stop(self) -> None:
        """Cut the early streams, if they still run (once the fix is over: used answers are all in)."""
        self.ctx.cancel.reason = self.ctx.cancel.reason or DROPPED

    def drop(self, ctx: JobContext, changed: list[str], *, error: str = "") -> None:
        """Cut the early streams (their answers are never looked at) and say why in the log."""
        self.stop()
        if error:
            ctx.log.info("fix.ahead_failed", error=error)
        else:
            ctx.log.info("fix.ahead_dropped", changed=changed)


def _changed(before: Mapping[str, FileRequest], now: Mapping[str, FileRequest]) -> list[str]:
    """Return what differs between two sets of requests (for the log): targets, or the fields that differ."""
    if before.keys() != now.keys():
        return ["targets"]
    return sorted(
        {
            f.name
            for path, asked in now.items()
            for f in fields(FileRequest)
            if getattr(asked, f.name) != getattr(before[path], f.name)
        }
    )


def start(ctx: JobContext, command: CommandRef, seen: Seen | None) -> Ahead | None:
    """Ask the model now for the fix ``command`` asks, where this machine has everything its requests need
    of the head last seen (the requests are built here, from Redis and the local store; the model is asked
    on the flows' pool); else ask nothing and return None."""
    try:
        return _ask(ctx, command, seen)
    except Exception as exc:  # the fix goes on as it always did
        ctx.log.warning("fix.ahead_not_started", error=type(exc).__name__)
        return None


def _ask(ctx: JobContext, command: CommandRef, seen: Seen | None) -> Ahead | None:
    instruction = command.text.strip()
    if seen is None or not seen.head_sha or command.kind == CHECK_RUN:
        return None
    # A bare `/spark fix` may be a CI fix, whose failures are read from GitHub: not started early.
    if not instruction or asks_ci(instruction):
        return None
    # One round trip to Redis: what the last fix read, whether the head last seen is Spark's own commit (as
    # ``own_commits.is_own`` without waiting), and the session.
    with ctx.redis.pipeline(transaction=False) as pipe:
        pipe.get(keys.FIX_MEMORY.format(ctx.pr.key))
        pipe.exists(keys.OWN_COMMIT.format(seen.head_sha))
        pipe.get(keys.SESSION.format(ctx.pr.key))
        raw_memory, own, raw_session = pipe.execute()
    document = fix_memory.parse_document(raw_memory)
    if document is None or command.author not in fix_memory.authors(document):
        return None
    # Spark's own commit moved the head last: the texts it changed are not the ones the last fix read, and
    # the pull request's diff is not the one remembered.
    if own:
        return None
    store = local_store(ctx.settings)
    memory = fix_memory.remembered(store, document)
    if memory is None:
        return None
    # The index of the head last seen, else of the head the last fix read (the context is confirmed against
    # the index of the head GitHub answers with before anything is used).
    repo = seen.base_repo
    head, listing = seen.head_sha, load_listing(store, repo, seen.head_sha)
    if listing is None:
        head, listing = memory.head_sha, load_listing(store, repo, memory.head_sha)
    if listing is None:
        return None
    diff = parse_diff(memory.diff)
    thread_path = command.path if command.kind == "review_comment" else None
    choice = choose_targets(instruction, diff, thread_path=thread_path, selects=memory.config.selects)
    if choice.refused or choice.unresolved or not choice.paths:
        return None
    # Each target's text at the head last seen, by blob SHA: the index's, else the one the last fix read.
    shas = {path: listing.files.get(path) or memory.files.get(path) for path in choice.paths}
    texts = store.texts({sha for sha in shas.values() if sha})
    originals: dict[str, tuple[str, str]] = {}
    for path, sha in shas.items():
        if sha is None or sha not in texts:
            return None
        originals[path] = decode_source(texts[sha].encode("utf-8", "surrogatepass"))
    base = load_listing(store, repo, memory.base_sha)
    index = PullIndex(
        RepoIndex(store, repo, head, listing),
        RepoIndex(store, repo, memory.base_sha, base) if base is not None else None,
        secrets=ctx.github.secrets,
    )
    history = shown_history(sessions.decode(raw_session), session_entry(command, instruction))
    pr_text = PullRequestText(memory.title, memory.body)
    requests = build_requests(
        ctx, command, pr_text, diff, memory.config, originals, instruction, history, index, {}
    )
    # Fitted here too: the model's request leaves as soon as a thread of the pool takes it.
    fitted = {path: fit(ctx, asked) for path, asked in requests.items()}
    # Its own timings (a fix that drops it shows none of its figures) and its own cancel token: a copy of the
    # job's (a stop or a newer fix still cuts it), which the fix also fires when it drops the answers. The
    # job registered its token a moment ago: the copy counts as just checked, and asks Redis again only
    # while the answers stream.
    token = replace(ctx.cancel, _checked_at=ctx.cancel.clock())
    early = replace(
        ctx,
        timings=Timings(queue_wait=ctx.timings.queue_wait),
        cancel=token,
        model_sent=threading.Event(),
    )
    outcomes = {path: submit(propose_one, early, asked, fitted[path]) for path, asked in requests.items()}
    ctx.log.info("fix.ahead_asked", files=len(outcomes), head=seen.head_sha[:12])
    return Ahead(seen, requests, early, outcomes)
