"""What ``/spark fix`` tells its requester: the reply (once, even after a lost answer or a re-run), the
reactions, and the wording of each refusal; ``/spark help`` too."""

from __future__ import annotations

import time
from collections.abc import Sequence

from bot.adapters.github_port import (
    GitHubError,
    RateLimited,
    Unreadable,
)
from bot.cancel import STOPPED, Cancelled
from bot.core import markers
from bot.core.commands import HELP_LINES
from bot.core.config import ConfigError, RepoConfig, describe
from bot.core.render import code, prose
from workers.flows.fix_run import FixRun
from workers.flows.parallel import submit

# A reply answered 5xx or lost is looked for through its marker and posted again: at most this many tries.
REPLY_ATTEMPTS = 3
REPLY_BACKOFF = 0.2


class FixFailed(Exception):
    """The fix cannot be made; ``message`` tells the user what went wrong and how to recover."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def cancelled_reply(exc: Cancelled, requester: str) -> str:
    """Return what a cancelled fix tells its requester: who stopped it (empty when they did it themselves).

    Their own ``/spark stop`` or newer ``/spark fix`` answers them already; anyone else's must be named.
    """
    if exc.by and exc.by == requester:
        return ""
    if exc.reason.startswith("superseded"):
        who = f" from {exc.by}" if exc.by else ""
        return f"@{requester}, this fix was superseded by a newer `/spark fix`{who}. Nothing was committed."
    if exc.reason == STOPPED:
        if exc.by:
            return (
                f"@{requester}, {exc.by} stopped this fix with `/spark stop`. Nothing was committed; "
                "comment `/spark fix` again to retry."
            )
        return f"@{requester}, this fix was stopped: the pull request was closed. Nothing was committed."
    return f"Stopped this fix: {exc.reason}. Comment `/spark fix` again."


def unreadable_reply(exc: Unreadable) -> str:
    """Return the reply for a target Spark must not edit (a symlink, a submodule, a file too large)."""
    if "symbolic link" in exc.reason:
        hint = " Name the file it points to instead."
    elif "submodule" in exc.reason:
        hint = " Fix it in the submodule's own repository."
    elif exc.reason == "a directory":
        hint = " Name a file inside it."
    else:
        hint = " Make this change by hand."
    return f"I cannot edit {code(exc.path)}: it is {prose(exc.reason)}. Nothing was committed.{hint}"


def send_reply(run: FixRun, text: str, *, reaction: str) -> None:
    """Reply once (a re-run edits its earlier reply) and react; errors here are logged, not raised."""
    ctx, command = run.ctx, run.command
    text = "\n\n".join([text, *run.notes, *ctx.timings.notes])
    body = markers.append(text, "reply", run.key())
    try:
        react = submit(ctx.github.react, ctx.repo, command.comment_id, reaction, review_comment=run.on_thread)
        if run.on_thread and command.thread_id is not None:
            if not (run.rerun and _replied_in_thread(run)):
                _post_thread_reply(run, command.thread_id, body)
        elif run.rerun:
            ctx.github.upsert_comment(ctx.repo, ctx.pr.number, run.key(), text)
        else:
            _post_reply(run, text, body)
        react.result()
    except RateLimited:
        raise
    except GitHubError as exc:
        ctx.log.warning("fix.reply_failed", status=exc.status, message=exc.message)


def _post_thread_reply(run: FixRun, thread_id: int, body: str) -> None:
    """Reply in the review thread; after a 5xx or a lost answer, only if the thread does not show it."""
    ctx = run.ctx
    try:
        ctx.github.reply_to_review_comment(ctx.repo, ctx.pr.number, thread_id, body)
    except GitHubError as exc:
        if not exc.maybe_done or isinstance(exc, RateLimited):
            raise
        ctx.log.info("fix.reply_retry", status=exc.status, unanswered=exc.unanswered)
        if not _replied_in_thread(run):
            ctx.github.reply_to_review_comment(ctx.repo, ctx.pr.number, thread_id, body)


def _post_reply(run: FixRun, text: str, body: str) -> None:
    """Post the conversation reply; after a 5xx or a lost answer (maybe posted) retry through its marker."""
    ctx = run.ctx
    try:
        ctx.github.comment(ctx.repo, ctx.pr.number, body)
        return
    except GitHubError as exc:
        if not exc.maybe_done or isinstance(exc, RateLimited):
            raise
        ctx.log.info("fix.reply_retry", status=exc.status, unanswered=exc.unanswered)
    for attempt in range(REPLY_ATTEMPTS - 1):
        time.sleep(REPLY_BACKOFF * (attempt + 1))
        try:
            # Finds the reply if the 5xx hid a success, so the user sees exactly one.
            ctx.github.upsert_comment(ctx.repo, ctx.pr.number, run.key(), text)
            return
        except GitHubError as exc:
            if not exc.maybe_done or attempt == REPLY_ATTEMPTS - 2:
                raise


def _replied_in_thread(run: FixRun) -> bool:
    """Return whether an earlier run of this job already replied in the review thread."""
    comments = run.gh.review_comments(run.ctx.repo, run.ctx.pr.number)
    return any(
        c.in_reply_to_id == run.command.thread_id
        and run.gh.is_own(c.author)
        and markers.carries(c.body, "reply", run.key())
        for c in comments
    )


def help_text(config: RepoConfig, unknown: str = "", errors: Sequence[ConfigError] = ()) -> str:
    """Return the ``/spark help`` reply: the commands, the repository's current config and its problems."""
    intro = f"I don't know the command {code(unknown)}.\n\n" if unknown else ""
    problems = "".join(f"\n- {code(str(error))}" for error in errors)
    if problems:
        problems = "\n\n**Configuration problems** (each bad key is dropped; the rest applies):" + problems
    return (
        f"{intro}**Spark commands** (in a pull request comment or a review thread):\n\n"
        + "".join(f"- {line}\n" for line in HELP_LINES.values())
        + "\n"
        f"**Configuration** (`.github/spark.yml` on the base branch):\n\n{describe(config)}{problems}"
    )
