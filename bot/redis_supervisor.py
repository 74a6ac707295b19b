"""The embedded Redis' supervisor: the process that runs the shared server while some Spark process needs it.

``python -m bot.redis_supervisor DATA_DIR``, started by the first process to join (``bot.redis_server.join``).
Twice a second it drops the registered pids that have died (``kill -9`` included) and, once none is left,
shuts the server down (saving its data) and exits. If the data directory disappears, it kills the server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis

from bot.processes import wait_or_kill
from bot.redis_server import (
    PID_FILE,
    SOCKET,
    SUPERVISOR_PID_FILE,
    USERS_FILE,
    EmbeddedPaths,
    redis_server_binary,
)

POLL_SECONDS = 0.5


def supervise(directory: Path) -> int:
    """Run the embedded server for ``directory`` until no registered Spark process is alive; return 0."""
    paths = EmbeddedPaths(directory)
    (directory / SUPERVISOR_PID_FILE).write_text(f"{os.getpid()}\n")
    server = subprocess.Popen(
        [
            redis_server_binary(),
            "--port",
            "0",
            "--unixsocket",
            str(paths.socket),
            "--unixsocketperm",
            "700",
            "--dir",
            str(directory),
            "--dbfilename",
            "spark.rdb",
            # Persistence on: the demo's and the App's data survive a restart.
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--pidfile",
            str(directory / PID_FILE),
            "--daemonize",
            "no",
        ],
        stdin=subprocess.DEVNULL,
        preexec_fn=_die_with_parent,
    )
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        while not stop and server.poll() is None:
            time.sleep(POLL_SECONDS)
            with paths.locked(create=False):
                if paths.live_users():
                    continue
                _shutdown(paths, server)
                return 0
        if server.poll() is None:
            with paths.locked(create=False):
                _shutdown(paths, server)
    except FileNotFoundError:
        # The data directory was removed: nowhere left to save to, and nobody can reach the socket (a
        # SHUTDOWN would fail to save). Making the directory again would leave it behind.
        server.kill()
        server.wait()
    return 0


def _die_with_parent() -> None:
    """In the server's process before exec: be killed if the supervisor dies (``kill -9`` included)."""
    # SIGKILL, not SIGTERM: a server that cannot save (its directory gone) ignores SIGTERM. The append-only
    # file is synced every second, so at most the last second of writes is lost, and only on this path.
    if sys.platform == "linux":
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _shutdown(paths: EmbeddedPaths, server: subprocess.Popen[bytes]) -> None:
    """Stop the server, saving its data, and remove its socket and pid files (under the lock)."""
    client = paths.client()
    try:
        client.shutdown(save=True)
    except (redis.RedisError, OSError):
        # It could not save (its directory removed meanwhile?): a server that cannot save ignores SIGTERM.
        if paths.dir.is_dir():
            server.terminate()
        else:
            server.kill()
    finally:
        client.close()
    wait_or_kill(server, timeout=20)
    for name in (SOCKET, PID_FILE, SUPERVISOR_PID_FILE, USERS_FILE):
        (paths.dir / name).unlink(missing_ok=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m bot.redis_supervisor DATA_DIR")
    sys.exit(supervise(Path(sys.argv[1])))
