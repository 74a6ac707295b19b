"""The intake against a real Redis through real servers: a thread per request, a frozen Redis, readiness."""

from __future__ import annotations

import os
import signal
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest
import redis
from rq import Queue
from rq.job import Job

from bot.intake.enqueue import DELIVERY_KEY, REDIS_TIMEOUT_SECONDS
from bot.intake.signature import sign
from bot.redis_server import PrivateRedis
from bot.web.app import create_app
from bot.web.webhooks import WEBHOOK_PATH
from tests.conftest import FIXTURES, SECRET, make_settings, serving

OPENED = orjson.loads((FIXTURES / "webhooks" / "pull_request" / "opened.json").read_bytes())
GITHUB_TIMEOUT_SECONDS = 10


@pytest.fixture()
def threaded_server(redis_server: PrivateRedis, redis_conn: redis.Redis) -> Iterator[str]:
    """Serve the app (its Redis client built as ``spark serve`` builds it) on a thread-per-request server."""
    yield from _serve(redis_server.url)


def _serve(redis_url: str) -> Iterator[str]:
    with serving(create_app(make_settings(REDIS_URL=redis_url))) as base:
        yield base


def _post(base: str, delivery: str, payload: Any = OPENED, timeout: float = 30) -> int:
    body = orjson.dumps(payload)
    request = urllib.request.Request(
        base + WEBHOOK_PATH,
        data=body,
        headers={
            "X-GitHub-Event": "pull_request",
            "X-GitHub-Delivery": delivery,
            "X-Hub-Signature-256": sign(SECRET.encode(), body),
            "Content-Type": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _get(base: str, path: str) -> int:
    try:
        with urllib.request.urlopen(base + path, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_every_delivery_through_a_thread_per_request_server_is_stored(
    threaded_server: str, redis_conn: redis.Redis
) -> None:
    """Each request runs on a new thread: connections must go back to the pool (once, ~200 got a 503)."""
    deliveries = [f"threaded-{i}-{uuid.uuid4().hex[:8]}" for i in range(400)]
    connects = int(redis_conn.info("stats")["total_connections_received"])
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda d: _post(threaded_server, d), deliveries))
    assert statuses.count(202) == len(deliveries), sorted(set(statuses))
    # Connections are reused from the pool: about one per concurrent request, not one per thread.
    assert int(redis_conn.info("stats")["total_connections_received"]) - connects <= 16
    assert all(redis_conn.get(DELIVERY_KEY.format(d)) == d.encode() for d in deliveries)
    # Every 202 is a stored job: each delivery's job is on the queue, under the delivery's id.
    queued = Queue("spark-review", connection=redis_conn).get_job_ids()
    assert sorted(queued) == sorted(deliveries)
    assert all(job is not None for job in Job.fetch_many(deliveries, connection=redis_conn))
    assert _get(threaded_server, "/readyz") == 200


def test_a_frozen_redis_gets_a_503_well_inside_githubs_limit() -> None:
    """SIGSTOP a private redis-server: the intake and /readyz answer 503 in about the socket timeout."""
    with PrivateRedis() as frozen:
        client = redis.Redis.from_url(frozen.url)
        pid = int(client.info("server")["process_id"])
        served = _serve(frozen.url)
        base = next(served)
        try:
            assert _post(base, "before-freeze") == 202
            os.kill(pid, signal.SIGSTOP)
            try:
                started = time.monotonic()
                status = _post(base, "while-frozen")
                elapsed = time.monotonic() - started
                assert _get(base, "/readyz") == 503
            finally:
                os.kill(pid, signal.SIGCONT)
            assert status == 503
            # One call timed out and was not retried: about the timeout, far from GitHub's 10 s.
            assert elapsed < 2 * REDIS_TIMEOUT_SECONDS < GITHUB_TIMEOUT_SECONDS
            # Nothing was stored, so GitHub's redelivery (same id) is queued once Redis is back.
            assert client.get(DELIVERY_KEY.format("while-frozen")) is None
            assert _post(base, "while-frozen") == 202
            assert _get(base, "/readyz") == 200
            assert client.llen("rq:queue:spark-review") == 2
        finally:
            next(served, None)
            client.close()


def test_readyz_stores_through_the_intakes_path(threaded_server: str, redis_conn: redis.Redis) -> None:
    """Readiness writes an empty delivery in the intake's transaction, kept only a minute."""
    assert _get(threaded_server, "/readyz") == 200
    probes = redis_conn.keys(DELIVERY_KEY.format("ready-*"))
    assert len(probes) == 1 and 0 < redis_conn.ttl(probes[0]) <= 60
    redis_conn.config_set("min-replicas-to-write", "1")  # Redis now refuses writes: not ready
    try:
        assert _get(threaded_server, "/readyz") == 503
        assert redis_conn.ping()  # ... though it still answers PING
    finally:
        redis_conn.config_set("min-replicas-to-write", "0")
