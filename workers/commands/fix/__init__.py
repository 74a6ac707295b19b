"""``/spark fix``: the flow (``flow``), where a fix lands (``lands``), what its requester reads
(``replies``)."""

from __future__ import annotations

from workers.commands.command import Command
from workers.commands.fix.flow import handle
from workers.commands.fix.replies import HELP

COMMAND = Command("fix", HELP, handle)
