"""Where ``/spark fix`` may push: never the default branch, a fork only when it allows maintainer edits."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.adapters.github import PullInfo
from workers.flows.fix import push_refusal

SAME_REPO = PullInfo(
    number=1,
    title="t",
    body="",
    state="open",
    draft=False,
    author="alice",
    head_sha="a" * 40,
    head_ref="feature",
    head_repo="acme/app",
    base_sha="b" * 40,
    base_ref="main",
    base_repo="acme/app",
    maintainer_can_modify=False,
    default_branch="main",
)


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
