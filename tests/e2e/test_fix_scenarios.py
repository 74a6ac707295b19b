"""Every bundled scenario, run end to end through the sandbox, meets the expectations its file declares."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import scenario as scenarios
from sandbox.stack import collect_outcome, fire
from tests.e2e.conftest import StartStack


@pytest.mark.parametrize("path", scenarios.bundled(), ids=lambda p: p.stem)
def test_bundled_scenario_meets_its_expectations(start: StartStack, path: Path) -> None:
    scenario = scenarios.load(path)
    stack = start(scenario)
    steps = [fire(stack, event) for event in scenario.events]
    failed = [job for step in steps for job in step.jobs if job["status"] != "finished"]
    assert not failed, failed
    checks = scenarios.check(scenario.expect, collect_outcome(stack))
    assert checks, "a bundled scenario declares what a user should see"
    assert [c for c in checks if not c.ok] == []
