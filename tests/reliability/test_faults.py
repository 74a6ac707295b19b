"""GitHub and model faults during `/spark fix`: retried as the headers say, then a clear reply; never a
duplicate comment or commit, never a broken commit. Runs the bundled fix-under-faults story with other faults.
"""

from __future__ import annotations

import ast
from collections import Counter
from typing import Any

import pytest
import yaml

from sandbox import scenario as scenarios
from sandbox.stack import Stack, collect_outcome, fire
from tests.e2e.conftest import StartStack

pytestmark = pytest.mark.slow

FIXED = "return (ordered[middle - 1] + ordered[middle]) / 2\n"
PULL_PATH = r"^/repos/acme/calculator/pulls/\d+$"

# name -> (GitHub section, model faults, whether a commit must land: True, False, or None for either)
CASES: dict[str, tuple[dict[str, Any], list[dict[str, Any]], bool | None]] = {
    "github-5xx-on-commit-and-reply": (
        {
            "faults": [
                {"status": 502, "method": "POST", "path": "^/graphql$", "times": 1},
                {"status": 503, "method": "POST", "path": r"/issues/\d+/comments$", "times": 1},
            ]
        },
        [],
        True,
    ),
    "github-5xx-burst-at-start": ({"faults": [{"status": 502, "times": 4}]}, [], False),
    "github-secondary-rate-limit": (
        {"faults": [{"status": 403, "method": "POST", "path": "^/graphql$", "retry_after": 1}]},
        [],
        True,
    ),
    "github-pr-deleted": (
        {"faults": [{"status": 404, "method": "GET", "path": PULL_PATH, "times": 50}]},
        [],
        False,
    ),
    "token-expiring-mid-job": ({"latency_ms": 60}, [], True),
    "model-429": ({}, [{"kind": "rate_limit", "times": 1, "retry_after": 0.5}], True),
    "model-429-persistent": ({}, [{"kind": "rate_limit", "times": 5, "retry_after": 0.2}], False),
    "model-5xx": ({}, [{"kind": "server_error", "times": 1, "status": 503}], True),
    "model-stalled-stream": ({}, [{"kind": "stall", "after_chunks": 1, "stall_seconds": 2}], None),
    "model-malformed": ({}, [{"kind": "malformed"}], None),
    "model-empty": ({}, [{"kind": "empty", "times": 3}], False),
}


def _scenario(github: dict[str, Any], model_faults: list[dict[str, Any]]) -> scenarios.Scenario:
    path = next(p for p in scenarios.bundled() if p.stem == "fix-under-faults")
    data = yaml.safe_load(path.read_text())
    data["name"] = "fault-" + str(abs(hash(str((github, model_faults)))))[:8]
    data["github"] = github
    data["model"]["faults"] = model_faults
    data["model"]["speed"] = {"ttft_ms": 20, "tokens_per_second": 5000}
    data.pop("expect", None)
    return scenarios.parse(yaml.safe_dump(data), source="<fault scenario>")


def _replies(outcome: dict[str, Any]) -> list[str]:
    return [c["body"] for c in outcome["comments"] if c["by_app"] and not c["body"].startswith("/spark")]


# Cases a known bug makes fail (strict xfail: fixing the bug makes the test pass and the xfail must go).
KNOWN_BUGS: dict[str, str] = {}


def _param(case: str) -> Any:
    if case in KNOWN_BUGS:
        return pytest.param(case, marks=pytest.mark.xfail(reason=KNOWN_BUGS[case], strict=True))
    return case


@pytest.mark.parametrize("case", [_param(case) for case in sorted(CASES)])
def test_fix_under_a_fault_ends_with_one_reply_and_at_most_one_sound_commit(
    start: StartStack, case: str
) -> None:
    github, model_faults, must_commit = CASES[case]
    stack: Stack = start(_scenario(github, model_faults))
    if case == "token-expiring-mid-job":
        # Every token expires within a few 60 ms calls (GitHub: an hour); the client must mint new ones.
        stack.github.token_ttl = 0.6
    step = fire(stack, stack.scenario.events[0], timeout=120)
    outcome = collect_outcome(stack)
    commits = outcome["new_commits"]
    assert len(commits) <= 1, "never two commits for one request"
    head = outcome["files"]["head"]["src/calc.py"]
    ast.parse(head)  # whatever happened, the branch holds valid Python: never a broken commit
    if must_commit is not None:
        assert bool(commits) == must_commit, (case, _replies(outcome), step.jobs)
    if commits:
        assert FIXED in head
    replies = _replies(outcome)
    if case != "github-pr-deleted":  # a deleted PR has nowhere to reply
        assert len(replies) == 1, replies  # one clear reply, not zero and not a duplicate
    reactions = Counter((r["subject_id"], r["content"]) for r in outcome["reactions"])
    assert all(n == 1 for n in reactions.values()), reactions
    if case == "github-secondary-rate-limit":
        log = stack.github.request_log
        limited = next(i for i, r in enumerate(log) if r.status == 403)
        retry = next(r for r in log[limited + 1 :] if r.path == log[limited].path)
        assert retry.started - log[limited].started >= 0.95, "Retry-After: 1 was honoured"
    if case == "model-429":
        assert stack.model is not None
        times = [r.received_at for r in stack.model.requests]
        assert len(times) >= 2 and times[1] - times[0] >= 0.45, "retry-after: 0.5 was honoured"
