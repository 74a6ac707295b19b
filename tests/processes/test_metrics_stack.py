"""Every documented metric is recorded: one review and one fix through `spark serve` and `spark worker`.

The families are read from the table in docs/deploy.md, so a metric added to the docs is checked here too.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bot.redis_server import free_port
from bot.settings import Settings
from sandbox import scenario as scenarios
from sandbox.cerebras import ModelSandbox
from sandbox.github import GitHubSandbox
from sandbox.stack import WEBHOOK_SECRET, stack_env, start_sandboxes
from tests.processes.conftest import ROOT, Start, ready, wait_for

DOCS = ROOT / "docs" / "deploy.md"
FIX_REPLY = {
    "name": "fix-close",
    "path": "app/config.py",
    "command": "fix",
    "reply": (
        "app/config.py\n<<<<<<< SEARCH\n    return {**DEFAULTS, **data}\n=======\n"
        "    handle.close()\n    return {**DEFAULTS, **data}\n>>>>>>> REPLACE\n"
    ),
}


def documented_families() -> list[str]:
    """Return the metric names of the docs' table (first column, `spark_...`)."""
    names = re.findall(r"^\| `(spark_[a-z_]+)` \|", DOCS.read_text(), re.MULTILINE)
    assert len(names) >= 10, names
    return names


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Return sample name -> [(labels, value)] of one scrape."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        samples.setdefault(f"{family.name}:type", []).append(({"type": family.type}, 0))
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def has_sample(samples: dict[str, list[tuple[dict[str, str], float]]], name: str) -> bool:
    """Return whether ``name`` has a sample: any for a gauge, one that counted something otherwise."""
    kind = samples.get(f"{name.removesuffix('_total')}:type", [({"type": ""}, 0)])[0][0]["type"]
    if kind == "gauge":
        return bool(samples.get(name))
    recorded = samples.get(f"{name}_count") or samples.get(name) or []
    return any(value > 0 for _, value in recorded)


@pytest.fixture()
def sandboxes() -> Iterator[tuple[GitHubSandbox, ModelSandbox, scenarios.Scenario]]:
    """The review-suggestions scenario plus a `/spark fix` the deep model makes, on local GitHub and model."""
    data = yaml.safe_load((ROOT / "sandbox/scenarios/review-suggestions.yaml").read_text())
    data["events"] += [{"comment": {"by": "bob", "body": "/spark fix close the file handle"}}]
    # The fast model misses twice, so the deep model makes the fix (the escalation counter counts it).
    miss = {**FIX_REPLY, "name": "fix-miss", "reply": FIX_REPLY["reply"].replace("DEFAULTS", "DEFAULTZ", 1)}
    data["model"]["replies"][:0] = [miss, {**miss, "name": "fix-miss-again"}, FIX_REPLY]
    data.pop("expect")
    # gpt-oss reasons a little at the fix's low effort; GLM at its default runs past the length limit (512
    # below), so the review and the escalation are each asked again once without reasoning.
    data["model"]["reasoning"] = {"low": 20, "medium": 600, "high": 20}
    scenario = scenarios.parse(yaml.safe_dump(data), source="<metrics scenario>")
    base = Settings.load({}, env_file=None)
    github, model = start_sandboxes(scenario, base)
    assert model is not None
    try:
        yield github, model, scenario
    finally:
        github.stop()
        model.stop()


def test_one_fix_and_one_review_record_every_documented_metric(
    start: Start, sandboxes: tuple[GitHubSandbox, ModelSandbox, scenarios.Scenario], tmp_path: Path
) -> None:
    github, model, scenario = sandboxes
    base = Settings.load(
        {"SPARK_REVIEW_DEBOUNCE_SECONDS": "0", "SPARK_MAX_COMPLETION_TOKENS": "512"}, env_file=None
    )
    env = stack_env(base, github, model, tmp_path / "data")
    assert env["GITHUB_WEBHOOK_SECRET"] == WEBHOOK_SECRET
    web_port, worker_port = free_port(), free_port()
    start("serve", "--workers", "2", "--bind", f"127.0.0.1:{web_port}", **env)
    start("worker", "--processes", "2", "--metrics-port", str(worker_port), **env)
    wait_for(lambda: ready(web_port), 60, "spark serve")
    github.webhook_url = f"http://127.0.0.1:{web_port}/api/github/webhooks"
    worker_metrics = f"http://127.0.0.1:{worker_port}/metrics"

    def ran(*kinds: str) -> bool:
        try:
            samples = scrape(worker_metrics)
        except OSError:
            return False
        done = {labels["kind"] for labels, _ in samples.get("spark_job_duration_seconds_count", [])}
        return set(kinds) <= done

    scene = scenarios.apply(scenario, github)
    opened, comment = scenario.events[0], scenario.events[-1]
    scene.act(opened)
    wait_for(lambda: ran("review"), 60, "the review")
    scene.act(comment)
    wait_for(lambda: ran("review", "command_fix"), 60, "the fix")

    web, worker = scrape(f"http://127.0.0.1:{web_port}/metrics"), scrape(worker_metrics)
    missing = [
        name for name in documented_families() if not (has_sample(web, name) or has_sample(worker, name))
    ]
    assert not missing, f"documented but never recorded: {missing}"
    # Where each is recorded: intake in the web processes, the work in the workers.
    assert has_sample(web, "spark_webhook_deliveries_total") and has_sample(web, "spark_queue_depth")
    assert sum(v for _, v in worker["spark_suggestions_posted_total"]) >= 2
    assert sum(v for _, v in worker["spark_fixes_committed_total"]) == 1
    assert sum(v for _, v in worker["spark_model_cutoff_retries_total"]) >= 2
    assert any(v > 0 for _, v in worker["spark_model_completion_tokens_total"])
    # The models as documented (docs/configuration.md, the schema's model.fast / model.deep):
    # the review asks the deep model; the fix the fast one, and the deep one once it escalates.
    used = {request.script: request.model for request in model.requests}
    assert used == {
        "review-config": base.spark_model_deep,
        "fix-miss": base.spark_model_fast,
        "fix-miss-again": base.spark_model_fast,
        "fix-close": base.spark_model_deep,
    }
    remaining = worker["spark_github_rate_limit_remaining"]
    assert remaining and all(v > 0 for _, v in remaining)
