"""A first run, as a newcomer meets it: `spark serve` and `spark doctor` with little or nothing configured."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest

from bot.redis_server import free_port
from tests.processes.conftest import ROOT, Start, ready, wait_for


def newcomer_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The environment of someone who has configured nothing but ``settings``."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "CEREBRAS_", "REDIS_", "SPARK_", "PROMETHEUS_", "LOG_"))
    }
    return base | {"SPARK_DATA_DIR": str(tmp_path / "data")} | settings


def stop(serve: subprocess.Popen[bytes]) -> None:
    """Stop the whole process group at once: what these tests check is printed at start, and a web process
    still loading would hold a graceful stop for granian's 20 s kill timeout."""
    os.killpg(serve.pid, signal.SIGKILL)
    serve.wait(timeout=60)


def test_unconfigured_serve_says_once_where_setup_is(start: Start, tmp_path: Path) -> None:
    port = free_port()
    serve = start("serve", "--workers", "2", "--bind", f"127.0.0.1:{port}", base=newcomer_env(tmp_path))
    wait_for(lambda: ready(port), 60, "spark serve")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
        home = response.read().decode()
    # The home page names the address; it cannot link it (the token is the log's, not the world's).
    assert "/setup?token=" in home and 'href="/setup"' not in home
    output = (tmp_path / "serve-0.log").read_text()
    assert output.count("no GitHub App is configured yet") == 1, output
    found = re.search(rf"Open (http://127\.0\.0\.1:{port}/setup\?token=([\w-]+)) in a browser", output)
    assert found, output
    # Only the printed address opens the page, whichever web process answers.
    for _ in range(4):
        with urllib.request.urlopen(found[1], timeout=10) as response:
            assert response.status == 200 and 'id="create-app"' in response.read().decode()
    for wrong in ("", "?token=guess"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/setup{wrong}", timeout=10)
        assert refused.value.code == 403
    stop(serve)


def test_default_worker_count_does_not_warn_about_cores(start: Start, tmp_path: Path) -> None:
    port = free_port()
    serve = start("serve", "--bind", f"127.0.0.1:{port}", base=newcomer_env(tmp_path))
    wait_for(lambda: ready(port), 60, "spark serve")
    stop(serve)
    output = (tmp_path / "serve-0.log").read_text()
    assert "higher than the amount of CPU cores" not in output, output
    assert "no GitHub App is configured yet" in output


def doctor(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "--env-file", os.devnull, "doctor", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_doctor_shows_its_table_when_a_setting_is_invalid(tmp_path: Path) -> None:
    env = newcomer_env(tmp_path, SPARK_MAX_COMPLETION_TOKENS="lots", GITHUB_APP_ID="")
    table = doctor(env)
    assert table.returncode == 2, table.stderr
    lines = table.stdout.splitlines()
    row = next(line for line in lines if line.startswith("SPARK_MAX_COMPLETION_TOKENS"))
    assert "FAIL" in row and "'lots'" in row
    fix = "fix SPARK_MAX_COMPLETION_TOKENS, or unset it to use the default (4096)"
    assert f"- SPARK_MAX_COMPLETION_TOKENS: {fix}" in lines
    # The other checks still ran; an empty GITHUB_APP_ID= is "not set", not an invalid value.
    assert any(line.startswith("app id") and "not set" in line for line in lines)
    assert any(line.startswith("redis") and "ok" in line for line in lines)

    as_json = doctor(env, "--json")
    assert as_json.returncode == 2
    data = orjson.loads(as_json.stdout)
    rows = {row["name"]: row for row in data["checks"]}
    assert data["ok"] is False and data["exit_code"] == 2
    assert rows["settings"]["status"] == "fail"
    assert rows["SPARK_MAX_COMPLETION_TOKENS"]["status"] == "fail"
    assert "GITHUB_APP_ID" not in rows and rows["app id"]["detail"] == "not set"


def test_review_dry_run_works_against_the_sandbox_scenario_the_docs_name(tmp_path: Path) -> None:
    """docs/operations.md: `spark sandbox --scenario review-suggestions`, then `spark review URL --dry-run`"""
    env = newcomer_env(tmp_path)
    sandbox = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot.cli.main",
            "--env-file",
            os.devnull,
            "sandbox",
            "--scenario",
            "review-suggestions",
        ],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sandbox.stdout is not None
        lines = []
        for line in sandbox.stdout:
            lines.append(line)
            if line.startswith("Serving"):
                break
        exports = dict(
            line.removeprefix("export ").strip().split("=", 1) for line in lines if line.startswith("export ")
        )
        pull_url = next(line.split()[2] for line in lines if line.startswith("Pull request:"))
        review = subprocess.run(
            [sys.executable, "-m", "bot.cli.main", "--env-file", os.devnull, "review", pull_url, "--dry-run"],
            cwd=ROOT,
            env=env | {k: v.strip("'") for k, v in exports.items()},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        sandbox.terminate()
        sandbox.wait(timeout=30)
    assert review.returncode == 0, review.stdout + review.stderr
    assert review.stdout.startswith("spark review acme/settings-service#1: posted")
    assert review.stdout.count("```suggestion") == 2
    assert "spark sandbox --scenario review-suggestions" in (ROOT / "docs" / "operations.md").read_text()
