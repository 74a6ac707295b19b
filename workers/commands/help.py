"""``/spark help`` (and any word Spark does not know): the registered commands and the repository's config."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bot.core.config import ConfigError, RepoConfig, describe
from bot.core.render import code
from bot.refs import CommandRef
from workers.commands.command import Command
from workers.context import JobContext
from workers.flows.repo_config import load_repo_config
from workers.reply import Reply

HELP = "`/spark help`: this message"


def run(pr: dict[str, Any], ref: CommandRef) -> str:
    """Reply with the commands, the repository's configuration and its problems."""
    # The registry imports this module: it is read when help runs, once every command is registered.
    from workers.commands import REGISTERED

    ctx = JobContext.build(pr, kind="help")
    pull = ctx.github.pull(ctx.repo, ctx.pr.number)
    loaded = load_repo_config(ctx.github, pull.base_repo, pull.base_ref)
    lines = [command.help for command in REGISTERED if command.help]
    Reply(ctx, ref, "help").post(help_text(lines, loaded.config, ref.unknown, loaded.errors))
    return "help"


def help_text(
    lines: Iterable[str], config: RepoConfig, unknown: str = "", errors: Sequence[ConfigError] = ()
) -> str:
    """Return the ``/spark help`` reply: the commands' ``lines``, the repository's config and its problems."""
    intro = f"I don't know the command {code(unknown)}.\n\n" if unknown else ""
    problems = "".join(f"\n- {code(str(error))}" for error in errors)
    if problems:
        problems = "\n\n**Configuration problems** (each bad key is dropped; the rest applies):" + problems
    return (
        f"{intro}**Spark commands** (in a pull request comment or a review thread):\n\n"
        + "".join(f"- {line}\n" for line in lines)
        + "\n"
        f"**Configuration** (`.github/spark.yml` on the base branch):\n\n{describe(config)}{problems}"
    )


COMMAND = Command("help", HELP, run)
