"""What ``/spark fix`` tells its requester: its help line, and the wording of each refusal and failure."""

from __future__ import annotations

from bot.adapters.cerebras import ModelError
from bot.adapters.github_port import GitHubError, Unreadable
from bot.cancel import STOPPED, Cancelled
from bot.core.render import code, prose

HELP = (
    "`/spark fix [instructions]`: commit a verified fix (needs write permission by default); `/spark fix ci` "
    "(or a bare `/spark fix` after a check failed) fixes what the failed checks report"
)


class FixFailed(Exception):
    """The fix cannot be made; ``message`` tells the user what went wrong and how to recover."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def permission_refusal(author: str, need: str, level: str) -> str:
    """Return the refusal of a requester without the permission ``/spark fix`` needs here."""
    return (
        f"Sorry @{author}, `/spark fix` needs {need} permission on this repository "
        f"(you have {level}). Ask a maintainer to run it."
    )


def model_failed_reply(exc: ModelError) -> str:
    """Return the reply when the model call failed."""
    return f"The model call failed: {prose(exc.user_message)} Comment `/spark fix` again to retry."


def github_failed_reply(exc: GitHubError) -> str:
    """Return the reply when GitHub refused a call the fix needed."""
    return f"GitHub refused a call ({exc.status}: {prose(exc.message)}). Comment `/spark fix` again to retry."


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
