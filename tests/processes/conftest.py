"""Spark as separate processes, started the way the docs say, with no caller settings leaking in."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SECRET = "embedded-secret"

Start = Callable[..., subprocess.Popen[bytes]]


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture()
def env(private_key: str, tmp_path: Path) -> dict[str, str]:
    """A Spark environment with no REDIS_URL: every process must find the embedded server by itself."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "CEREBRAS_", "REDIS_", "SPARK_", "PROMETHEUS_"))
    }
    return base | {
        "GITHUB_APP_ID": "1",
        "GITHUB_PRIVATE_KEY": private_key,
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "CEREBRAS_API_KEY": "test-key",
        "CEREBRAS_BASE_URL": "http://127.0.0.1:9",
        "SPARK_DATA_DIR": str(tmp_path / "data"),
        "LOG_LEVEL": "WARNING",
    }


@pytest.fixture()
def start(env: dict[str, str], tmp_path: Path) -> Iterator[Start]:
    """Start ``spark ARGS...`` as a process (``env`` or ``base``, plus overrides); kill leftovers."""
    procs: list[subprocess.Popen[bytes]] = []

    def run(*args: str, base: dict[str, str] | None = None, **overrides: str) -> subprocess.Popen[bytes]:
        log = open(tmp_path / f"{args[0]}-{len(procs)}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.main", "--env-file", os.devnull, *args],
            cwd=ROOT,
            env=(env if base is None else base) | overrides,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(proc)
        return proc

    yield run
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
