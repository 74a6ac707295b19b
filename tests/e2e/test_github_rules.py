"""GitHub's rules met end to end: a rate limit that defers the job to a later run (issue 16).

The test runs the real worker against the local GitHub set as strict as GitHub, and checks what a user sees;
the rules the flows meet alone (refused pushes, lost answers, body limits) run in process in
tests/flows/test_github_rules.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis

from bot import keys
from bot.settings import Settings
from sandbox.stack import Stack, start_stack
from tests.e2e.conftest import StartStack, scenario_from
from tests.stories import FIX, FIX_SCRIPT, bot_comments, run_all
from tests.stories import fix_story as story

# --- rate limits defer the job to a later run -------------------------------------------------------------

COMMENTS = r"^/repos/acme/calculator/issues/1/comments$"


@pytest.fixture()
def start_quick(tmp_path: Path, e2e_redis_url: str) -> Iterator[StartStack]:
    """Like ``start``, with GitHub's "wait at least a minute" shortened to a second for the test."""
    stacks: list[Stack] = []

    def _start(source: str) -> Stack:
        conn = redis.Redis.from_url(e2e_redis_url)
        conn.flushdb()
        conn.close()
        env = {
            "REDIS_URL": e2e_redis_url,
            "SPARK_GITHUB_SECONDARY_WAIT_SECONDS": "1.0",
            "SPARK_GITHUB_MAX_INLINE_WAIT_SECONDS": "0.2",
            "SPARK_RUN_LOG": "100",  # the test counts the job's runs
        }
        base = Settings.load(env, env_file=None)
        data_dir = tmp_path / f"stack-{len(stacks)}"
        data_dir.mkdir()
        stack = start_stack(scenario_from(source), base, data_dir)
        stacks.append(stack)
        return stack

    yield _start
    for stack in reversed(stacks):
        stack.close()


def test_a_429_without_retry_after_defers_the_fix_which_then_replies_once(start_quick: StartStack) -> None:
    stack = start_quick(story(FIX, [FIX_SCRIPT]))
    stack.github.faults.inject(429, "POST", COMMENTS, body={"message": "Too many requests"})
    outcome = run_all(stack)
    [commit] = outcome["new_commits"]
    [reply] = bot_comments(outcome)
    assert "Pushed a fix" in reply or f"/commit/{commit['sha']}" in reply
    # The job was deferred once (not failed, not slept through) and ran again after the wait.
    ran = [orjson.loads(line) for line in stack.redis.lrange(keys.JOBS_RAN.pattern, 0, -1)]
    assert [r["job"] for r in ran].count("command") == 2
    refused = next(r for r in stack.github.request_log if r.status == 429)
    posted = next(
        r
        for r in stack.github.request_log
        if r.method == "POST" and r.status == 201 and re.search(COMMENTS, r.path)
    )
    assert posted.started - refused.started >= 1.0
    assert stack.model is not None and len(stack.model.requests) == 1  # the re-run did not ask again
