"""GitHub's content rules end to end (issue 16): the local GitHub serves them as GitHub does; Spark copes.

One stack serves the module (worker processes take seconds to start); each test seeds a repository of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
import yaml
from rq.job import Job

from bot.intake.handlers import router
from bot.redis_server import PrivateRedis
from bot.sandbox import scenario as scenarios
from bot.sandbox.demo import Stack, start_stack, wait_for_jobs
from bot.sandbox.scenario import Event, Scene
from bot.settings import Settings

# A database of its own on the private server: the other e2e modules use others.
CONTENT_DB = 7

PLACEHOLDER = """
name: content-e2e-placeholder
repository: {owner: placeholder, name: none, files: {README.md: "hi\\n"}}
pull_request: {title: t, author: bob, head_branch: b, files: {README.md: "hello\\n"}}
events: [{wait: 0}]
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, redis_server: PrivateRedis) -> Iterator[Stack]:
    """Start one stack for the module: both sandboxes, the receiver, one worker process, no debounce."""
    url = redis_server.url.rsplit("/", 1)[0] + f"/{CONTENT_DB}"
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


def story(
    repo: str,
    base: dict[str, Any],
    head_files: dict[str, Any],
    replies: list[dict[str, Any]] | None = None,
    fork: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Return a scenario document: a repository, a PR changing some files, scripted model replies."""
    owner, name = repo.split("/")
    pr: dict[str, Any] = {"title": "Change", "author": "bob", "head_branch": "feature", "files": head_files}
    if fork:
        pr["fork"] = fork
    return {
        "name": name,
        "repository": {"owner": owner, "name": name, "files": base},
        "pull_request": pr,
        "collaborators": {"bob": "write"},
        "events": [{"wait": 0}],
        "model": {"replies": replies or []},
    }


def finding(title: str, search: str, replace: str) -> str:
    """Return one review answer's finding with a SEARCH/REPLACE fix."""
    block = f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"
    return f"### FINDING: medium: {title}\nWhy it matters.\n{block}"


def replies_to_spark(stack: Stack) -> list[str]:
    """Return the bodies of Spark's conversation comments on the scene's pull request."""
    comments = stack.github.issue_comments(stack.scene.repo, stack.scene.pr_number)
    return [c["body"] for c in comments if c["user"]["login"] == stack.github.bot_login]


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
