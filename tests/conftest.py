"""Session-wide fixtures: a private real Redis, ../shared (skipped when absent), and real worker processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

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


Spawn = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture(scope="session")
def private_key() -> str:
    """One RSA key for the session (generating keys is slow)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@pytest.fixture()
def worker_env(redis_server: PrivateRedis, private_key: str, tmp_path: Path) -> dict[str, str]:
    """The environment of a worker process: the private Redis, a throwaway App key, no caller settings."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CEREBRAS_", "REDIS_", "SPARK_"))
    }
    env.update(
        REDIS_URL=redis_server.url,
        GITHUB_APP_ID="1",
        GITHUB_PRIVATE_KEY=private_key,
        CEREBRAS_API_KEY="test-key",
        CEREBRAS_BASE_URL="http://127.0.0.1:9",  # nothing listens: the warm-up fails fast, offline
        SPARK_DATA_DIR=str(tmp_path),
        LOG_LEVEL="WARNING",
    )
    return env


@pytest.fixture()
def spawn_worker(worker_env: dict[str, str], tmp_path: Path) -> Iterator[Spawn]:
    """Start ``spark worker`` processes (extra env as keyword arguments); kill leftovers at the end."""
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(*args: str, **env: str) -> subprocess.Popen[bytes]:
        log = open(tmp_path / f"worker-{len(procs)}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.main", "--env-file", os.devnull, "worker", *args],
            cwd=ROOT,
            env={**worker_env, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        procs.append(proc)
        return proc

    yield spawn
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
