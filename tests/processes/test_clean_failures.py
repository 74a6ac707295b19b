"""Failures an operator meets on the first day, each one line that names the fix, and recovery without help.

Real ``spark`` processes: a worker started before its Redis, ports another program holds, the embedded Redis
killed under a running receiver, Ctrl-C on a worker pool, and a reader that closes the pipe early.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.redis_server import PID_FILE, PrivateRedis, free_port
from tests.processes.conftest import ROOT, Start, ready, wait_for


@pytest.fixture()
def taken_port() -> Iterator[int]:
    """A port another program listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def output(proc: subprocess.Popen[bytes], tmp_path: Path, timeout: float = 60) -> str:
    """Wait for the test's one process and return what it printed (``start`` logs it to COMMAND-0.log)."""
    proc.wait(timeout=timeout)
    [log] = tmp_path.glob("*-0.log")
    return log.read_text()


def one_line_error(text: str) -> str:
    """Return the last line, after checking that nothing in the output is a traceback."""
    assert "Traceback" not in text and "panicked" not in text, text
    return text.strip().splitlines()[-1]


def test_a_worker_started_before_its_redis_waits_for_it_then_works(start: Start, tmp_path: Path) -> None:
    server = PrivateRedis()  # its port is chosen; the server starts later
    port = free_port()
    worker = start(
        "worker",
        "--burst",
        "--metrics-port",
        str(port),
        REDIS_URL=server.url,
        SPARK_REDIS_WAIT_SECONDS="60",
        LOG_LEVEL="INFO",
    )
    time.sleep(1.5)
    assert worker.poll() is None, "the worker gave up at once"
    with server:
        text = output(worker, tmp_path)
    assert worker.returncode == 0, text
    # Where its metrics are served, in one line.
    assert f'"url":"http://0.0.0.0:{port}/metrics"' in text and '"event":"metrics_listening"' in text


def test_a_worker_whose_redis_never_answers_exits_with_one_line_naming_the_setting(
    start: Start, tmp_path: Path
) -> None:
    url = f"redis://:hunter2-planted@127.0.0.1:{free_port()}/0"
    began = time.monotonic()
    worker = start("worker", SPARK_REDIS_WAIT_SECONDS="1.5", REDIS_URL=url, LOG_LEVEL="INFO")
    text = output(worker, tmp_path)
    assert worker.returncode == 1
    assert time.monotonic() - began >= 1.5
    last = one_line_error(text)
    assert last.startswith("spark worker: no answer from Redis at REDIS_URL redis://:***@127.0.0.1:"), last
    assert "fix REDIS_URL" in last and "hunter2-planted" not in text
    assert text.count('"event":"redis_unreachable"') >= 2, "each try is a warning line"


def test_serve_says_where_it_listens(start: Start, tmp_path: Path) -> None:
    port = free_port()
    serve = start("serve", "--workers", "1", "--bind", f"127.0.0.1:{port}")
    wait_for(lambda: ready(port), 60, "spark serve")
    os.killpg(serve.pid, signal.SIGKILL)
    text = output(serve, tmp_path)
    assert f"spark serve: listening on http://127.0.0.1:{port} with 1 web process" in text, text


@pytest.mark.parametrize("configured", [True, False])
def test_serve_on_a_taken_port_says_so_in_one_line(
    start: Start, env: dict[str, str], tmp_path: Path, taken_port: int, configured: bool
) -> None:
    base = env if configured else {k: v for k, v in env.items() if not k.startswith(("GITHUB_", "CEREBRAS_"))}
    serve = start("serve", "--workers", "1", "--bind", f"127.0.0.1:{taken_port}", base=base)
    text = output(serve, tmp_path)
    assert serve.returncode == 1
    assert one_line_error(text) == (
        f"spark serve: cannot listen on 127.0.0.1:{taken_port}: another program is listening there; "
        "choose another with --bind"
    )
    # Not a pointer to /setup on the other program's port.
    assert "/setup" not in text and "listening on" not in text


def test_worker_metrics_on_a_taken_port_says_so_in_one_line(
    start: Start, tmp_path: Path, taken_port: int
) -> None:
    worker = start("worker", "--burst", "--metrics-port", str(taken_port))
    text = output(worker, tmp_path)
    assert worker.returncode == 1
    assert one_line_error(text) == (
        f"spark worker: cannot listen on 0.0.0.0:{taken_port}: another program is listening there; "
        "choose another with --metrics-port"
    )


def test_the_embedded_redis_killed_under_serve_comes_back_and_serve_with_it(
    start: Start, env: dict[str, str]
) -> None:
    port = free_port()
    data = Path(env["SPARK_DATA_DIR"])
    serve = start("serve", "--workers", "1", "--bind", f"127.0.0.1:{port}")
    wait_for(lambda: ready(port), 60, "spark serve")
    pid = int((data / PID_FILE).read_text())
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not ready(port), 10, "the receiver to notice")
    wait_for(lambda: ready(port), 10, "the embedded Redis to be restarted and the receiver ready again")
    assert int((data / PID_FILE).read_text()) != pid
    assert "redis-server exited" in (data / "redis.log").read_text()
    os.killpg(serve.pid, signal.SIGKILL)


def test_ctrl_c_stops_a_worker_pool_cleanly(start: Start, tmp_path: Path) -> None:
    pool = start("worker", "--processes", "2", LOG_LEVEL="INFO")
    log = tmp_path / "worker-0.log"
    wait_for(lambda: "worker_started" in log.read_text(), 60, "a worker to start")
    os.killpg(pool.pid, signal.SIGINT)  # what the terminal sends the foreground process group
    assert pool.wait(timeout=60) == 0, log.read_text()


def test_a_reader_that_stops_early_gets_no_traceback(env: dict[str, str]) -> None:
    read, write = os.pipe()
    os.close(read)  # `spark doctor | head -0`: the reader is gone before the table is written
    closed = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "--env-file", os.devnull, "doctor"],
        cwd=ROOT,
        env=env | {"REDIS_URL": "http://not-redis"},
        stdout=write,
        stderr=subprocess.PIPE,
        timeout=60,
    )
    os.close(write)
    assert closed.stderr.decode() == ""
    assert closed.returncode == 1
