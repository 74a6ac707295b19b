"""``spark serve``: where it listens, and its defaults."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli.main import build_parser, default_web_workers, main
from bot.cli.serve import Bind


@pytest.mark.parametrize(
    ("text", "bind"),
    [
        ("127.0.0.1:3000", Bind("127.0.0.1", 3000)),
        ("0.0.0.0:80", Bind("0.0.0.0", 80)),
        (":8080", Bind("0.0.0.0", 8080)),
        ("[::1]:3000", Bind("::1", 3000)),
        ("unix:/run/spark.sock", Bind(uds="/run/spark.sock")),
    ],
)
def test_bind_parses_what_the_docs_show(text: str, bind: Bind) -> None:
    assert Bind.parse(text) == bind


@pytest.mark.parametrize("text", ["localhost", "127.0.0.1:http", "127.0.0.1:0", "127.0.0.1:70000", ""])
def test_a_bad_bind_names_the_option(text: str) -> None:
    with pytest.raises(ValueError, match="--bind"):
        Bind.parse(text)


def test_defaults_one_process_per_core_and_one_thread() -> None:
    args = build_parser().parse_args(["serve"])
    assert args.workers == default_web_workers() == len(os.sched_getaffinity(0))
    assert args.threads == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bind", "nowhere"], "--bind 'nowhere': expected HOST:PORT or unix:PATH"),
        (["--workers", "0"], "--workers and --threads must be at least 1"),
    ],
)
def test_serve_refuses_bad_options_with_a_message(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", "s")
    # main() sets the metrics directory of a multi-process serve in this process's environment: undone after
    # (setenv records the variable as unset, so the teardown removes what main() wrote).
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")
    monkeypatch.setenv("SPARK_DATA_DIR", str(tmp_path))
    assert main(["--env-file", os.devnull, "serve", *argv]) == 2
    assert capsys.readouterr().err.strip() == f"spark serve: {message}"


# Run in a child process: freezing is for the life of the process.
FROZEN_PROBE = """
import gc, os, sys, time
from bot.cli.serve import load_app
from bot.settings import Settings
load_app(Settings.load(), os.devnull)
started = time.perf_counter()
gc.collect()
print(gc.get_freeze_count(), (time.perf_counter() - started) * 1000)
"""


def test_each_worker_freezes_the_objects_it_loaded(worker_env: dict[str, str]) -> None:
    """A full collection in a loaded worker no longer scans the app's startup objects."""
    env = {**worker_env, "GITHUB_WEBHOOK_SECRET": "s"}
    done = subprocess.run(
        [sys.executable, "-c", FROZEN_PROBE], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    frozen, collect_ms = done.stdout.split()
    assert int(frozen) > 20_000, done.stdout
    # Printed, not asserted (timings are the benchmarks' business): a full collection after freezing.
    print(f"full collection after freezing: {float(collect_ms):.2f} ms")
