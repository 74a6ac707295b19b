"""``/spark stop``: cancel everything running on the pull request and say so (its author and maintainers)."""

from __future__ import annotations

from typing import Any

from bot.cancel import cancel_pr
from bot.refs import CommandRef
from workers.commands.command import Command
from workers.flows.steering import start_steering
from workers.reply import Reply

HELP = "`/spark stop`: stop anything Spark is doing on this pull request"


def run(pr: dict[str, Any], ref: CommandRef) -> str:
    """Raise the pull request's stop signal for the running and queued work, then reply."""
    ctx = start_steering(pr, ref)
    if ctx is None:
        return "refused"
    cancel_pr(ctx.redis, ctx.pr.key, by=ref.author)
    Reply(ctx, ref, ref.name).post("Stopped: nothing more will be posted for the work that was running here.")
    return "stopped"


COMMAND = Command("stop", HELP, run)
