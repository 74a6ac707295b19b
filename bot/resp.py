"""A Lua script called with a command packed by hand in Redis' wire format, on each thread's own connection.

The intake sends one command per delivery, the same but for a few values every time. redis-py's general path
spends more CPU per command than the socket calls themselves (pool bookkeeping, event and observability hooks,
its encoder); packing the command here and using only the connection's public send and read methods halves a
script call's CPU (``python -m bench intake_costs`` prints both).
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from typing import Any, Protocol, cast

import redis
from redis.exceptions import ConnectionError, NoScriptError


def bulk(value: bytes) -> bytes:
    """Return ``value`` as a RESP bulk string."""
    return b"$%d\r\n%b\r\n" % (len(value), value)


def encode(value: object) -> bytes:
    """Encode one command argument as redis-py does (bytes as is, str as UTF-8, numbers as text)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value).encode()
    raise TypeError(f"cannot send {type(value).__name__} to Redis")


class Connection(Protocol):
    """The part of a redis-py connection used here (its own methods are untyped)."""

    def send_packed_command(self, command: list[bytes], check_health: bool = True) -> None: ...

    def read_response(self) -> Any: ...

    def disconnect(self) -> None: ...


class Script:
    """A one-key Lua script run with EVALSHA (loaded again if Redis lost it) on each thread's connection."""

    def __init__(self, client: redis.Redis, source: str) -> None:
        self.client = client
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest().encode()
        # EVALSHA <sha> 1: the same first three arguments on every call.
        self._evalsha = b"$7\r\nEVALSHA\r\n%b$1\r\n1\r\n" % bulk(self.sha)
        self._local = threading.local()

    def __call__(self, key: bytes, args: bytes, nargs: int) -> Any:
        """Run the script on ``key`` with ``nargs`` arguments already packed as bulk strings in ``args``."""
        frame = b"*%d\r\n%b%b%b" % (4 + nargs, self._evalsha, bulk(key), args)
        connection = self._connection()
        reconnected = reloaded = False
        while True:
            try:
                connection.send_packed_command([frame], check_health=False)
                return connection.read_response()
            except ConnectionError:
                # A kept connection goes stale when Redis restarts: one more try, on a new socket. Running the
                # script twice is safe: it writes only under a SET NX, and a second run finds the key. A
                # timeout is not retried: Redis is slow or stuck, and GitHub gives up after 10 s.
                if reconnected:
                    raise
                reconnected = True
                connection.disconnect()
            except NoScriptError:
                # Redis keeps scripts only until it restarts.
                if reloaded:
                    raise
                reloaded = True
                self.client.script_load(self.source)

    def _connection(self) -> Connection:
        """Return this thread's own connection (a new one in a forked child: sockets must not be shared)."""
        held = getattr(self._local, "held", None)
        if held is None or held.pid != os.getpid():
            held = _Held(self.client.connection_pool)
            self._local.held = held
        return held.connection


class _Held:
    """A thread's connection, taken from the pool and given back when the thread ends.

    A server that starts a thread per request (werkzeug's, in the demo and the tests) would otherwise use up
    the pool's connection limit after that many requests.
    """

    def __init__(self, pool: redis.ConnectionPool) -> None:
        self.pid = os.getpid()
        connection = pool.get_connection()
        self.connection = cast(Connection, connection)
        weakref.finalize(self, pool.release, connection)
