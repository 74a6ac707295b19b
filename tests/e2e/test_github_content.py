"""GitHub's content rules end to end (issue 16): the local GitHub serves them as GitHub does; Spark copes.

One stack serves the module (worker processes take seconds to start); each test seeds a repository of its own.
Here is what needs the receiver and processes (the events Spark is sent, a worker killed mid-fix, check-run
clicks); the content rules the flows meet alone run in process in tests/flows/test_github_content.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import yaml
from rq.job import Job

from bot.intake.handlers import router
from bot.redis_server import PrivateRedis
from bot.settings import Settings
from sandbox import scenario as scenarios
from sandbox.scenario import Event, Scene
from sandbox.stack import Stack, collect_outcome, start_stack, wait_for_jobs
from tests.conftest import RedisDb, redis_url
from tests.e2e.conftest import StartStack
from tests.stories import FIX, KILL_REPLIES, NO_REVIEW, fix_story, kill_worker, recover
from tests.stories import REPO as REPO_NAME
from tests.stories import content_story as story

PLACEHOLDER = """
name: content-e2e-placeholder
repository: {owner: placeholder, name: none, files: {README.md: "hi\\n"}}
pull_request: {title: t, author: bob, head_branch: b, files: {README.md: "hello\\n"}}
events: [{wait: 0}]
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, redis_server: PrivateRedis) -> Iterator[Stack]:
    """Start one stack for the module: both sandboxes, the receiver, one worker process, no debounce."""
    url = redis_url(redis_server, RedisDb.E2E_CONTENT)
    redis.Redis.from_url(url).flushdb()
    base = Settings.load({"REDIS_URL": url, "SPARK_REVIEW_DEBOUNCE_SECONDS": "0"}, env_file=None)
    started = start_stack(scenarios.parse(PLACEHOLDER), base, tmp_path_factory.mktemp("content-e2e"))
    yield started
    started.close()


def use(stack: Stack, document: dict[str, Any]) -> Scene:
    """Seed the stack's local GitHub with a scenario document and its scripted model replies."""
    scenario = scenarios.parse(yaml.safe_dump(document, sort_keys=False), source="<test>")
    stack.scenario = scenario
    stack._scene = scenarios.apply(scenario, stack.github)
    assert stack.model is not None
    stack.model.add_scripts(scenario.scripts)
    return stack._scene


def act(stack: Stack, kind: str, **data: Any) -> dict[str, list[Any]]:
    """Make one event happen, wait for every job it caused; return each job function's return values."""
    stack.scene.act(Event(kind, data))
    settled = wait_for_jobs(stack, timeout=60)
    out: dict[str, list[Any]] = {}
    for info in settled["jobs"]:
        assert info["status"] == "finished", info
        job = Job.fetch(info["id"], connection=stack.redis)
        out.setdefault(info["func"].rsplit(".", 1)[-1], []).append(job.return_value())
    return out


def finding(title: str, search: str, replace: str) -> str:
    """Return one review answer's finding with a SEARCH/REPLACE fix."""
    block = f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"
    return f"### FINDING: medium: {title}\nWhy it matters.\n{block}"


def test_spark_is_sent_only_events_it_handles(stack: Stack) -> None:
    """Bug 11: the manifest subscribed to `pull_request_review`, which nothing handles (Spark's reviews)."""
    use(
        stack,
        story(
            "acme/subscribed",
            {"calc.py": "def add(a, b):\n    return a + b\n"},
            {"calc.py": "def add(a, b):\n    return a - b\n"},
            [{"path": "calc.py", "reply": finding("wrong sign", "    return a - b", "    return a + b")}],
        ),
    )
    first = len(stack.github.deliveries)
    ran = act(stack, "open")
    assert ran["review"] == ["posted"]
    assert stack.github.reviews(stack.scene.repo, stack.scene.pr_number)
    sent = stack.github.deliveries[first:]
    unhandled = [(d.event, d.action) for d in sent if router.handler_for(d.event, d.action or "") is None]
    assert unhandled == []


def test_a_rerun_on_a_private_forks_pr_reads_the_head_through_the_base_repository(start: StartStack) -> None:
    """Bug 10: a re-run read the private fork's head with PyGithub directly: a 404, a crash, no reply."""
    document = yaml.safe_load(fix_story(FIX, KILL_REPLIES, config=NO_REVIEW, fork={"owner": "dana"}))
    document["repository"]["private"] = True  # and so is its fork, which the App is not installed on
    stack = start(yaml.safe_dump(document, sort_keys=False))
    killed = threading.Event()
    # Killed after the suggestions review reached GitHub, before the reply: the next worker's run first
    # looks for its own commit at the head, then finds its review.
    stack.github.github.faults.on_request(
        "POST", r"^/repos/acme/calculator/pulls/1/reviews$", lambda: kill_worker(stack, killed)
    )
    stack.scene.act(stack.scenario.events[0])
    recover(stack, killed)
    assert stack.github.state.repo("dana/calculator").private
    assert len(collect_outcome(stack)["reviews"]) == 1
    [reply] = [c["body"] for c in stack.github.issue_comments(REPO_NAME, 1) if c["user"]["type"] == "Bot"]
    assert "suggestions" in reply
    assert stack.model is not None and len(stack.model.requests) == 1


def clicked(stack: Stack) -> dict[str, list[Any]]:
    """Wait for the jobs a click on a check run caused; return each job function's return values."""
    settled = wait_for_jobs(stack, timeout=60)
    out: dict[str, list[Any]] = {}
    for info in settled["jobs"]:
        assert info["status"] == "finished", info
        out.setdefault(info["func"].rsplit(".", 1)[-1], []).append(
            Job.fetch(info["id"], connection=stack.redis).return_value()
        )
    return out


def test_check_run_buttons_work_on_a_forks_pull_request(stack: Stack) -> None:
    """Bug 4: GitHub lists no pull request for a check run on a fork's head; Spark's buttons did nothing."""
    review = finding("wrong sign", "    return a - b", "    return a + b")
    use(
        stack,
        story(
            "acme/forked",
            {"adder.py": "def add(a, b):\n    return a + b\n"},
            {"adder.py": "def add(a, b):\n    return a - b\n"},
            [{"path": "adder.py", "reply": review, "repeat": True}],
            fork={"owner": "dana", "maintainer_can_modify": True},
        ),
    )
    ran = act(stack, "open")
    assert ran["review"] == ["posted"]
    [run] = [r for r in stack.github.check_runs(stack.scene.repo) if r["name"] == "Spark"]
    assert run["pull_requests"] == []  # as GitHub answers for a fork's head
    assert [a["identifier"] for a in run["actions"]] == ["apply_fixes"]
    stack.github.rerequest_check_run(run["id"], author="bob")
    assert clicked(stack)["check_run"] == ["nothing new"]  # reviewed again; the finding was posted before
    [run, again] = [r for r in stack.github.check_runs(stack.scene.repo) if r["name"] == "Spark"]
    stack.github.request_check_run_action(again["id"], "apply_fixes", author="bob")
    assert clicked(stack)["check_run"] == ["committed"]
    head = stack.github.head_sha(stack.scene.repo, stack.scene.pr_number)
    assert stack.github.file_at("dana/forked", head, "adder.py") == "def add(a, b):\n    return a + b\n"
