"""Where a multi-process command keeps prometheus-client's samples; decided before that library is imported.

prometheus-client picks its value store once, at import, from ``PROMETHEUS_MULTIPROC_DIR``. For `spark serve`
(several web processes) and ``spark worker --processes N --metrics-port P`` the CLI therefore calls
``ensure_multiprocess_dir`` before importing the command:
a directory the deployment set is kept (the image sets one), otherwise a fresh one is made for this run and
removed at exit, so any process's scrape sums every process's samples.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

ENV = "PROMETHEUS_MULTIPROC_DIR"


def ensure_multiprocess_dir() -> str:
    """Return the metrics directory of this run, creating (and later removing) one when none is set."""
    existing = os.environ.get(ENV)
    if existing:
        os.makedirs(existing, exist_ok=True)
        return existing
    created = tempfile.mkdtemp(prefix="spark-metrics-")
    os.environ[ENV] = created
    owner = os.getpid()

    def remove() -> None:
        if os.getpid() == owner:  # forked children exit through here too: only the creator removes it
            shutil.rmtree(created, ignore_errors=True)

    atexit.register(remove)
    return created
