"""Scenario files: every bundled one validates and builds; bad ones fail with the place and the problem."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sandbox import scenario
from sandbox.cerebras import FaultKind
from sandbox.github import GitHubSandbox
from sandbox.scenario import ScenarioError, apply_unified_diff, check

MINIMAL = """
name: tiny
repository:
  owner: acme
  name: tiny
  files: {a.py: "x = 1\\n"}
pull_request:
  title: t
  author: alice
  head_branch: b
  files: {a.py: "x = 2\\n"}
events:
  - open: {}
"""


@pytest.mark.parametrize("path", scenario.bundled(), ids=lambda p: p.stem)
def test_bundled_scenarios_load(path: Path) -> None:
    loaded = scenario.load(path)
    assert loaded.name == path.stem
    assert loaded.events and loaded.description
    assert loaded.head_files != loaded.base_files


def test_at_least_the_three_required_stories_ship() -> None:
    names = {p.stem for p in scenario.bundled()}
    assert {"python-bug-fix", "review-suggestions", "fork-pr"} <= names
    assert scenario.load(None).name == scenario.DEFAULT_SCENARIO
    assert scenario.load("fork-pr").fork == {"owner": "dana", "maintainer_can_modify": False}


def test_minimal_scenario_builds_typed_views() -> None:
    built = scenario.parse(MINIMAL)
    assert built.base_files == {"a.py": "x = 1\n"} and built.head_files == {"a.py": "x = 2\n"}
    assert [e.kind for e in built.events] == ["open"]
    assert built.speed.ttft_ms == 120 and built.speed.tokens_per_second == 1000
    assert built.full_name == "acme/tiny" and built.default_branch == "main" and built.fork is None


def test_model_section_becomes_scripts_speed_and_faults() -> None:
    data = yaml.safe_load(MINIMAL)
    data["model"] = {
        "speed": {"ttft_ms": 10, "tokens_per_second": 500},
        "replies": [{"path": "a.py", "command": "fix", "reply": "R"}],
        "faults": [{"kind": "rate_limit", "times": 2, "retry_after": 0.5}],
    }
    built = scenario.parse(yaml.safe_dump(data))
    [script] = built.scripts
    assert script.reply == "R" and script.matches("file a.py\n/spark fix it") and not script.matches("a.py")
    [fault] = built.model_faults
    assert fault.kind is FaultKind.RATE_LIMIT and fault.times == 2 and fault.retry_after == 0.5
    sandbox = built.model_sandbox()
    assert sandbox.speed.ttft_ms == 10 and sandbox.label == "tiny"


def test_errors_name_the_line_and_the_problem() -> None:
    bad = MINIMAL.replace("author: alice", "author: 42").replace("- open: {}", "- explode: {}")
    with pytest.raises(ScenarioError) as caught:
        scenario.parse(bad, source="bad.yaml")
    message = str(caught.value)
    assert message.startswith("bad.yaml: invalid scenario")
    assert "line 9, pull_request.author: 42 is not of type 'string'" in message
    assert (
        "line 13, events[0]: an event is exactly one of open, comment, push, review_comment, reply, close, "
        "wait, ci; got explode" in message
    )


def test_missing_section_and_bad_yaml_are_reported() -> None:
    with pytest.raises(ScenarioError, match="'events' is a required property"):
        scenario.parse(MINIMAL.split("events:")[0])
    with pytest.raises(ScenarioError, match="not valid YAML"):
        scenario.parse("name: [unclosed")
    with pytest.raises(ScenarioError, match="no such file or bundled scenario"):
        scenario.load("no-such-scenario")


def test_unified_diff_applies_strictly() -> None:
    base = {"a.py": "one\ntwo\nthree\n"}
    diff = "--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
    assert apply_unified_diff(base, diff) == {"a.py": "one\nTWO\nthree\n"}
    added = "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,1 @@\n+new\n"
    assert apply_unified_diff(base, added)["new.py"] == "new\n"
    with pytest.raises(ValueError, match="line 2 is 'two\\\\n' but the diff expects 'TWO"):
        apply_unified_diff(base, diff.replace("-two", "-TWO"))
    with pytest.raises(ValueError, match="does not have"):
        apply_unified_diff({}, diff)


def test_a_diff_that_does_not_apply_is_a_scenario_error() -> None:
    data = yaml.safe_load(MINIMAL)
    del data["pull_request"]["files"]
    data["pull_request"]["diff"] = "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 3\n+x = 4\n"
    with pytest.raises(ScenarioError, match=r"pull_request\.diff: a\.py: line 1"):
        scenario.parse(yaml.safe_dump(data))


def test_check_compares_expectations_with_an_outcome() -> None:
    expect = scenario.load("python-bug-fix").expect
    fixed = (
        scenario.load("python-bug-fix").head_files["src/calc.py"].replace("(len(values) - 1)", "len(values)")
    )
    outcome = {
        "files": {"head": {"src/calc.py": fixed}, "base": scenario.load("python-bug-fix").base_files},
        "new_commits": [{"sha": "abc"}],
        "comments": [{"body": "Fixed", "by_app": True}],
        "reactions": [{"content": "eyes"}, {"content": "rocket"}],
        "reviews": [],
    }
    assert all(c.ok for c in check(expect, outcome)), check(expect, outcome)
    outcome["reactions"] = [{"content": "eyes"}]
    outcome["new_commits"] = []
    failed = {c.name for c in check(expect, outcome) if not c.ok}
    assert failed == {"reaction rocket", "new_commits"}


def test_an_event_with_a_missing_field_says_which() -> None:
    bad = MINIMAL.replace("- open: {}", "- comment: {by: alice}")
    with pytest.raises(ScenarioError, match=r"line 13, events\[0\]\.comment: 'body' is a required property"):
        scenario.parse(bad)


def test_apply_seeds_the_local_github_and_acts_out_events() -> None:
    data = yaml.safe_load(MINIMAL)
    data["collaborators"] = {"alice": "write"}
    data["events"] = [
        {"open": {}},
        {"review_comment": {"by": "alice", "path": "a.py", "line": 1, "body": "why 2?"}},
        {"reply": {"by": "alice", "body": "/spark fix make it 3"}},
        {"push": {"by": "alice", "files": {"b.py": "y = 1\n"}}},
        {"close": {}},
    ]
    data["github"] = {"latency_ms": 5}
    built = scenario.parse(yaml.safe_dump(data))
    with GitHubSandbox() as github:
        scene = scenario.apply(built, github)
        assert scene.pr_number == 0 and github.faults.latency == 0.005
        assert github.file_at("acme/tiny", "main", "a.py") == "x = 1\n"
        for event in built.events:
            scene.act(event)
        github.wait_for_deliveries()
        first, reply = github.review_comments("acme/tiny", scene.pr_number)
        assert reply["in_reply_to_id"] == first["id"] and reply["body"] == "/spark fix make it 3"
        assert github.file_at("acme/tiny", "b", "b.py") == "y = 1\n"
        assert github.pull("acme/tiny", scene.pr_number)["state"] == "closed"
        kinds = [(d.event, d.action) for d in github.deliveries]
    assert kinds[0] == ("pull_request", "opened") and ("pull_request", "closed") in kinds
    assert kinds.count(("pull_request_review_comment", "created")) == 2


def test_an_event_before_the_pull_request_opens_is_refused() -> None:
    data = yaml.safe_load(MINIMAL)
    data["events"] = [{"comment": {"by": "alice", "body": "hi"}}, {"open": {}}]
    built = scenario.parse(yaml.safe_dump(data))
    with GitHubSandbox() as github:
        scene = scenario.apply(built, github)
        with pytest.raises(ScenarioError, match="before the pull request is opened"):
            scene.act(built.events[0])
