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
from collections.abc import Callable
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
# The pause before starting a server that died: doubling with each death within a minute of its start.
FIRST_RESTART_PAUSE_SECONDS = 0.5
MAX_RESTART_PAUSE_SECONDS = 10.0
STEADY_SECONDS = 60.0


def start_server(paths: EmbeddedPaths) -> subprocess.Popen[bytes]:
    """Start ``redis-server`` on the data directory's socket, with its data in the directory."""
    directory = paths.dir
    return subprocess.Popen(
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


def supervise(directory: Path) -> int:
    """Run the embedded server for ``directory`` until no registered Spark process is alive; return 0.

    A server that dies meanwhile (killed, out of memory) is started again, after a pause that doubles while it
    keeps dying: the Spark processes' clients reconnect to the same socket on their next command.
    """
    paths = EmbeddedPaths(directory)
    (directory / SUPERVISOR_PID_FILE).write_text(f"{os.getpid()}\n")
    server = start_server(paths)
    started = time.monotonic()
    quick_deaths = 0
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        while not stop:
            time.sleep(POLL_SECONDS)
            with paths.locked(create=False):
                if not paths.live_users():
                    _shutdown(paths, server)
                    return 0
                if server.poll() is None:
                    continue
                # Died with users left: say so in redis.log (this process's output), and start it again.
                lived = time.monotonic() - started
                quick_deaths = 1 if lived > STEADY_SECONDS else quick_deaths + 1
                pause = min(FIRST_RESTART_PAUSE_SECONDS * 2 ** (quick_deaths - 1), MAX_RESTART_PAUSE_SECONDS)
                print(
                    f"spark: redis-server exited ({server.returncode}) after {lived:.0f} s; "
                    f"starting it again in {pause:g} s",
                    file=sys.stderr,
                    flush=True,
                )
            if _sleep_unless(lambda: stop, pause):
                break
            with paths.locked(create=False):
                server = start_server(paths)
                started = time.monotonic()
        if server.poll() is None:
            with paths.locked(create=False):
                _shutdown(paths, server)
    except FileNotFoundError:
        # The data directory was removed: nowhere left to save to, and nobody can reach the socket (a
        # SHUTDOWN would fail to save). Making the directory again would leave it behind.
        server.kill()
        server.wait()
    return 0


def _sleep_unless(stopped: Callable[[], bool], seconds: float) -> bool:
    """Sleep ``seconds`` in short steps; return True as soon as ``stopped()`` is."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if stopped():
            return True
        time.sleep(min(0.05, deadline - time.monotonic()))
    return stopped()


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
