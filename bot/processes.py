"""Processes by pid: whether one still runs (a zombie has exited, a reused pid is another process), and
stopping a child: SIGTERM, then SIGKILL once it has had its time.

Signal 0 says whether a pid exists; Linux's ``/proc/PID/stat`` then says whether it is a zombie and when it
started, so a pid recorded with its start time is not mistaken for a later process that got the same number.
Without ``/proc`` the signal alone answers.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

# Fields of /proc/PID/stat after the command name: the state first, the start time twentieth.
STATE, START_TIME = 0, 19


def alive(pid: int, started: str = "") -> bool:
    """Return whether ``pid`` runs (and, given ``started``, its ``start_time``, is still that process)."""
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, run by another user
    fields = _stat(pid)
    if len(fields) <= START_TIME:
        return True  # no /proc here: trust the signal
    return fields[STATE] != "Z" and (not started or fields[START_TIME] == started)


def start_time(pid: int) -> str:
    """Return the process's start time (clock ticks since boot), or "" where there is no ``/proc``."""
    fields = _stat(pid)
    return fields[START_TIME] if len(fields) > START_TIME else ""


def stop(process: subprocess.Popen[Any], timeout: float) -> None:
    """Ask a child to stop (SIGTERM) unless it has exited; ``wait_or_kill`` it."""
    if process.poll() is None:
        process.terminate()
    wait_or_kill(process, timeout)


def wait_or_kill(process: subprocess.Popen[Any], timeout: float) -> None:
    """Wait up to ``timeout`` seconds for a child that was asked to exit, then kill it and reap it."""
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _stat(pid: int) -> list[str]:
    """Return the fields of ``/proc/PID/stat`` after the command name (state first), or []."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    # The command name (field 2) may hold spaces and parentheses: split after its closing one.
    return stat.rpartition(")")[2].split()
