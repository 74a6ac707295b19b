"""Who may steer work on a pull request: stop it, or supersede it with a newer job of the same kind; the
start of the commands that steer it."""

from __future__ import annotations

from typing import Any

from bot.adapters.github_port import GitHubPort
from bot.cancel import Verify
from bot.core import policy
from bot.core.config import RepoConfig
from bot.refs import CommandRef
from workers.context import JobContext
from workers.flows.repo_config import load_repo_config
from workers.reply import Reply


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


def start_steering(pr: dict[str, Any], ref: CommandRef) -> JobContext | None:
    """Start a command that steers Spark's work (``/spark review``, ``/spark stop``): claim the pull
    request's token, or reply with the refusal and return None."""
    ctx = JobContext.build(pr, kind=ref.name, claim=False)
    pull = ctx.github.pull(ctx.repo, ctx.pr.number)
    if ref.author != pull.author:
        config = load_repo_config(ctx.github, pull.base_repo, pull.base_ref).config
        if not may_steer(ctx.github, ctx.repo, pull.author, config, ref.author, ref.name):
            Reply(ctx, ref, ref.name).post(
                f"Sorry @{ref.author}, `/spark {ref.name}` is for the pull request's author and the "
                "repository's maintainers."
            )
            return None
    ctx.cancel.claim(by=ref.author)
    return ctx
