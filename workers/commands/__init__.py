"""The ``/spark`` commands: one module (or package) each, registered here with one line.

A command's module holds its permission check, its refusal texts, its help line and its flow, and ends
with its ``COMMAND``. ``workers.jobs.command`` runs the registered handler of the command's name;
``/spark help`` lists the help lines in this table's order.
"""

from __future__ import annotations

from workers.commands import ask, describe, fix, review, stop, thread_reply, undo
from workers.commands import help as help_command
from workers.commands.command import Command

REGISTERED: tuple[Command, ...] = (
    fix.COMMAND,
    ask.COMMAND,
    review.COMMAND,
    stop.COMMAND,
    undo.COMMAND,
    describe.COMMAND,
    help_command.COMMAND,
    thread_reply.COMMAND,
)

COMMANDS: dict[str, Command] = {command.name: command for command in REGISTERED}


def command_for(name: str) -> Command:
    """Return the command registered as ``name``; a name no command has (an old job's) is help."""
    return COMMANDS.get(name, help_command.COMMAND)
