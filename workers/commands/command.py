"""What the registry holds for each command: its name, its line in ``/spark help`` and its handler."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.cancel import Cancelled
from bot.refs import CommandRef
from workers.context import JobContext

# A command's handler: the job's ``pr`` argument and the command in, what came of it out ("committed", ...).
Handler = Callable[[dict[str, Any], CommandRef], str]


@dataclass(frozen=True, slots=True)
class Command:
    """One registered command: the name it is parsed as, its help line ("" when help lists none), its run."""

    name: str
    help: str
    run: Handler


def cancellable(kind: str, flow: Callable[[JobContext, CommandRef], str]) -> Handler:
    """Return the handler that runs ``flow`` as a job of ``kind``; a cancelled run is logged, not failed."""

    def handle(pr: dict[str, Any], ref: CommandRef) -> str:
        ctx = JobContext.build(pr, kind=kind, claim=False, heard=ref.text)
        try:
            return flow(ctx, ref)
        except Cancelled as exc:
            ctx.log.info(f"{kind}.cancelled", reason=exc.reason, by=exc.by)
            return "cancelled"

    handle.__doc__ = flow.__doc__
    handle.__module__ = flow.__module__
    return handle
