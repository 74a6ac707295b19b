"""The hand-packed script call, against a real Redis: replies, lost scripts, dropped sockets, forks."""

from __future__ import annotations

import gc
import multiprocessing
import threading

import pytest
import redis

from bot.redis_server import PrivateRedis, free_port
from bot.resp import Script, bulk, encode

INCREMENT = "return redis.call('INCRBY', KEYS[1], ARGV[1])"


def call(script: Script, key: str, *args: object) -> object:
    """Call ``script`` as the intake does, with its arguments packed here."""
    return script(key.encode(), b"".join(bulk(encode(arg)) for arg in args), len(args))


def test_bulk_strings_and_argument_encoding_follow_redis_py() -> None:
    assert bulk(b"") == b"$0\r\n\r\n"
    assert bulk(b"a\r\nb") == b"$4\r\na\r\nb\r\n"
    assert [encode(v) for v in (b"x", "é", 7, 1.5)] == [b"x", "é".encode(), b"7", b"1.5"]
    for value in (True, None, [1]):
        with pytest.raises(TypeError):
            encode(value)


def test_runs_the_script_with_the_packed_arguments(redis_conn: redis.Redis) -> None:
    script = Script(redis_conn, INCREMENT)
    assert call(script, "counter", 5) == 5
    assert call(script, "counter", 2) == 7
    # Arguments holding the protocol's own separators arrive intact.
    echo = Script(redis_conn, "return ARGV[2]")
    assert call(echo, "k", "first", "two\r\nlines $3\r\n") == b"two\r\nlines $3\r\n"


def test_loads_the_script_again_when_redis_has_forgotten_it(redis_conn: redis.Redis) -> None:
    script = Script(redis_conn, INCREMENT)
    call(script, "counter", 1)
    redis_conn.script_flush()
    assert call(script, "counter", 1) == 2


def test_reconnects_once_when_its_connection_was_dropped(redis_conn: redis.Redis) -> None:
    script = Script(redis_conn, INCREMENT)
    call(script, "counter", 1)
    # Drops every client's socket, as a Redis restart or an idle timeout would.
    redis_conn.client_kill_filter(_type="normal")
    assert call(script, "counter", 1) == 2
    assert int(redis_conn.get("counter") or 0) == 2


def test_recovers_from_a_restart_that_dropped_both_socket_and_script(redis_conn: redis.Redis) -> None:
    script = Script(redis_conn, INCREMENT)
    call(script, "counter", 1)
    redis_conn.client_kill_filter(_type="normal")
    redis_conn.script_flush()
    assert call(script, "counter", 1) == 2


def test_a_script_error_is_raised_not_retried(redis_conn: redis.Redis) -> None:
    script = Script(redis_conn, "redis.call('INCR', KEYS[1]); return redis.error_reply('refused')")
    with pytest.raises(redis.ResponseError, match="refused"):
        call(script, "counter")
    assert redis_conn.get("counter") == b"1"


def test_raises_a_connection_error_when_redis_is_unreachable() -> None:
    script = Script(redis.Redis(port=free_port(), socket_connect_timeout=1), INCREMENT)
    with pytest.raises(redis.ConnectionError):
        call(script, "counter", 1)


def _child_call(script: Script, result: multiprocessing.Queue[object]) -> None:
    inherited = script._local.held.connection
    result.put(call(script, "counter", 1))
    result.put(script._local.held.connection is not inherited)


def test_a_forked_child_opens_its_own_connection(redis_server: PrivateRedis) -> None:
    client = redis.Redis.from_url(redis_server.url)
    client.delete("counter")
    script = Script(client, INCREMENT)
    call(script, "counter", 1)
    context = multiprocessing.get_context("fork")
    result: multiprocessing.Queue[object] = context.Queue()
    child = context.Process(target=_child_call, args=(script, result))
    child.start()
    child.join(10)
    assert child.exitcode == 0
    assert result.get(timeout=5) == 2
    assert result.get(timeout=5) is True
    # The parent's socket was not touched by the child: its next call still reads its own reply.
    assert call(script, "counter", 1) == 3


def test_threads_that_end_give_their_connection_back(redis_server: PrivateRedis) -> None:
    # A thread-per-request server (werkzeug's) calls from a new thread every time: far more threads over
    # time than the pool may hold connections.
    client = redis.Redis.from_url(redis_server.url, max_connections=3)
    client.delete("counter")
    script = Script(client, INCREMENT)
    for _ in range(20):
        thread = threading.Thread(target=call, args=(script, "counter", 1))
        thread.start()
        thread.join(10)
        gc.collect()
    assert int(client.get("counter") or 0) == 20
