"""End-to-end fixtures: a whole Spark stack per scenario (both sandboxes, the receiver, a worker process).

The stack runs on a Redis database of its own on the session's private server, emptied before each stack,
so its worker never meets another test's jobs; after each test, every ``spark:*`` key it left must expire or
be a bounded key of ``bot/keys.py``. Tests build scenarios from bundled files or YAML text, start
a stack, fire events, and read what the local GitHub and the local model saw.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from bot import keys
from bot.redis_server import PrivateRedis
from bot.settings import Settings
from sandbox import scenario as scenarios
from sandbox.scenario import Scenario
from sandbox.stack import Stack, start_stack
from tests.conftest import RedisDb, redis_url

StartStack = Callable[..., Stack]


@pytest.fixture(scope="session")
def e2e_redis_url(redis_server: PrivateRedis) -> str:
    """Return the URL of the end-to-end database on the private Redis server."""
    return redis_url(redis_server, RedisDb.E2E)


def scenario_from(source: Scenario | str | Path) -> Scenario:
    """Return a scenario from an object, a bundled name or path, or YAML text (anything with a newline)."""
    if isinstance(source, Scenario):
        return source
    if isinstance(source, str) and "\n" in source:
        return scenarios.parse(textwrap.dedent(source), source="<test scenario>")
    return scenarios.load(source)


@pytest.fixture()
def start(tmp_path: Path, e2e_redis_url: str) -> Iterator[StartStack]:
    """Return ``start(scenario, worker=True) -> Stack``; every stack started is closed after the test."""
    stacks: list[Stack] = []

    def _start(source: Scenario | str | Path, *, worker: bool = True) -> Stack:
        conn = redis.Redis.from_url(e2e_redis_url)
        conn.flushdb()
        conn.close()
        base = Settings.load({"REDIS_URL": e2e_redis_url}, env_file=None)
        data_dir = tmp_path / f"stack-{len(stacks)}"
        data_dir.mkdir()
        stack = start_stack(scenario_from(source), base, data_dir, worker=worker)
        stacks.append(stack)
        return stack

    yield _start
    for stack in reversed(stacks):
        stack.close()
    for stack in stacks:
        assert_no_planted_secret(stack)
    if stacks:
        # Every flow the test ran left only keys that expire or are bounded (bot/keys.py).
        conn = redis.Redis.from_url(e2e_redis_url)
        try:
            assert keys.unbounded(conn) == [], "spark:* keys with no TTL and no bound in bot/keys.py"
        finally:
            conn.close()


# Secrets planted in repositories, pull requests and comments by the tests (tests/e2e/test_security.py).
# Every stack of the suite checks, as it ends, that none of them reached the model in any prompt.
PLANTED_SECRETS: tuple[str, ...] = (
    "n8Q2vX7kLp4Rt",  # a value in a .env file (removed by the PR): only the whole-file rule knows it
    "Hunter2Hunter2",  # a YAML password (removed by the PR): only the config-file rule knows it
    "Vb9mQ4xZr2Lk",  # a value in the current .env file, on the line a review thread is about
    "ghp_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa",  # a token in the pull request's title
    "AKIA" + "QWERTYUIOPASDFGH",  # an AWS key in the pull request's description and in a changed file
    "xoxb-" + "123456789012-abcdefABCDEF",  # a Slack token in a comment quoted to the model
)


def assert_no_planted_secret(stack: Stack) -> None:
    """Assert that no prompt the stack's local model received holds a planted secret."""
    if stack.model is None:
        return
    for request in stack.model.requests:
        for message in request.messages:
            content = str(message.get("content"))
            leaked = [secret for secret in PLANTED_SECRETS if secret in content]
            assert not leaked, f"planted secret(s) {leaked} reached the model in request {request.index}"
