"""The reply to one command, posted exactly once: where the command was written, marked, found again.

Every command replies through ``Reply``. Its hidden marker (a key only Spark can compute) lets a re-run of
the job, or a retry after GitHub answered 5xx or not at all, find the reply it may already have posted, so
the requester sees one. A command written in a review thread is answered in that thread; any other in the
pull request's conversation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from bot.adapters.github_port import CommentRef, GitHubError, RateLimited, Reaction
from bot.core import markers
from bot.refs import CommandRef
from workers.context import JobContext
from workers.flows.parallel import submit

# A conversation reply answered 5xx or lost is looked for through its marker and posted again: at most
# this many tries.
REPLY_ATTEMPTS = 3
REPLY_BACKOFF = 0.2


@dataclass(frozen=True, slots=True)
class Reply:
    """Where and how ``command`` is answered: its thread or the conversation, under its marker key."""

    ctx: JobContext
    command: CommandRef
    # The marker's visible name ("fix", "ask", ...): one reply per command name and comment.
    name: str
    # Whether an earlier run of this job may have replied already: then Spark looks before it posts.
    rerun: bool = True

    @property
    def in_thread(self) -> bool:
        """Return whether the command was written in a review thread (and is answered there)."""
        return self.command.kind == "review_comment" and self.command.thread_id is not None

    @property
    def key(self) -> str:
        """Return the hidden-marker key of this command's reply."""
        return self.ctx.private_key(f"{self.name}-{self.command.comment_id}")

    @property
    def url(self) -> str:
        """Return the URL of the command's comment (commit trailers name it; a re-run finds them by it)."""
        return self.command.url(self.ctx.settings.github_url, self.ctx.pr)

    def react(self, reaction: Reaction) -> None:
        """React to the command's comment (GitHub keeps one reaction of a kind per user)."""
        if self.command.kind == "check_run":
            return  # asked from Spark's CI check run (its button, or auto mode): no comment to react to
        ctx, command = self.ctx, self.command
        ctx.github.react(
            ctx.repo, command.comment_id, reaction, review_comment=command.kind == "review_comment"
        )

    def post(self, text: str, *, reaction: Reaction | None = None, variant: str = "") -> CommentRef | None:
        """Post ``text`` once and react; return the reply, or None when GitHub refused it (logged).

        ``variant`` names a second reply of the same command with a marker of its own (the polite "budget
        spent" note); it is looked for before it is posted, as a re-run's reply is.
        """
        ctx = self.ctx
        key = f"{self.key}-{variant}" if variant else self.key
        body = markers.append(text, "reply", key)
        look = self.rerun or bool(variant)
        try:
            reacting = submit(self.react, reaction) if reaction else None
            if self.in_thread:
                posted = (self.find_in_thread(key) if look else None) or self._in_thread(key, body)
            elif look:
                posted = ctx.github.upsert_comment(ctx.repo, ctx.pr.number, key, text)
            else:
                posted = self._in_conversation(key, text, body)
            if reacting is not None:
                reacting.result()
            return posted
        except RateLimited:
            raise
        except GitHubError as exc:
            ctx.log.warning(f"{self.name}.reply_failed", status=exc.status, message=exc.message)
            return None

    def _in_thread(self, key: str, body: str) -> CommentRef:
        """Reply in the review thread; after a 5xx or a lost answer, only if the thread does not show it."""
        ctx = self.ctx
        thread_id = self.command.thread_id
        assert thread_id is not None
        try:
            return ctx.github.reply_to_review_comment(ctx.repo, ctx.pr.number, thread_id, body)
        except GitHubError as exc:
            if not exc.maybe_done or isinstance(exc, RateLimited):
                raise
            ctx.log.info(f"{self.name}.reply_retry", status=exc.status, unanswered=exc.unanswered)
            found = self.find_in_thread(key)
            return found or ctx.github.reply_to_review_comment(ctx.repo, ctx.pr.number, thread_id, body)

    def _in_conversation(self, key: str, text: str, body: str) -> CommentRef:
        """Post in the conversation; after a 5xx or a lost answer (maybe posted) retry through the marker."""
        ctx = self.ctx
        try:
            return ctx.github.comment(ctx.repo, ctx.pr.number, body)
        except GitHubError as exc:
            if not exc.maybe_done or isinstance(exc, RateLimited):
                raise
            ctx.log.info(f"{self.name}.reply_retry", status=exc.status, unanswered=exc.unanswered)
        for attempt in range(REPLY_ATTEMPTS - 1):
            time.sleep(REPLY_BACKOFF * (attempt + 1))
            try:
                # Finds the reply if the 5xx hid a success, so the user sees exactly one.
                return ctx.github.upsert_comment(ctx.repo, ctx.pr.number, key, text)
            except GitHubError as exc:
                if not exc.maybe_done or attempt == REPLY_ATTEMPTS - 2:
                    raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def find_in_thread(self, key: str | None = None) -> CommentRef | None:
        """Return Spark's reply carrying ``key`` (this command's) in the command's thread, if posted."""
        ctx, gh = self.ctx, self.ctx.github
        key = key or self.key
        for c in gh.review_comments(ctx.repo, ctx.pr.number):
            if (
                c.in_reply_to_id == self.command.thread_id
                and gh.is_own(c.author)
                and markers.carries(c.body, "reply", key)
            ):
                return CommentRef(c.id, "", c.body)
        return None
