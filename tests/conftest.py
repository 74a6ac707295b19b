"""Session-wide fixtures: a private real Redis, and the shared data directory (skipped when absent)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bot.redis_server import PrivateRedis

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def redis_server() -> Iterator[PrivateRedis]:
    """Start a private redis-server on a free port for the whole session (never a shared one)."""
    with PrivateRedis() as server:
        yield server


@pytest.fixture()
def redis_conn(redis_server: PrivateRedis) -> Iterator[redis.Redis]:
    """Return a client of the private server, emptied before the test."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """Return ../shared, or skip the test when this clone has none beside it."""
    if not SHARED.is_dir():
        pytest.skip("../shared is absent (a fresh clone has none)")
    return SHARED
