"""Metrics: recording helpers, /metrics of the real app after real deliveries, multi-process aggregation."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import orjson
import pytest
import redis
from flask.testing import FlaskClient
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from redis.backoff import NoBackoff
from redis.retry import Retry

from bot.metrics import (
    FIXES_COMMITTED,
    QUEUE_DEPTH_NAME,
    SUGGESTIONS_POSTED,
    record_github_call,
    record_model_stream,
    render_metrics,
    start_metrics_server,
    timed_job,
)
from bot.redis_server import free_port
from tests.conftest import Post

ROOT = Path(__file__).resolve().parents[2]
OPENED = ROOT / "tests" / "fixtures" / "webhooks" / "pull_request" / "opened.json"


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _scrape(client: FlaskClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_scrape_counts_deliveries_and_reads_queue_depth(
    client: FlaskClient, post: Post, redis_conn: redis.Redis
) -> None:
    queued = ("spark_webhook_deliveries_total", (("event", "pull_request"), ("outcome", "queued")))
    unverified = ("spark_webhook_deliveries_total", (("event", "unverified"), ("outcome", "rejected")))
    before = _scrape(client)
    assert before[(QUEUE_DEPTH_NAME, (("queue", "spark-review"),))] == 0

    assert post("pull_request", body=OPENED.read_bytes()).status_code == 202
    assert post("pull_request", body=OPENED.read_bytes(), secret="wrong").status_code == 401
    after = _scrape(client)

    assert after[queued] == before.get(queued, 0) + 1
    assert after[unverified] == before.get(unverified, 0) + 1
    latency = ("spark_webhook_intake_seconds_count", (("event", "pull_request"),))
    assert after[latency] >= before.get(latency, 0) + 1
    # The depth is read from Redis at scrape time: the review job is waiting.
    assert (
        after[(QUEUE_DEPTH_NAME, (("queue", "spark-review"),))]
        == redis_conn.llen("rq:queue:spark-review")
        == 1
    )
    assert after[(QUEUE_DEPTH_NAME, (("queue", "spark-interactive"),))] == 0


def test_ignored_and_bad_deliveries_are_counted_by_outcome(post: Post) -> None:
    ignored = {"event": "star", "outcome": "ignored"}
    rejected = {"event": "pull_request", "outcome": "rejected"}
    before = (
        _value("spark_webhook_deliveries_total", **ignored),
        _value("spark_webhook_deliveries_total", **rejected),
    )
    payload = orjson.dumps(
        {"action": "created", "repository": {"full_name": "o/r"}, "installation": {"id": 1}}
    )
    assert post("star", body=payload).status_code == 202
    assert post("pull_request", body=b"{not json").status_code == 400
    assert _value("spark_webhook_deliveries_total", **ignored) == before[0] + 1
    assert _value("spark_webhook_deliveries_total", **rejected) == before[1] + 1


def test_recording_helpers_move_their_metrics() -> None:
    ok_before = _value("spark_job_duration_seconds_count", kind="review", outcome="ok")
    error_before = _value("spark_job_duration_seconds_count", kind="review", outcome="error")
    cancelled_before = _value("spark_job_duration_seconds_count", kind="command", outcome="cancelled")
    with timed_job("review"):
        pass
    with pytest.raises(RuntimeError), timed_job("review"):
        raise RuntimeError("boom")
    with timed_job("command") as job:
        job["outcome"] = "cancelled"
    assert _value("spark_job_duration_seconds_count", kind="review", outcome="ok") == ok_before + 1
    assert _value("spark_job_duration_seconds_count", kind="review", outcome="error") == error_before + 1
    assert (
        _value("spark_job_duration_seconds_count", kind="command", outcome="cancelled")
        == cancelled_before + 1
    )

    tokens_before = _value("spark_model_completion_tokens_total", model="m")
    reasoning_before = _value("spark_model_reasoning_tokens_total", model="m")
    record_model_stream("m", 0.05, 0.1, tokens=1000, reasoning_tokens=200, tokens_per_second=1000.0)
    assert _value("spark_model_reasoning_tokens_total", model="m") == reasoning_before + 200
    assert _value("spark_model_first_token_seconds_bucket", model="m", le="0.05") >= 1
    assert _value("spark_model_completion_tokens_total", model="m") == tokens_before + 1000
    assert _value("spark_model_tokens_per_second_bucket", model="m", le="1000.0") >= 1
    assert _value("spark_model_tokens_per_second_bucket", model="m", le="500.0") == 0

    record_github_call("rest", "post", 201, installation_id=99, remaining=4321)
    assert _value("spark_github_rate_limit_remaining", installation="99") == 4321
    assert _value("spark_github_api_calls_total", api="rest", method="POST", status="201") >= 1
    fixes = _value("spark_fixes_committed_total")
    FIXES_COMMITTED.inc()
    assert _value("spark_fixes_committed_total") == fixes + 1


def test_scrape_survives_redis_down() -> None:
    down = redis.Redis(port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    text = render_metrics(down, ["spark-review"]).decode()
    assert "spark_webhook_deliveries_total" in text or "spark_webhook_deliveries" in text
    assert f'{QUEUE_DEPTH_NAME}{{queue="spark-review"}}' not in text


_CHILD = textwrap.dedent(
    """
    import sys
    from bot.metrics import FIXES_COMMITTED, GITHUB_RATE_LIMIT_REMAINING
    FIXES_COMMITTED.inc(int(sys.argv[1]))
    GITHUB_RATE_LIMIT_REMAINING.labels(installation="1").set(int(sys.argv[2]))
    """
)
_SCRAPE = (
    "import sys; from bot.metrics import scrape_registry; from prometheus_client import generate_latest; "
    + ("sys.stdout.write(generate_latest(scrape_registry()).decode())")
)


def test_multiprocess_scrape_sums_every_process(tmp_path: Path) -> None:
    # As under gunicorn: processes record into PROMETHEUS_MULTIPROC_DIR; any one of them can serve /metrics.
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    for fixes, remaining in ((2, 500), (3, 400)):
        subprocess.run(
            [sys.executable, "-c", _CHILD, str(fixes), str(remaining)], env=env, check=True, timeout=60
        )
    out = subprocess.run(
        [sys.executable, "-c", _SCRAPE], env=env, check=True, timeout=60, capture_output=True, text=True
    ).stdout
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(out)
        for s in family.samples
    }
    assert samples[("spark_fixes_committed_total", ())] == 5
    # mostrecent: the last value GitHub reported, whichever process saw it.
    assert samples[("spark_github_rate_limit_remaining", (("installation", "1"),))] == 400


def test_worker_metrics_server_serves_this_process_metrics() -> None:
    port = free_port()
    start_metrics_server(port, addr="127.0.0.1")
    SUGGESTIONS_POSTED.inc(2)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    served = {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.labels
    }
    assert served["spark_suggestions_posted_total"] == _value("spark_suggestions_posted_total") >= 2


def test_every_job_kind_records_its_duration() -> None:
    """Each RQ entry point in workers/jobs.py (its public functions) is timed, itself or through a helper."""
    import ast

    tree = ast.parse((ROOT / "workers" / "jobs.py").read_text())
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}

    def times(function: ast.FunctionDef) -> bool:
        return any(
            isinstance(item.context_expr, ast.Call)
            and isinstance(item.context_expr.func, ast.Name)
            and item.context_expr.func.id == "timed_job"
            for node in ast.walk(function)
            if isinstance(node, ast.With)
            for item in node.items
        )

    timing_helpers = {
        name for name, function in functions.items() if name.startswith("_") and times(function)
    }
    entry_points = [function for name, function in functions.items() if not name.startswith("_")]
    assert {f.name for f in entry_points} == {"review", "command", "installation", "check_run", "ci_failure"}
    for function in entry_points:
        calls = {
            node.func.id
            for node in ast.walk(function)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        }
        timed = times(function) or bool(calls & timing_helpers)
        assert timed, f"workers.jobs.{function.name} records no spark_job_duration_seconds"
