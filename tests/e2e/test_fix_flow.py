"""``/spark fix`` end to end: real receiver, real Redis, a real ``spark worker`` process, both sandboxes.

Each test tells a short story in scenario form (YAML built here), fires it through the local GitHub, and
checks what a user would see there and what the local model was asked. Here are the stories that need the
receiver and processes (bots ignored at the intake, one job cancelling another); the fix flow's own stories
run in process in tests/flows/test_fix_flow.py, on the same calculator.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from sandbox.stack import Stack, collect_outcome, fire, wait_for_jobs
from tests.e2e.conftest import StartStack

REPO = "acme/calculator"
PATH = "src/calc.py"
BASE = '''"""Small arithmetic helpers."""


def add(a: float, b: float) -> float:
    """Return the sum of a and b."""
    return a + b
'''
HEAD = (
    BASE
    + '''

def average(values: list[float]) -> float:
    """Return the arithmetic mean of values."""
    return sum(values) / (len(values) - 1)
'''
)
BUG = "    return sum(values) / (len(values) - 1)\n"
FIXED = "    return sum(values) / len(values)\n"
FIX_ANSWER = f"{PATH}\n<<<<<<< SEARCH\n{BUG}=======\n{FIXED}>>>>>>> REPLACE\n"


def answer(search: str, replace: str) -> str:
    """Return a SEARCH/REPLACE answer for ``src/calc.py``."""
    return f"{PATH}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def story(
    events: list[dict[str, Any]],
    replies: list[dict[str, Any]],
    *,
    collaborators: dict[str, str] | None = None,
    speed: Mapping[str, float] | None = None,
    fork: dict[str, Any] | None = None,
    head: str = HEAD,
    config: str | None = None,
) -> str:
    """Return scenario YAML: Alice's calculator PR (opened quietly) and the given events and replies."""
    files = {PATH: BASE}
    if config is not None:
        files[".github/spark.yml"] = config
    pull_request: dict[str, Any] = {
        "title": "Add an average helper",
        "author": "alice",
        "head_branch": "average",
        "files": {PATH: head},
    }
    if fork:
        pull_request["fork"] = fork
    document: dict[str, Any] = {
        "name": "fix-story",
        "repository": {"owner": "acme", "name": "calculator", "files": files},
        "pull_request": pull_request,
        "collaborators": collaborators or {"alice": "write"},
        "events": events,
        "model": {"speed": dict(speed or {"ttft_ms": 20, "tokens_per_second": 20000}), "replies": replies},
    }
    return yaml.safe_dump(document, sort_keys=False)


def comment(body: str, by: str = "alice") -> dict[str, Any]:
    """Return a PR conversation comment event."""
    return {"comment": {"by": by, "body": body}}


FIX = [comment("/spark fix average divides by the wrong count")]
FIX_SCRIPT = {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER}


def run_all(stack: Stack) -> dict[str, Any]:
    """Fire every event of the stack's scenario in order and return the outcome; no job may fail."""
    for event in stack.scenario.events:
        step = fire(stack, event)
        assert [j for j in step.jobs if j["status"] != "finished"] == []
    return collect_outcome(stack)


def bot_comments(outcome: dict[str, Any]) -> list[str]:
    """Return the bodies of the App's PR conversation comments."""
    return [c["body"] for c in outcome["comments"] if c["by_app"]]


def user_comment_ids(stack: Stack) -> list[int]:
    """Return the ids of the users' (not the App's) conversation comments, oldest first."""
    gh = stack.github
    return [c["id"] for c in gh.issue_comments(REPO, 1) if c["user"]["login"] != gh.bot_login]


def reactions_by_app(stack: Stack, comment_id: int) -> list[str]:
    """Return the App's reactions on a comment, oldest first."""
    gh = stack.github
    return [content for content, login in gh.reactions(comment_id) if login == gh.bot_login]


def head_file(stack: Stack) -> str:
    """Return ``src/calc.py`` at the PR's head."""
    pull = stack.github.pull(REPO, 1)
    text = stack.github.file_at(pull["head"]["repo"]["full_name"], pull["head"]["sha"], PATH)
    assert text is not None
    return text


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    """Poll ``condition`` until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for a condition"
        time.sleep(0.005)


def test_bots_and_the_app_itself_are_ignored(start: StartStack) -> None:
    events = [
        comment("/spark fix average divides by the wrong count", by="dependabot[bot]"),
        comment("/spark fix average divides by the wrong count", by="spark[bot]"),
    ]
    stack = start(story(events, [FIX_SCRIPT]))
    steps = [fire(stack, event) for event in stack.scenario.events]
    for step in steps:
        assert [d["status_code"] for d in step.deliveries] == [202] and step.jobs == []
    outcome = collect_outcome(stack)
    assert outcome["new_commits"] == [] and outcome["reactions"] == []
    assert stack.model is not None and stack.model.requests == []


# --- cancellation -----------------------------------------------------------------------------------------

# A slow stream (~2,000 tokens at 400 tok/s: about five seconds) that a cancel must cut short.
SLOW = {"ttft_ms": 50, "tokens_per_second": 400, "chunk_tokens": 4}
LONG_ANSWER = answer(
    BUG, FIXED + "".join(f"    # padding line {n:04d} to make the stream long\n" for n in range(180))
)


def _streaming(stack: Stack, index: int) -> Callable[[], bool]:
    def check() -> bool:
        assert stack.model is not None
        requests = stack.model.requests
        return len(requests) >= index and requests[index - 1].chunks_sent > 2

    return check


def test_a_second_fix_cancels_the_first_within_a_second(start: StartStack) -> None:
    replies = [
        {"name": "slow", "path": PATH, "command": "fix", "reply": LONG_ANSWER},
        {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER},
    ]
    events = [comment("/spark fix average divides by the wrong count"), comment("/spark fix the average")]
    stack = start(story(events, replies, speed=SLOW))
    first_event, second_event = stack.scenario.events
    stack.scene.act(first_event)
    wait_until(_streaming(stack, 1))
    second_at = time.monotonic()
    stack.scene.act(second_event)
    wait_for_jobs(stack, timeout=60)
    assert stack.model is not None
    first, second = stack.model.requests
    # The sandbox notices the closed stream at its next write, maybe just after the job ended.
    wait_until(lambda: first.cancelled, timeout=5)
    assert first.cancelled and first.finished_at is not None
    assert first.finished_at - second_at < 1.0, "the first stream was not cut within a second"
    assert second.script == "fix"
    outcome = collect_outcome(stack)
    [commit] = outcome["new_commits"]
    first_id, second_id = user_comment_ids(stack)
    assert f"issuecomment-{second_id}" in commit["message"]
    # The superseded job posted nothing after the newer one started: only its 👀 from before.
    assert reactions_by_app(stack, first_id) == ["eyes"]
    [reply] = bot_comments(outcome)
    assert f"spark:reply=fix-{second_id}" in reply


def test_spark_stop_mid_fix_stops_the_stream_and_commits_nothing(start: StartStack) -> None:
    replies = [{"name": "slow", "path": PATH, "command": "fix", "reply": LONG_ANSWER}]
    events = [comment("/spark fix average divides by the wrong count"), comment("/spark stop")]
    stack = start(story(events, replies, speed=SLOW))
    fix_event, stop_event = stack.scenario.events
    stack.scene.act(fix_event)
    wait_until(_streaming(stack, 1))
    stop_at = time.monotonic()
    stack.scene.act(stop_event)
    wait_for_jobs(stack, timeout=60)
    assert stack.model is not None
    [request] = stack.model.requests
    wait_until(lambda: request.cancelled, timeout=5)
    assert request.cancelled and request.finished_at is not None
    assert request.finished_at - stop_at < 1.0
    outcome = collect_outcome(stack)
    assert outcome["new_commits"] == [] and head_file(stack) == HEAD
    [reply] = bot_comments(outcome)
    assert reply.startswith("Stopped")


def test_a_strangers_stop_does_not_stop_someone_elses_fix(start: StartStack) -> None:
    """Anyone may comment `/spark stop`; only the PR's author and maintainers stop anything."""
    replies = [{"name": "slow", "path": PATH, "command": "fix", "reply": LONG_ANSWER}]
    events = [comment("/spark fix average divides by the wrong count"), comment("/spark stop", by="mallory")]
    stack = start(story(events, replies, speed=SLOW))
    fix_event, stop_event = stack.scenario.events
    stack.scene.act(fix_event)
    wait_until(_streaming(stack, 1))
    stack.scene.act(stop_event)
    wait_for_jobs(stack, timeout=60)
    assert stack.model is not None
    [request] = stack.model.requests
    assert not request.cancelled
    outcome = collect_outcome(stack)
    [commit] = outcome["new_commits"]
    assert commit["verified"]
    replies_text = bot_comments(outcome)
    assert any("Sorry @mallory" in text for text in replies_text)
    assert not any(text.startswith("Stopped") for text in replies_text)
