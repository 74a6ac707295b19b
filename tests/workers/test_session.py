"""The session store: one document per pull request, a TTL refreshed by each write, bounded, race-free."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import redis

from bot import keys
from bot.core.session import MAX_ENTRIES, Entry
from bot.redis_server import PrivateRedis
from workers.memory import session

PR = "1:acme/calculator#1"


def entry(n: int) -> Entry:
    return Entry(id=f"fix-{n}", command="fix", author="alice", text=f"request {n}", order=n)


def test_a_recorded_entry_is_loaded_back_and_the_key_expires_in_a_week(redis_conn: redis.Redis) -> None:
    assert session.load(redis_conn, PR).entries == ()
    session.record(redis_conn, PR, entry(1))
    assert [e.text for e in session.load(redis_conn, PR).entries] == ["request 1"]
    ttl = int(redis_conn.ttl(keys.SESSION.format(PR)))
    assert 7 * 86400 - 5 < ttl <= 7 * 86400
    assert keys.unbounded(redis_conn) == []


def test_the_store_keeps_the_last_entries_and_one_per_id(redis_conn: redis.Redis) -> None:
    for n in range(MAX_ENTRIES + 3):
        session.record(redis_conn, PR, entry(n))
        session.record(redis_conn, PR, entry(n))  # a job run twice records once
    kept = session.load(redis_conn, PR).entries
    assert [e.id for e in kept] == [f"fix-{n}" for n in range(3, MAX_ENTRIES + 3)]


def test_jobs_recording_at_once_all_land(redis_conn: redis.Redis, redis_server: PrivateRedis) -> None:
    conns = [redis.Redis.from_url(redis_server.url) for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: session.record(conns[n], PR, entry(n)), range(8)))
    assert sorted(e.order for e in session.load(redis_conn, PR).entries) == list(range(8))
    for conn in conns:
        conn.close()
