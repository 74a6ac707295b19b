"""``/spark describe`` (and, where ``describe.on_open`` is set, each new pull request): a summary of the pull
request in a marked section of its description, the author's own text kept byte for byte.

Only the pull request's author and those with write, maintain or admin permission may ask for it. A re-run
writes the same section again (it replaces, never appends) and edits the same reply.
"""

from __future__ import annotations

import time
from typing import Any

from bot.adapters.cerebras import ModelError
from bot.adapters.github_port import GitHubError, RateLimited
from bot.cancel import Cancelled
from bot.core import crossref
from bot.core.describe import clean_summary, describe_messages, with_summary
from bot.core.diff import parse_diff
from bot.core.fixes import format_timings
from bot.core.render import prose
from bot.core.session import ANSWERED, Entry, entry_id
from bot.index.context import open_index, ready_index
from bot.refs import CommandRef
from workers.commands.command import Command, cancellable
from workers.context import JobContext
from workers.flows.parallel import submit
from workers.flows.repo_config import load_repo_config
from workers.memory import session as sessions
from workers.reply import Reply

HELP = (
    "`/spark describe`: write or update a summary of the pull request in its description (its author and "
    "maintainers)"
)

# Who may rewrite a pull request's description besides its author.
MAINTAINERS = frozenset({"write", "maintain", "admin"})


def run_describe(ctx: JobContext, command: CommandRef) -> str:
    """Run ``/spark describe``; return what happened (described, refused, failed, gone)."""
    began = time.perf_counter()
    gh, repo = ctx.github, ctx.repo
    eyes = submit(gh.react, repo, command.comment_id, "eyes", review_comment=command.kind == "review_comment")
    permission = submit(gh.permission, repo, command.author)
    pull_f = submit(gh.pull, repo, ctx.pr.number)
    diff_f = submit(gh.pull_diff, repo, ctx.pr.number)
    pull = pull_f.result()
    eyes.result()
    if command.author != pull.author and permission.result() not in MAINTAINERS:
        return _reply(
            ctx,
            command,
            f"Sorry @{command.author}, `/spark describe` rewrites the pull request's description, so it is "
            "for its author and the repository's maintainers (write permission or higher).",
            "refused",
        )
    ctx.cancel.claim(by=command.author)
    try:
        result = describe_pull(ctx, diff_f.result().text)
    except ModelError as exc:
        return _reply(
            ctx,
            command,
            f"The model call failed: {prose(exc.user_message)} Comment `/spark describe` again to retry.",
            "failed",
        )
    if result is None:
        return _reply(
            ctx,
            command,
            "The model wrote no summary; the description is unchanged. "
            "Comment `/spark describe` again to retry.",
            "failed",
        )
    sessions.record(
        ctx.redis,
        ctx.pr.key,
        Entry(
            id=entry_id("describe", command.comment_id),
            command="describe",
            author=command.author,
            outcome=ANSWERED,
            order=command.comment_id,
            answer=result,
        ),
    )
    timings = format_timings(ctx.timings.as_ms(total=ctx.timings.total(began)))
    return _reply(
        ctx,
        command,
        "Updated the summary in the pull request's description (what changes, per file, and what is worth "
        "a reviewer's look); the rest of the description is as it was."
        + "".join(f"\n\n{note}" for note in ctx.timings.notes)
        + f"\n\n<sub>{timings}</sub>",
        "described",
        rocket=True,
    )


def describe_on_open(ctx: JobContext) -> str:
    """Write the summary of a new pull request when its repository's ``describe.on_open`` asks for it."""
    pull = ctx.github.pull(ctx.repo, ctx.pr.number)
    if not load_repo_config(ctx.github, pull.base_repo, pull.base_ref).config.describe_on_open:
        return "off"
    diff = ctx.github.pull_diff(ctx.repo, ctx.pr.number)
    return "described" if describe_pull(ctx, diff.text) is not None else "failed"


def describe_pull(ctx: JobContext, diff_text: str) -> str | None:
    """Ask the model for the summary and write it into the description; return it (None: nothing written).

    The description is read again just before the write, so an edit the author made meanwhile is kept.
    """
    pull = ctx.github.pull(ctx.repo, ctx.pr.number)
    indexing = open_index(ctx.github, ctx.settings, ctx.redis, pull.base_repo, pull.head_sha)
    config = load_repo_config(ctx.github, pull.base_repo, pull.base_ref).config
    diff = parse_diff(diff_text)
    # The callers in other files of what the pull request changes: the summary names those it affects.
    index = ready_index(indexing, ctx.settings, pull.base_repo, pull.base_sha, ctx.github.secrets)
    callers = index.for_change(diff.files, crossref.REVIEW_TOKENS)
    messages = describe_messages(pull.title, pull.body, diff, callers.text)
    model = config.model_fast or ctx.settings.spark_model_fast
    completion = ctx.complete(messages, model, "describe", config)
    summary = clean_summary(completion.text)
    if summary is None:
        return None
    ctx.cancel.check()
    fresh = ctx.github.pull(ctx.repo, ctx.pr.number)
    body = with_summary(fresh.body, summary)
    if body != fresh.body:
        ctx.github.edit_pull_body(ctx.repo, ctx.pr.number, body)
    return summary


def _reply(ctx: JobContext, command: CommandRef, text: str, outcome: str, rocket: bool = False) -> str:
    """Reply once (a re-run edits the same reply); return ``outcome``."""
    Reply(ctx, command, "describe").post(text, reaction="rocket" if rocket else None)
    return outcome


def describe_new(pr: dict[str, Any]) -> None:
    """Summarise a new pull request in its description where ``describe.on_open`` asks for it.

    Its failure is logged, never the review's: the review of the same job has been posted by then.
    """
    ctx = JobContext.build(pr, kind="describe")
    try:
        ctx.log.info("describe.on_open", outcome=describe_on_open(ctx))
    except (Cancelled, ModelError, GitHubError) as exc:
        if isinstance(exc, RateLimited):
            raise
        ctx.log.warning("describe.on_open_failed", error=str(exc))


COMMAND = Command("describe", HELP, cancellable("describe", run_describe))
