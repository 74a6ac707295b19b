"""Session-wide fixtures: a private real Redis (a database per tier), the app and a signed ``post``, ../shared
(skipped when absent), and real worker processes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
import structlog
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.test import TestResponse

from bot.intake.signature import sign
from bot.redis_server import PrivateRedis
from bot.settings import Settings
from bot.web.app import create_app
from bot.web.webhooks import WEBHOOK_PATH

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


SECRET = "test-webhook-secret"

Post = Callable[..., TestResponse]


class RedisDb(IntEnum):
    """Which database of the private Redis each tier uses.

    A tier whose stack outlives one test (a module's receiver and workers) empties its own database when it
    starts, so nothing it leaves behind meets another tier's assertions.
    """

    TESTS = 0  # redis_conn: emptied before every test
    E2E_REVIEW = 5  # tests/e2e/test_review.py: one stack for the module
    E2E = 6  # tests/e2e, tests/reliability, tests/security: the `start` fixture's stacks
    E2E_CONTENT = 7  # tests/e2e/test_github_content.py: one stack for the module
    DEMO_STACK = 8  # tests/sandbox/test_demo_outcome.py
    CLI_LOGS = 9  # tests/cli/test_logs.py: a whole scenario with INFO logs
    DEMO = 10  # tests/sandbox/test_demo.py: spark demo's fix run
    RQ_INFO = 11  # tests/cli/test_docs.py: `rq info` lists only Spark's queues
    FLOWS = 12  # tests/flows: the flows in process, emptied before every test


def redis_url(server: PrivateRedis, db: RedisDb) -> str:
    """Return the URL of database ``db`` of the private server."""
    return f"{server.url.rsplit('/', 1)[0]}/{int(db)}"


@pytest.fixture(autouse=True)
def _structlog_as_it_was() -> Iterator[None]:
    """Give structlog back the configuration each test found: a test that configures logging (a level of
    WARNING, say) would otherwise filter the events a later test in the same process captures."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[PrivateRedis]:
    """Start a private redis-server on a free port for the whole session (never a shared one)."""
    with PrivateRedis() as server:
        yield server


@pytest.fixture()
def redis_conn(redis_server: PrivateRedis) -> Iterator[redis.Redis]:
    """Return a client of the private server, emptied before the test."""
    client = redis.Redis.from_url(redis_url(redis_server, RedisDb.TESTS))
    client.flushdb()
    yield client
    client.close()


def make_settings(**extra: str) -> Settings:
    """Return settings with the test webhook secret (and ``extra``), reading no .env file."""
    return Settings.load(env={"GITHUB_WEBHOOK_SECRET": SECRET, **extra}, env_file=None)


@pytest.fixture()
def app(redis_conn: redis.Redis) -> Flask:
    """Return the receiver wired to the private Redis (emptied for each test)."""
    return create_app(make_settings(), redis_conn)


@pytest.fixture()
def client(app: Flask) -> FlaskClient:
    """Return a test client of the app."""
    return app.test_client()


def signed_post(client: FlaskClient) -> Post:
    """Return a function posting a signed delivery; every header can be overridden or dropped (``None``)."""

    def post(
        event: str,
        payload: Any = None,
        *,
        body: bytes | None = None,
        delivery: str | None = None,
        secret: str = SECRET,
        content_type: str = "application/json",
        headers: dict[str, str | None] | None = None,
    ) -> TestResponse:
        raw = body if body is not None else orjson.dumps(payload)
        sent: dict[str, str | None] = {
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-Hub-Signature-256": sign(secret.encode(), raw),
            "Content-Type": content_type,
            "User-Agent": "GitHub-Hookshot/test",
        }
        sent.update(headers or {})
        return client.post(WEBHOOK_PATH, data=raw, headers={k: v for k, v in sent.items() if v is not None})

    return post


@pytest.fixture()
def post(client: FlaskClient) -> Post:
    """Sign and post a delivery to the app."""
    return signed_post(client)


@contextmanager
def serving(app: Flask, port: int = 0) -> Iterator[str]:
    """Serve ``app`` on werkzeug's thread-per-request server (as ``spark demo`` does); yield its base URL."""
    server: BaseWSGIServer = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)


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
