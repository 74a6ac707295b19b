"""How the reliability benchmark tells a job run again from a second visible effect on GitHub."""

from __future__ import annotations

from bench.chaos import SEED_SCENARIO, visible_duplicates
from bot.core import markers
from sandbox import scenario as scenarios
from sandbox.github import GitHubSandbox


def test_a_second_object_with_one_identity_is_a_duplicate_an_edit_is_not(private_key: str) -> None:
    github = GitHubSandbox(private_key_pem=private_key)
    scene = scenarios.apply(scenarios.parse(SEED_SCENARIO, source="<seed>"), github)
    repo, number, bot = scene.repo, scene.pr_number, github.bot_login
    first = github.comment(repo, number, markers.append("Done.", "reply", "fix-7-abc"), author=bot)
    github.comment(repo, number, markers.append("Other.", "reply", "ask-8-def"), author=bot)
    github.comment(repo, number, "A person's words, no marker.", author="alice")
    github.react(first, "eyes", author=bot)
    assert visible_duplicates(github) == []
    # A job run again that edits its marked reply leaves one object; one that posts it again leaves two.
    github.comment(repo, number, markers.append("Done again.", "reply", "fix-7-abc"), author=bot)
    github.react(first, "eyes", author=bot)
    found = visible_duplicates(github)
    assert any(f.startswith("issue comment") and f.endswith("fix-7-abc") for f in found), found
    assert len(found) <= 2
