"""Spark's pushes refused by GitHub, said in a reply's words: the guard and each rule it broke."""

from __future__ import annotations

from bot.adapters.github_port import PullInfo, PushRefused
from bot.core.render import code, prose


def refused_reason(refused: PushRefused, pull: PullInfo) -> str:
    """Return why GitHub refused Spark's push, naming the guard and each rule it broke."""
    rules = "; ".join(refused.rules) or refused.message
    if refused.guard == "permissions":
        return f"was not allowed to push to {code(pull.head_repo)} ({prose(rules)})"
    return f"could not push to {code(pull.head_ref)}: its {refused.guard} refused the commit ({prose(rules)})"
