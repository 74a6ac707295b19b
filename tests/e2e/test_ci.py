"""Failed checks through the whole stack in auto mode: the webhook of a failed job leads to one verified fix
with nobody asking; when Spark's own fix fails the same check again, it stops and says so once."""

from __future__ import annotations

from typing import Any

import yaml

from sandbox import scenario as scenarios
from sandbox.stack import collect_outcome, fire
from tests.e2e.conftest import StartStack


def _auto(fix_reply: str | None = None) -> scenarios.Scenario:
    data: dict[str, Any] = yaml.safe_load(scenarios.find("ci-fix").read_text())
    data["name"] = "ci-auto"
    data["repository"]["files"][".github/spark.yml"] = "ci:\n  fix: auto\n"
    ci = next(event["ci"] for event in data["events"] if "ci" in event)
    data["events"] = [{"open": {}}, {"wait": 0}, {"ci": ci}, {"wait": 0}, {"ci": ci}, {"wait": 0}]
    if fix_reply is not None:
        data["model"]["replies"][0]["reply"] = fix_reply
    return scenarios.parse(yaml.safe_dump(data), "ci-auto")


def test_auto_mode_fixes_a_failed_head_by_itself_and_the_rerun_passes(start: StartStack) -> None:
    scenario = _auto()
    stack = start(scenario)
    steps = [fire(stack, event) for event in scenario.events]
    assert not [job for step in steps for job in step.jobs if job["status"] != "finished"]
    outcome = collect_outcome(stack)
    assert len(outcome["new_commits"]) == 1
    head = outcome["pull_request"]["head_sha"]
    on_head = {run["name"]: run["conclusion"] for run in outcome["check_runs"] if run["head_sha"] == head}
    assert on_head["lint"] == on_head["test"] == "success"
    assert "if not 0 <= discount <= 1:" in outcome["files"]["head"]["src/shop/cart.py"]


# A fix that removes the import but leaves the refused discount: the test fails again on Spark's own commit.
HALF_FIX = """src/shop/cart.py
<<<<<<< SEARCH

import os

=======

>>>>>>> REPLACE
"""


def test_auto_mode_stops_when_its_own_fix_fails_the_same_check(start: StartStack) -> None:
    scenario = _auto(HALF_FIX)
    stack = start(scenario)
    for event in scenario.events:
        fire(stack, event)
    outcome = collect_outcome(stack)
    assert len(outcome["new_commits"]) == 1
    said = [c["body"] for c in outcome["comments"] if c.get("by_app")]
    stops = [body for body in said if "failed again on Spark's own fix" in body]
    assert len(stops) == 1 and "`test`" in stops[0] and "/spark undo" in stops[0]
