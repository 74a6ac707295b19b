"""Fixtures for the reliability suite: real ``spark worker`` processes against the session's private Redis.

Sizes come from environment knobs so CI runs a short version and ``bench/report.py`` the full one:
``SPARK_RELIABILITY_DELIVERIES`` (load test deliveries), ``SPARK_FUZZ_EXAMPLES`` (hypothesis examples).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.redis_server import PrivateRedis
from tests.e2e.conftest import e2e_redis_url, start  # noqa: F401 - shared end-to-end fixtures

ROOT = Path(__file__).resolve().parents[2]
Spawn = Callable[..., subprocess.Popen[bytes]]


def knob(name: str, default: int) -> int:
    """Return the integer environment knob ``name`` (the report script raises the sizes), else ``default``."""
    return int(os.environ.get(name) or default)


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
            [sys.executable, "-m", "bot.cli", "--env-file", os.devnull, "worker", *args],
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
