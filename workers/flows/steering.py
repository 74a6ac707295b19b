"""Who may steer work on a pull request: stop it, or supersede it with a newer job of the same kind."""

from __future__ import annotations

from bot.adapters.github_port import GitHubPort
from bot.cancel import Verify
from bot.core import policy
from bot.core.config import RepoConfig


def may_steer(gh: GitHubPort, repo: str, pr_author: str, config: RepoConfig, login: str, action: str) -> bool:
    """Return whether ``login`` may ``action`` ("stop", "review", "fix") the pull request's work."""
    return policy.may_steer(
        action, login, pr_author, config.fix_permission, lambda: gh.permission(repo, login)
    )


def verifier(gh: GitHubPort, repo: str, pr_author: str, config: RepoConfig) -> Verify:
    """Return the check a running job's cancel token applies to a stop or a newer job someone asked for."""

    def verify(login: str, action: str) -> bool:
        return may_steer(gh, repo, pr_author, config, login, action)

    return verify
