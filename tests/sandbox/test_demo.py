"""``spark demo`` end to end: real receiver, real Redis, a real ``spark worker`` process, both sandboxes."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from cerebras.cloud.sdk import Cerebras
from github import Auth, GithubIntegration

from bot.redis_server import PrivateRedis
from bot.settings import Settings
from sandbox import demo, scenario
from sandbox.demo import DemoResult
from sandbox.stack import start_stack
from tests.conftest import RedisDb, redis_url

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fix_run(tmp_path_factory: pytest.TempPathFactory, redis_server: PrivateRedis) -> DemoResult:
    """Run the default scenario once for the module (the worker process takes a few seconds to start)."""
    # A database of its own on the private server, so the demo's worker never meets other tests' jobs.
    url = redis_url(redis_server, RedisDb.DEMO)
    redis.Redis.from_url(url).flushdb()
    base = Settings.load({"REDIS_URL": url}, env_file=None)
    return demo.run_scenario(scenario.load(None), base, tmp_path_factory.mktemp("demo"), timeout=60)


def test_every_event_was_delivered_and_its_jobs_ran(fix_run: DemoResult) -> None:
    opened, _, commented, _ = fix_run.steps
    assert [(d["event"], d["action"], d["status_code"]) for d in opened.deliveries] == [
        ("pull_request", "opened", 202)
    ]
    assert next((d["event"], d["action"]) for d in commented.deliveries) == ("issue_comment", "created")
    assert [j["func"] for j in opened.jobs] == ["workers.jobs.review"]
    assert (
        commented.jobs[0]["func"] == "workers.jobs.command"
        and commented.jobs[0]["queue"] == "spark-interactive"
    )
    assert all(j["status"] == "finished" for s in fix_run.steps for j in s.jobs)
    assert all(j["queue_wait_s"] is not None and j["queue_wait_s"] < 5 for s in fix_run.steps for j in s.jobs)


def test_outcome_shows_github_state(fix_run: DemoResult) -> None:
    outcome = fix_run.outcome
    assert outcome["pull_request"]["repo"] == "acme/calculator" and outcome["pull_request"]["number"] == 1
    assert "def average" in outcome["files"]["head"]["src/calc.py"]
    assert "def average" not in outcome["files"]["base"]["src/calc.py"]
    user_comments = [c for c in outcome["comments"] if not c["by_app"]]
    assert [c["author"] for c in user_comments] == ["alice"]


def test_the_demo_does_not_pretend(fix_run: DemoResult) -> None:
    """Either the flows produced what the scenario expects, or the report says plainly they are pending."""
    if all(c.ok for c in fix_run.checks):
        assert fix_run.outcome["new_commits"] and fix_run.outcome["new_commits"][0]["diff"]
    else:
        assert fix_run.notes and "not built yet" in fix_run.notes[0]
        assert "[pending]" in demo.render(fix_run)
    for commit in fix_run.outcome["new_commits"]:
        assert commit["author"] != "alice"  # anything new on the head came from Spark, not the seeding


def test_model_requests_are_labelled_as_scripted(fix_run: DemoResult) -> None:
    text = demo.render(fix_run)
    assert "scripted replies from the scenario, not a model's work" in text or not fix_run.model_requests
    for request in fix_run.model_requests:
        assert request["script"] in {"fix-average", "review-on-open"} or request["error"]


def test_json_document_round_trips(fix_run: DemoResult, tmp_path: Path) -> None:
    document = json.loads(json.dumps(fix_run.as_json(), default=str))
    assert set(document) >= {
        "files",
        "comments",
        "reviews",
        "new_commits",
        "steps",
        "expectations",
        "total_s",
    }
    assert document["steps"][0]["event"] == "the pull request is opened"


def test_cli_lists_scenarios_and_rejects_a_bad_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings.load({}, env_file=None)
    args = argparse.Namespace(list=True, scenario=None, json_out=None, live_model=False)
    assert demo.run(settings, args) == 0
    listed = capsys.readouterr().out
    assert "python-bug-fix" in listed and "fork-pr" in listed
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: Bad Name\n")
    args = argparse.Namespace(list=False, scenario=str(bad), json_out=None, live_model=False)
    assert demo.run(settings, args) == 2
    assert "invalid scenario" in capsys.readouterr().err


def test_live_model_without_a_key_is_refused(tmp_path: Path) -> None:
    settings = Settings.load({}, env_file=None)
    with pytest.raises(scenario.ScenarioError, match="CEREBRAS_API_KEY"):
        start_stack(scenario.load(None), settings, tmp_path, live_model=True)


@pytest.fixture()
def sandbox_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CEREBRAS_", "SPARK_"))}
    env["SPARK_DATA_DIR"] = str(tmp_path)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot.cli.main",
            "--env-file",
            str(tmp_path / "none.env"),
            "sandbox",
            "--scenario",
            "fork-pr",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    exported: dict[str, str] = {}
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    for line in proc.stdout:
        if line.startswith("export "):
            name, _, value = line.removeprefix("export ").strip().partition("=")
            exported[name] = value.strip("'")
        if line.startswith("Serving") or time.monotonic() > deadline:
            break
    try:
        yield proc, exported
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)


def test_spark_sandbox_prints_settings_that_work_with_the_real_clients(
    sandbox_process: tuple[subprocess.Popen[str], dict[str, str]],
) -> None:
    proc, env = sandbox_process
    assert proc.poll() is None
    key = Path(env["GITHUB_PRIVATE_KEY_PATH"]).read_text()
    integration = GithubIntegration(
        auth=Auth.AppAuth(int(env["GITHUB_APP_ID"]), key), base_url=env["GITHUB_API_URL"]
    )
    installation = integration.get_repo_installation("acme", "greeter")
    repo = integration.get_github_for_installation(installation.id).get_repo("acme/greeter")
    assert repo.get_pull(1).head.repo.full_name == "dana/greeter"
    sdk = Cerebras(
        api_key=env["CEREBRAS_API_KEY"], base_url=env["CEREBRAS_BASE_URL"], warm_tcp_connection=False
    )
    assert "gpt-oss-120b" in [m.id for m in sdk.models.list().data]
