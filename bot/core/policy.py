"""Who may ask Spark for what, what it may edit, and where it may push: pure decisions the flows apply.

The flows fetch the facts (a commenter's permission, the pull request's head) through the adapters and ask
here; GitHub's own rules (branch protection, rulesets) still judge every push after these.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal, Protocol, get_args

from bot.core.render import code

Permission = Literal["admin", "maintain", "write", "triage", "read"]
# Strongest first, as GitHub's collaborator permission levels rank.
PERMISSION_ORDER: tuple[Permission, ...] = get_args(Permission)
# Steering actions (a stop, or a job kind superseding an older one) the pull request's author may not take
# on her own pull request without the permission ``/spark fix`` needs; any other she may.
NOT_FOR_THE_AUTHOR = frozenset({"fix"})


def permits(level: str, needed: Permission) -> bool:
    """Return whether a collaborator with permission ``level`` has ``needed`` or stronger (unknown: never)."""
    if level not in PERMISSION_ORDER:
        return False
    return PERMISSION_ORDER.index(level) <= PERMISSION_ORDER.index(needed)


def may_steer(action: str, login: str, pr_author: str, needed: Permission, level: Callable[[], str]) -> bool:
    """Return whether ``login`` may ``action`` ("stop", "review", "fix") a pull request's work.

    Who may run ``/spark fix`` (``needed``) may, and the pull request's author too, except for a fix.
    ``level`` fetches ``login``'s permission, asked only when the author rule does not decide.
    """
    if action not in NOT_FOR_THE_AUTHOR and login == pr_author:
        return True
    return permits(level(), needed)


def check_target_path(path: str) -> str | None:
    """Return why an edit of ``path`` is refused (outside the repository, a workflow), else ``None``."""
    if not path or not path.strip():
        return "the path is empty"
    if "\x00" in path or any(ord(c) < 32 for c in path):
        return "the path contains control characters"
    if "\\" in path:
        return "the path contains a backslash"
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path) or path.startswith("~"):
        return f"{path!r} is absolute, not a path inside the repository"
    segments = path.split("/")
    if any(seg in ("", ".", "..") for seg in segments):
        return f"{path!r} has empty, '.' or '..' segments, so it may point outside the repository"
    lowered = [seg.lower() for seg in segments]
    if lowered[0] == ".git":
        return f"{path!r} is inside .git"
    if lowered[:2] == [".github", "workflows"]:
        return f"{path!r} is a GitHub Actions workflow; Spark never edits workflows"
    return None


class Head(Protocol):
    """What a push decision reads of a pull request (the GitHub adapter's ``PullInfo`` has it)."""

    @property
    def head_ref(self) -> str: ...
    @property
    def head_repo(self) -> str: ...
    @property
    def default_branch(self) -> str: ...
    @property
    def maintainer_can_modify(self) -> bool: ...
    @property
    def is_fork(self) -> bool: ...


def closed_fork(pull: Head) -> bool:
    """Return whether the head is a fork that does not allow edits by maintainers (Spark only suggests)."""
    return pull.is_fork and not pull.maintainer_can_modify


def push_refusal(pull: Head) -> str | None:
    """Return why Spark must not push to the pull request's head branch (then it suggests), else None."""
    if not pull.is_fork and pull.head_ref == pull.default_branch:
        # Never the default branch, even when a pull request's head is it.
        return f"never push to the default branch {code(pull.default_branch)}"
    if closed_fork(pull):
        return f"cannot push to {code(pull.head_repo)} (the fork does not allow edits by maintainers)"
    return None
