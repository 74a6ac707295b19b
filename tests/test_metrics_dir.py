"""The multi-process metrics directory: under the data directory, removed at exit, swept after a kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from bot.metrics_dir import ENV, remove_stale

ROOT = Path(__file__).resolve().parents[1]
# Makes the run's directory, writes one sample file in it (as a metric would), prints its path, then waits
# for a line on stdin (or is killed).
CHILD = (
    "import sys; from pathlib import Path; from bot.metrics_dir import ensure_multiprocess_dir; "
    "path = ensure_multiprocess_dir(Path(sys.argv[1]), 'serve'); "
    "from prometheus_client import Counter; Counter('spark_probe', 'probe').inc(); "
    "print(path, flush=True); sys.stdin.readline()"
)


def start(data_dir: Path, **env: str) -> tuple[subprocess.Popen[str], Path]:
    clean = {k: v for k, v in os.environ.items() if k != ENV} | env
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(data_dir)],
        cwd=ROOT,
        env=clean,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def test_the_directory_is_under_the_data_dir_and_removed_at_exit(tmp_path: Path) -> None:
    before = set(Path(tempfile.gettempdir()).glob("spark-metrics-*"))
    proc, path = start(tmp_path)
    assert path.parent == tmp_path / "metrics" and path.name == f"serve-{proc.pid}"
    assert any(path.glob("*.db"))  # prometheus-client wrote its samples there
    proc.communicate("\n")
    assert proc.returncode == 0
    assert not path.exists()
    assert set(Path(tempfile.gettempdir()).glob("spark-metrics-*")) == before


def test_a_killed_runs_directory_is_removed_by_the_next_start(tmp_path: Path) -> None:
    killed, left = start(tmp_path)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert left.is_dir()  # a signal left no chance to clean up
    alive, kept = start(tmp_path)
    try:
        assert not left.exists()
        # A running command's directory is never swept.
        assert remove_stale(tmp_path / "metrics") == [] and kept.is_dir()
    finally:
        alive.communicate("\n")
    assert list((tmp_path / "metrics").iterdir()) == []


def test_a_directory_the_deployment_set_is_kept(tmp_path: Path) -> None:
    chosen = tmp_path / "chosen"
    proc, path = start(tmp_path / "data", **{ENV: str(chosen)})
    proc.communicate("\n")
    assert path == chosen and chosen.is_dir() and any(chosen.glob("*.db"))
    assert not (tmp_path / "data" / "metrics").exists()
