"""Processes by pid: which ones still run, and stopping a child that ignores SIGTERM."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bot.processes import alive, start_time, stop

IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); time.sleep(60)"
)


def test_this_process_is_alive_and_known_by_its_start_time() -> None:
    started = start_time(os.getpid())
    assert started
    assert alive(os.getpid()) and alive(os.getpid(), started)
    # The same pid with another start time is another process: one that reused the number.
    assert not alive(os.getpid(), str(int(started) + 1))


def test_an_exited_child_is_not_alive_even_before_it_is_reaped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while alive(child.pid):  # a zombie until waited for: it has exited all the same
        assert time.monotonic() < deadline, "the exited child still counts as alive"
        time.sleep(0.01)
    child.wait()
    assert not alive(child.pid)


def test_stop_kills_a_child_that_ignores_sigterm_once_its_time_is_up() -> None:
    child = subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], stdout=subprocess.PIPE)
    assert child.stdout is not None
    child.stdout.readline()  # its handler is installed
    began = time.monotonic()
    stop(child, timeout=0.3)
    assert child.returncode == -9 and 0.3 <= time.monotonic() - began < 5
    child.stdout.close()
    stop(child, timeout=0.3)  # an exited child: nothing to do
