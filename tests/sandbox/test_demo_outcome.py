"""The demo shows whatever the App posts, unchanged: here real PyGithub plays the App's part."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from github import Auth, GithubIntegration, InputGitTreeElement

from bot.redis_server import PrivateRedis
from bot.settings import Settings
from sandbox import demo, scenario
from sandbox import stack as local_stack
from sandbox.demo import DemoResult
from sandbox.stack import Stack
from tests.conftest import RedisDb, redis_url


@pytest.fixture()
def stack(tmp_path: Path, redis_server: PrivateRedis) -> Iterator[Stack]:
    url = redis_url(redis_server, RedisDb.DEMO_STACK)
    redis.Redis.from_url(url).flushdb()
    base = Settings.load({"REDIS_URL": url}, env_file=None)
    started = local_stack.start_stack(scenario.load("python-bug-fix"), base, tmp_path, worker=False)
    yield started
    started.close()


def test_what_the_app_posts_is_collected_checked_and_shown(stack: Stack) -> None:
    sc, scene, gh = stack.scenario, stack.scene, stack.github
    for event in sc.events:
        scene.act(event)
    gh.wait_for_deliveries()
    assert [d.event for d in gh.deliveries] == ["pull_request", "issue_comment"]
    assert all(d.status_code == 202 for d in gh.deliveries)  # the receiver queued them

    # Play the App with the real client, as the /spark fix flow will.
    integration = GithubIntegration(
        auth=Auth.AppAuth(gh.app_id, gh.private_key_pem),
        base_url=gh.url,
        seconds_between_requests=0,
        seconds_between_writes=0,
    )
    owner, name = scene.repo.split("/")
    installation = integration.get_repo_installation(owner, name)
    repo = integration.get_github_for_installation(installation.id).get_repo(scene.repo)
    pr = repo.get_pull(scene.pr_number)
    comment = pr.get_issue_comment(gh.issue_comments(scene.repo, scene.pr_number)[0]["id"])
    comment.create_reaction("eyes")
    fixed = sc.head_files["src/calc.py"].replace("(len(values) - 1)", "len(values)")
    head = repo.get_git_commit(pr.head.sha)
    tree = repo.create_git_tree(
        [InputGitTreeElement("src/calc.py", "100644", "blob", content=fixed)], repo.get_git_tree(pr.head.sha)
    )
    commit = repo.create_git_commit("Fix the divisor in average", tree, [head])
    repo.get_git_ref(f"heads/{pr.head.ref}").edit(commit.sha)
    pr.create_issue_comment("Fixed `average` in src/calc.py.")
    comment.create_reaction("rocket")

    outcome = local_stack.collect_outcome(stack)
    checks = scenario.check(sc.expect, outcome)
    assert [c.name for c in checks if not c.ok] == []
    [new] = outcome["new_commits"]
    assert new["sha"] == commit.sha and new["message"] == "Fix the divisor in average"
    assert "-    return sum(values) / (len(values) - 1)\n+    return sum(values) / len(values)" in new["diff"]

    result = DemoResult(sc.name, sc.description, [], outcome, checks, [], [], 0.0)
    assert result.ok
    text = demo.render(result)
    assert f"comment by @{gh.bot_login}:" in text and "reaction rocket" in text
    assert "+    return sum(values) / len(values)" in text and "[FAIL]" not in text
