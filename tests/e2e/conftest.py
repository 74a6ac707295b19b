"""End-to-end fixtures: a whole Spark stack per scenario (both sandboxes, the receiver, a worker process).

The stack runs on a Redis database of its own on the session's private server, emptied before each stack,
so its worker never meets another test's jobs. Tests build scenarios from bundled files or YAML text, start
a stack, fire events, and read what the local GitHub and the local model saw.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from bot.redis_server import PrivateRedis
from bot.sandbox import scenario as scenarios
from bot.sandbox.demo import Stack, start_stack
from bot.sandbox.scenario import Scenario
from bot.settings import Settings

# Other suites use databases 0 (unit tests) and 7 (the demo test); end-to-end stacks use this one.
E2E_DB = 6

StartStack = Callable[..., Stack]


@pytest.fixture(scope="session")
def e2e_redis_url(redis_server: PrivateRedis) -> str:
    """Return the URL of the end-to-end database on the private Redis server."""
    return redis_server.url.rsplit("/", 1)[0] + f"/{E2E_DB}"


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
