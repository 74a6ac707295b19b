"""``spark queues``: the queues' depth and the workers on the Redis every role uses, embedded or REDIS_URL."""

from __future__ import annotations

import json
from pathlib import Path

import redis
from rq import Queue

from bot.redis_server import PrivateRedis, join, leave
from tests.cli.conftest import Spark
from tests.conftest import RedisDb, redis_url


def test_counts_on_the_redis_of_redis_url(spark: Spark, redis_server: PrivateRedis) -> None:
    url = redis_url(redis_server, RedisDb.RQ_INFO)
    conn = redis.Redis.from_url(url)
    conn.flushdb()
    Queue("spark-review", connection=conn).enqueue("workers.jobs.review", pr={}, trigger="opened")
    code, out, _ = spark({"REDIS_URL": url}, "queues", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["queues"]["spark-review"]["queued"] == 1
    assert data["queues"]["spark-interactive"] == dict.fromkeys(data["queues"]["spark-review"], 0)
    assert data["redis"] == f"REDIS_URL {url}" and data["workers"] == []
    conn.flushdb()


def test_counts_on_the_embedded_redis_that_a_plain_rq_info_would_miss(spark: Spark, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    conn = join(data_dir, "test")  # what `spark serve` with no REDIS_URL queued into
    try:
        queue = Queue("spark-interactive", connection=conn)
        for _ in range(2):
            queue.enqueue("workers.jobs.command", pr={}, command={})
        code, out, _ = spark({"SPARK_DATA_DIR": str(data_dir)}, "queues")
    finally:
        conn.close()
        leave(data_dir)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"Redis: embedded server unix://{data_dir.resolve() / 'redis.sock'}"
    assert lines[2].split() == ["queue", "queued", "started", "deferred", "scheduled", "failed"]
    assert lines[3].split() == ["spark-interactive", "2", "0", "0", "0", "0"]
    assert lines[-1] == "0 workers"


def test_an_unreachable_redis_is_one_line(spark: Spark) -> None:
    code, out, err = spark({"REDIS_URL": "redis://:pw-planted@127.0.0.1:9/0"}, "queues")
    assert code == 1 and out == ""
    assert err.startswith("spark queues: ConnectionError at REDIS_URL redis://:***@127.0.0.1:9/0")
    assert "pw-planted" not in err and len(err.strip().splitlines()) == 1
