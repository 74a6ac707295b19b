"""The in-process tier: ``run_fix`` and ``run_review`` called directly, no receiver and no worker process.

``flows(scenario)`` seeds a scenario (``sandbox.scenario``) on a local GitHub and a local model started in
this process, on a Redis database of its own on the session's private server, and returns a ``Flow``: it
builds a ``JobContext`` for the scenario's pull request as a worker would and runs a flow in it. Events act
on the local GitHub with nowhere to deliver webhooks; ``Flow.act`` then runs the flow the event asks for
(a ``/spark fix`` comment, a thread's ``/spark fix``, an opened pull request, a push). Which event queues
which job, and the cancellation between processes, are the end-to-end tier's (tests/e2e).

As in tests/e2e, every flow leaves only ``spark:*`` keys that expire or are bounded (``bot/keys.py``), and
no planted secret reaches the model.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
import structlog
import yaml

from bot import keys
from bot.adapters.redacting import RedactingPort
from bot.cancel import CancelToken
from bot.core.commands import parse_command
from bot.redis_server import PrivateRedis
from bot.refs import CommandRef, PullRequestRef
from bot.settings import Settings
from sandbox import scenario as scenarios
from sandbox.cerebras import ModelSandbox
from sandbox.github import GitHubSandbox
from sandbox.scenario import SAFE_DUMPER, Event, Scenario, Scene
from sandbox.stack import APP_SLUG, WEBHOOK_SECRET, collect_outcome, stack_env
from tests.conftest import RedisDb, redis_url
from tests.e2e.conftest import assert_no_planted_secret
from workers.commands.describe import run_describe
from workers.commands.fix.flow import run_fix
from workers.commands.undo import run_undo
from workers.context import JobContext, ProcessClients
from workers.flows.review import rerun_check, run_review
from workers.flows.safe_fixes import apply_safe_fixes
from workers.timings import Timings


@dataclass
class Flow:
    """A seeded scenario and what runs a flow on it: both sandboxes, Redis, the clients a worker keeps."""

    scenario: Scenario
    settings: Settings
    github: GitHubSandbox
    model: ModelSandbox
    redis: redis.Redis
    scene: Scene
    clients: ProcessClients
    # What each flow run returned, in order ("committed", "posted", ...).
    results: list[str] = field(default_factory=list)

    @property
    def repo(self) -> str:
        """Return the scenario's ``owner/name``."""
        return self.scene.repo

    @property
    def number(self) -> int:
        """Return the pull request's number."""
        return self.scene.pr_number

    def head(self) -> str:
        """Return the pull request's head SHA."""
        return self.github.head_sha(self.repo, self.number)

    def ref(self, head_sha: str = "") -> PullRequestRef:
        """Return the reference a job of this pull request carries (a comment's has no head)."""
        installation = self.github.state.repo(self.repo).installation_id
        owner, name = self.repo.split("/")
        return PullRequestRef(installation, owner, name, self.number, head_sha, delivery_id="flows-test")

    def context(
        self, kind: str, *, head_sha: str = "", order: int = 0, claim: bool = True, heard: str = ""
    ) -> JobContext:
        """Return the context a worker builds for a job of ``kind`` (``JobContext.build``, minus RQ)."""
        ref = self.ref(head_sha)
        return JobContext(
            settings=self.settings,
            redis=self.redis,
            pr=ref,
            github=RedactingPort(self.clients.github.installation(ref.installation_id), heard=heard),
            clients=self.clients,
            log=structlog.get_logger("spark.job"),
            cancel=CancelToken.start(self.redis, ref.key, kind, order=order, head_sha=head_sha, claim=claim),
            timings=Timings(),
        )

    def fix(self, command: CommandRef) -> str:
        """Run ``/spark fix`` as the command job does (ordered by comment id, claimed once allowed)."""
        ctx = self.context("fix", order=command.comment_id, claim=False, heard=command.text)
        return self._ran(run_fix(ctx, command))

    def review(self, trigger: str = "opened", *, full: bool = False) -> str:
        """Run the review of the current head as the review job does."""
        return self._ran(run_review(self.context("review", head_sha=self.head()), trigger, full=full))

    def rerun_check(self) -> str:
        """Run what "Re-run" on the current head's "Spark" check run asks for, as the check-run job does."""
        return self._ran(rerun_check(self.context("review", head_sha=self.head())))

    def apply_safe_fixes(self) -> str:
        """Press "Apply safe fixes" on the current head's check run."""
        return self._ran(apply_safe_fixes(self.context("safe-fixes", head_sha=self.head())))

    def comment(self, body: str, by: str = "alice") -> CommandRef:
        """Comment ``body`` in the conversation; return the command it carries."""
        comment_id = self.github.comment(self.repo, self.number, body, author=by)
        return self._command(body, comment_id, by)

    def review_comment(self, path: str, line: int, body: str, by: str = "alice", **where: Any) -> CommandRef:
        """Comment ``body`` on lines of the diff (a new thread); return the command it carries."""
        comment_id = self.github.review_comment(self.repo, self.number, path, line, body, author=by, **where)
        return self._thread_command(comment_id)

    def act(self, event: Event) -> str | None:
        """Make one scenario event happen on the local GitHub and run the flow it asks for, if any."""
        if event.kind == "comment":
            return self._run_command(self.comment(event.data["body"], by=event.data["by"]))
        if event.kind == "review_comment":
            d = event.data
            extra = {k: d[k] for k in ("side", "start_line") if d.get(k) is not None}
            return self._run_command(self.review_comment(d["path"], d["line"], d["body"], d["by"], **extra))
        self.scene.act(event)
        if event.kind == "open":
            return self.review("opened")
        if event.kind == "push":
            return self.review("synchronize")
        if event.kind == "wait":
            return None
        raise NotImplementedError(f"the flows tier does not run {event.kind!r} events (tests/e2e does)")

    def run_all(self) -> dict[str, Any]:
        """Act every event of the scenario in order; return what GitHub then shows (``collect_outcome``)."""
        for event in self.scenario.events:
            self.act(event)
        return self.outcome()

    def outcome(self) -> dict[str, Any]:
        """Return what GitHub shows, as the end-to-end tier's ``collect_outcome`` does."""
        return collect_outcome(self)  # type: ignore[arg-type]

    def undo(self, command: CommandRef) -> str:
        """Run ``/spark undo`` as the command job does."""
        return self._ran(run_undo(self.context("undo", claim=False), command))

    def describe(self, command: CommandRef) -> str:
        """Run ``/spark describe`` as the command job does."""
        return self._ran(run_describe(self.context("describe", claim=False), command))

    def _run_command(self, command: CommandRef) -> str:
        runners = {"fix": self.fix, "undo": self.undo, "describe": self.describe}
        if command.name not in runners:
            raise NotImplementedError(f"/spark {command.name} is run by the command job (tests/e2e)")
        return runners[command.name](command)

    def _command(self, body: str, comment_id: int, by: str, **where: Any) -> CommandRef:
        parsed = parse_command(body)
        assert parsed is not None, f"not a /spark command: {body!r}"
        return CommandRef(
            name=parsed.name.value,
            text=parsed.text,
            comment_id=comment_id,
            author=by,
            unknown=parsed.unknown,
            **where,
        )

    def _thread_command(self, comment_id: int) -> CommandRef:
        [shown] = [c for c in self.github.review_comments(self.repo, self.number) if c["id"] == comment_id]
        return self._command(
            shown["body"],
            comment_id,
            shown["user"]["login"],
            kind="review_comment",
            path=shown["path"],
            line=shown.get("line"),
            start_line=shown.get("start_line"),
            side=shown.get("side"),
            thread_id=shown.get("in_reply_to_id") or comment_id,
        )

    def _ran(self, result: str) -> str:
        self.results.append(result)
        return result


def scenario_from(source: Scenario | dict[str, Any] | str | Path) -> Scenario:
    """Return a scenario from an object, a document, a bundled name or path, or YAML text (with a newline)."""
    if isinstance(source, Scenario):
        return source
    if isinstance(source, dict):
        text = yaml.dump(source, Dumper=SAFE_DUMPER, sort_keys=False)
        return scenarios.parse(text, source="<test scenario>")
    if isinstance(source, str) and "\n" in source:
        return scenarios.parse(textwrap.dedent(source), source="<test scenario>")
    return scenarios.load(source)


StartFlow = Callable[..., Flow]


@pytest.fixture(scope="session")
def flows_redis_url(redis_server: PrivateRedis) -> str:
    """Return the URL of the flows' database on the private Redis server."""
    return redis_url(redis_server, RedisDb.FLOWS)


@pytest.fixture()
def flows(tmp_path: Path, flows_redis_url: str, private_key: str) -> Iterator[StartFlow]:
    """Return ``flows(scenario, **settings) -> Flow`` (settings as environment variables, ``SPARK_...="1"``);
    its sandboxes and clients are closed after the test."""
    started: list[Flow] = []

    def start(source: Scenario | dict[str, Any] | str | Path, **overrides: str) -> Flow:
        # No quiet window after a push: the flow runs when the test says, and nothing else pushes.
        overrides = {"SPARK_REVIEW_DEBOUNCE_SECONDS": "0", **overrides}
        scenario = scenario_from(source)
        conn = redis.Redis.from_url(flows_redis_url)
        conn.flushdb()
        base = Settings.load({"REDIS_URL": flows_redis_url, **overrides}, env_file=None)
        models = (base.spark_model_fast, base.spark_model_deep)
        model = scenario.model_sandbox(models=models).start()
        # Nowhere to deliver webhooks: the test runs the flows itself. The session's key saves generating one.
        github = GitHubSandbox(webhook_secret=WEBHOOK_SECRET, app_slug=APP_SLUG, private_key_pem=private_key)
        github.start()
        settings = Settings.load(
            {**stack_env(base, github, model, tmp_path), **overrides, "REDIS_URL": flows_redis_url},
            env_file=None,
        )
        scene = scenarios.apply(scenario, github)
        flow = Flow(scenario, settings, github, model, conn, scene, ProcessClients(settings, conn))
        started.append(flow)
        return flow

    yield start
    for flow in started:
        flow.clients.close()
        flow.github.stop()
        flow.model.stop()
    for flow in started:
        assert_no_planted_secret(flow)  # type: ignore[arg-type]
    if started:
        try:
            assert keys.unbounded(started[0].redis) == [], (
                "spark:* keys with no TTL and no bound in bot/keys.py"
            )
        finally:
            for flow in started:
                flow.redis.close()
