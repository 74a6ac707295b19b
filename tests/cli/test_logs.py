"""The logs of a real ``/spark fix`` run: JSON lines with the delivery's (and the job's) ids, and no secret.

The receiver runs in this process (its log lines are captured from stdout), the worker is a real
``spark worker`` process logging to a file; both log at INFO, as a production deployment would.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
import redis
from werkzeug.serving import make_server

from bot.redis_server import PrivateRedis, free_port
from bot.settings import Settings
from bot.web.app import create_app
from sandbox import scenario as scenarios
from sandbox import stack as local_stack
from tests.conftest import RedisDb, redis_url

# Shapes of credentials that must never reach a log line, whatever their value.
CREDENTIAL_SHAPES = {
    "installation token": re.compile(r"gh[spu]_[A-Za-z0-9_-]{16,}"),
    "JWT": re.compile(r"eyJ[\w-]{10,}\.[\w-]{10,}"),
    "bearer header": re.compile(r"(?i)bearer\s+\S{8,}"),
    "PEM block": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY"),
}
JOB_FIELDS = ("delivery_id", "job_id", "installation", "repo", "pr")


def json_lines(text: str) -> list[dict[str, Any]]:
    """Parse every line: each one must be a JSON object (libraries' records included)."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture()
def fix_logs(
    tmp_path: Path, redis_server: PrivateRedis, capfd: pytest.CaptureFixture[str]
) -> tuple[str, str, dict[str, str]]:
    """Run the python-bug-fix scenario with INFO logs; return (receiver log, worker log, the secrets)."""
    url = redis_url(redis_server, RedisDb.CLI_LOGS)
    conn = redis.Redis.from_url(url)
    conn.flushdb()
    scenario = scenarios.load("python-bug-fix")
    base = Settings.load({"REDIS_URL": url}, env_file=None)
    github, model = local_stack.start_sandboxes(scenario, base)
    assert model is not None
    env = local_stack.stack_env(base, github, model, tmp_path) | {"LOG_LEVEL": "INFO"}
    settings = Settings.load(env, env_file=None)
    web = make_server("127.0.0.1", free_port(), create_app(settings, conn), threaded=True)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    stack = local_stack.Stack(scenario, settings, github, model, conn, web, tmp_path)
    github.webhook_url = stack.web_url
    try:
        local_stack.start_worker(stack, env)
        stack._scene = scenarios.apply(scenario, github)
        local_stack.wait_for_worker(stack)
        steps = [local_stack.fire(stack, event) for event in scenario.events]
    finally:
        stack.close()
    assert any(
        j["func"] == "workers.jobs.command" and j["status"] == "finished" for s in steps for j in s.jobs
    )
    assert github.commits(stack.scene.repo, "average")[0]["verified"], "the fix was committed"
    assert stack.worker_log is not None
    secrets = {
        "webhook secret": github.webhook_secret,
        "model API key": model.api_key,
        # The key's body, line by line: a fragment of it in a log is as bad as the whole.
        **{f"private key line {i}": line for i, line in enumerate(github.private_key_pem.splitlines()[1:4])},
    }
    captured = capfd.readouterr()
    return captured.out + captured.err, stack.worker_log.read_text(), secrets


def test_receiver_and_job_lines_carry_their_ids_and_no_secret(
    fix_logs: tuple[str, str, dict[str, str]],
) -> None:
    web_log, worker_log, secrets = fix_logs
    deliveries = [line for line in json_lines(web_log) if line.get("event") == "delivery"]
    assert {line["github_event"] for line in deliveries} >= {"pull_request", "issue_comment"}
    assert all(re.fullmatch(r"[0-9a-f-]{36}", line["delivery_id"]) for line in deliveries)

    # The worker runs one job at a time: every line from job_started to job_ended belongs to that job.
    in_jobs: list[dict[str, Any]] = []
    inside = False
    for line in json_lines(worker_log):
        inside = inside or line["event"] == "job_started"
        if inside:
            in_jobs.append(line)
        inside = inside and line["event"] != "job_ended"
    assert {line["event"] for line in in_jobs} >= {"job_started", "job_ended", "fix.committed"}
    # Libraries' own records (RQ's job lines, HTTP requests) are among them, with the same ids.
    assert any(line.get("logger") == "rq.worker" for line in in_jobs)
    for line in in_jobs:
        missing = [f for f in JOB_FIELDS if not line.get(f)]
        assert not missing, f"{line['event']} lacks {missing}"
    # A job's lines name the delivery that queued it, as the receiver logged it.
    assert {line["delivery_id"] for line in in_jobs} <= {line["delivery_id"] for line in deliveries}
    assert {line["repo"] for line in in_jobs} == {"acme/calculator"}

    for text in (web_log, worker_log):
        for name, secret in secrets.items():
            assert secret not in text, f"the {name} appears in a log"
        for name, shape in CREDENTIAL_SHAPES.items():
            assert not shape.search(text), f"a {name} appears in a log"


def test_a_library_line_carries_no_terminal_colours(capfd: pytest.CaptureFixture[str]) -> None:
    import logging

    from bot.logs import configure_logging

    configure_logging(Settings.load({"LOG_LEVEL": "INFO"}, env_file=None))
    # How RQ words a job's end: its colorizer wraps the names in terminal codes, even into a file.
    logging.getLogger("rq.worker").info("%s: \x1b[32mJob OK\x1b[39;49;00m (%s)", "spark-review", "job-1")
    [line] = json_lines(capfd.readouterr().err)
    assert line["event"] == "spark-review: Job OK (job-1)" and line["logger"] == "rq.worker"
