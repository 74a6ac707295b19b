"""One ``/spark fix`` job's state, shared by the flow, where the fix lands and what the reply says."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.adapters.github_port import GitHubPort
from bot.core.session import entry_id
from bot.refs import CommandRef
from workers import session as sessions
from workers.context import JobContext


@dataclass
class FixRun:
    """One ``/spark fix`` job: its context, command and what it has learned so far."""

    ctx: JobContext
    command: CommandRef
    rerun: bool
    started: float
    encodings: dict[str, str]
    # Said in every reply after the targets are chosen (named files left out over the limit).
    notes: list[str] = field(default_factory=list)
    # The pull request's session as the prompt shows it: earlier fixes, answers, superseded requests.
    history: str = ""

    @property
    def gh(self) -> GitHubPort:
        """Return the installation client."""
        return self.ctx.github

    @property
    def on_thread(self) -> bool:
        """Return whether the command came from a review thread."""
        return self.command.kind == "review_comment"

    def key(self) -> str:
        """Return the hidden-marker key of this command's reply."""
        return self.ctx.private_key(f"fix-{self.command.comment_id}")

    @property
    def entry(self) -> str:
        """Return the id of this command's entry in the pull request's session."""
        return entry_id("fix", self.command.comment_id)

    def outcome(self, outcome: str, **fields: Any) -> None:
        """Record what came of this fix in the session (only once the fix started: a refusal records none)."""
        sessions.update(self.ctx.redis, self.ctx.pr.key, self.entry, outcome=outcome, **fields)
