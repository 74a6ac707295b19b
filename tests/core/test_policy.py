"""Who may ask for what, and where Spark may push: never the default branch, a fork only if it allows it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.adapters.github_port import PullInfo
from bot.core.config import parse_config
from bot.core.policy import Permission, closed_fork, may_steer, permits, push_refusal
from tests.stories import SAME_REPO


@pytest.mark.parametrize(
    ("pull", "refused"),
    [
        (SAME_REPO, None),
        (replace(SAME_REPO, head_ref="main", base_ref="release"), "default branch"),
        (replace(SAME_REPO, head_repo="alice/app"), "does not allow edits"),
        (replace(SAME_REPO, head_repo="alice/app", maintainer_can_modify=True), None),
        # A fork's branch named like the default branch is the fork's, not ours.
        (replace(SAME_REPO, head_repo="alice/app", head_ref="main", maintainer_can_modify=True), None),
    ],
)
def test_push_refusal(pull: PullInfo, refused: str | None) -> None:
    reason = push_refusal(pull)
    if refused is None:
        assert reason is None
    else:
        assert reason is not None and refused in reason


@pytest.mark.parametrize(
    ("pull", "closed"), [(SAME_REPO, False), (replace(SAME_REPO, head_repo="alice/app"), True)]
)
def test_only_a_fork_without_maintainer_edits_is_closed(pull: PullInfo, closed: bool) -> None:
    assert closed_fork(pull) is closed
    assert closed_fork(replace(pull, maintainer_can_modify=True)) is False


@pytest.mark.parametrize(
    ("permission", "required", "allowed"),
    [
        ("admin", "write", True),
        ("maintain", "write", True),
        ("write", "write", True),
        ("triage", "write", False),
        ("read", "write", False),
        ("none", "read", False),
        ("", "read", False),
        ("write", "maintain", False),
        ("maintain", "maintain", True),
        ("admin", "admin", True),
        ("maintain", "admin", False),
        ("read", "read", True),
        ("triage", "triage", True),
    ],
)
def test_permits(permission: str, required: str, allowed: bool) -> None:
    """Permission levels rank admin > maintain > write > triage > read; unknown levels never pass."""
    config = parse_config(f"fix:\n  permission: {required}\n").config
    assert permits(permission, config.fix_permission) is allowed


@pytest.mark.parametrize(
    ("action", "login", "level", "allowed"),
    [
        ("stop", "alice", "read", True),  # the author stops work on her pull request
        ("review", "alice", "none", True),
        ("fix", "alice", "read", False),  # but a fix needs the permission, hers or not
        ("fix", "alice", "write", True),
        ("stop", "bob", "read", False),
        ("stop", "bob", "write", True),
    ],
)
def test_may_steer(action: str, login: str, level: str, allowed: bool) -> None:
    asked: list[str] = []

    def fetch() -> str:
        asked.append(login)
        return level

    needed: Permission = "write"
    assert may_steer(action, login, "alice", needed, fetch) is allowed
    # The permission is asked of GitHub only when the author rule does not decide.
    assert asked == ([] if login == "alice" and action != "fix" else [login])
