"""Replies in Spark's own review threads: answered in the thread, or the finding dismissed in the ledger.

Only threads whose first comment Spark wrote count, and only people's replies (the intake drops bots' and
Spark's own). "won't fix", "wontfix", "false positive" in a reply, or a 👎 on Spark's comments in the thread,
mark the thread's finding dismissed: the review never posts it again. GitHub sends no webhook for reactions,
so a 👎 is read when someone next replies in the thread, and by the next review (``ledger_from_threads``).
"""

from __future__ import annotations

from typing import Any

from bot import keys
from bot.core.ask import is_dismissal
from bot.core.commands import THREAD_REPLY
from bot.core.findings import read_finding_marker
from bot.refs import CommandRef
from workers.commands.ask import already_answered, load_thread, run_ask
from workers.commands.command import Command
from workers.context import JobContext
from workers.flows.parallel import submit
from workers.flows.read_ahead import ReadAhead
from workers.memory import last_seen
from workers.memory.ledger import mark_dismissed
from workers.reply import Reply


def run_reply(ctx: JobContext, command: CommandRef) -> str:
    """Answer a person's reply in one of Spark's threads, or dismiss the thread's finding."""
    if already_answered(ctx, command.comment_id):
        return "already answered"
    # One round trip: the thread, the pull request and, at the base last seen, the config (see ask's rounds).
    with ctx.timings.span("github_read"):
        thread_f = submit(load_thread, ctx, command.thread_id)
        pull_f = submit(ctx.github.pull, ctx.repo, ctx.pr.number)
        ahead: ReadAhead[object] = ReadAhead.start(ctx.github, last_seen.recall(ctx.redis, ctx.pr.key))
        thread = thread_f.result()
    if thread is None or not ctx.github.is_own(thread.root_author):
        return "not spark's thread"
    pull = pull_f.result()
    with ctx.timings.span("github_read"):
        config = ahead.repo_config(ctx.github, pull).config
    if not config.thread_chat:
        return "thread chat off"
    finding = read_finding_marker(thread.root_body)
    if finding is not None and is_dismissal(command.text):
        return _dismiss(ctx, command, finding)
    preface = ""
    if finding is not None and thread.thumbs_down and mark_dismissed(ctx, finding):
        preface = (
            "Noted your 👎: I marked this finding dismissed and will not raise it again on this pull request."
        )
    return run_ask(
        ctx, command, question=command.text, thread=thread, pull=pull, config=config, preface=preface
    )


def _dismiss(ctx: JobContext, command: CommandRef, finding: str) -> str:
    """Mark the finding dismissed and say so once, briefly, in the thread."""
    mark_dismissed(ctx, finding)
    ctx.github.react(ctx.repo, command.comment_id, "+1", review_comment=True)
    if already_answered(ctx, command.comment_id):
        return "dismissed"
    reply = Reply(ctx, command, "ask", rerun=False).post(
        "Dismissed: I will not raise this finding again on this pull request."
    )
    if reply is not None:
        ctx.redis.set(keys.ASK_ANSWERED.format(command.comment_id), reply.id, ex=keys.ASK_ANSWERED.seconds)
    ctx.log.info("thread.dismissed", finding=finding)
    return "dismissed"


def handle(pr: dict[str, Any], ref: CommandRef) -> str:
    """A person's reply in a review thread: answered when the thread is Spark's, or its finding dismissed."""
    return run_reply(JobContext.build(pr, kind="ask", claim=False, heard=ref.text), ref)


# Not a command anyone types, so help lists none: ``/spark ask``'s line says it.
COMMAND = Command(THREAD_REPLY, "", handle)
