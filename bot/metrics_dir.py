"""Where a multi-process command keeps prometheus-client's samples; decided before that library is imported.

prometheus-client picks its value store once, at import, from ``PROMETHEUS_MULTIPROC_DIR``. For `spark serve`
(several web processes) and ``spark worker --processes N --metrics-port P`` the CLI therefore calls
``ensure_multiprocess_dir`` before importing the command. A directory the deployment set is kept (the image
sets one). Otherwise the run gets its own, ``<data dir>/metrics/<command>-<pid>``, removed at exit; a run
killed by a signal cannot remove it, so each start first removes those whose process is gone. Nothing is
left in /tmp.
"""

from __future__ import annotations

import atexit
import os
import shutil
from pathlib import Path

from bot.processes import alive

ENV = "PROMETHEUS_MULTIPROC_DIR"
FOLDER = "metrics"


def ensure_multiprocess_dir(data_dir: Path, command: str) -> str:
    """Return the metrics directory of this run, creating (and at exit removing) one when none is set."""
    existing = os.environ.get(ENV)
    if existing:
        os.makedirs(existing, exist_ok=True)
        return existing
    root = data_dir / FOLDER
    root.mkdir(parents=True, exist_ok=True)
    remove_stale(root)
    owner = os.getpid()
    created = root / f"{command}-{owner}"
    # A directory of this pid is a dead run's (the pid was reused): its samples are not this run's.
    shutil.rmtree(created, ignore_errors=True)
    created.mkdir(mode=0o700)
    os.environ[ENV] = str(created)

    def remove() -> None:
        if os.getpid() == owner:  # forked children exit through here too: only the creator removes it
            shutil.rmtree(created, ignore_errors=True)

    atexit.register(remove)
    return str(created)


def remove_stale(root: Path) -> list[Path]:
    """Remove the run directories in ``root`` whose process has exited; return what was removed."""
    removed = []
    for path in root.iterdir():
        _, _, pid = path.name.rpartition("-")
        if path.is_dir() and pid.isdigit() and not alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
