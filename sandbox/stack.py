"""The whole local stack: GitHub and Cerebras sandboxes, Redis, the webhook receiver and ``spark worker``.

``spark demo``, the end-to-end tests and the benchmarks all start it here: ``start_stack`` (both sandboxes,
Redis, the receiver in process, a ``spark worker`` process), ``fire`` (one scenario event), ``wait_for_jobs``
(webhooks delivered, queues drained) and ``collect_outcome`` (what GitHub now shows, as a JSON-able dict).
Nothing here knows what the jobs do: whatever the worker flows post on GitHub is what a caller sees.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from rq import Worker
from rq.job import Job, JobStatus
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from bot import processes
from bot.core.diff import format_patch
from bot.intake.enqueue import DELIVERY_KEY, client_options, stored_job_ids
from bot.redis_server import connect, free_port, leave
from bot.settings import Settings
from bot.web.setup import load_manifest
from sandbox import scenario as scenarios
from sandbox.cerebras import ModelSandbox
from sandbox.github import GitHubSandbox
from sandbox.github.webhooks import HookDelivery
from sandbox.scenario import Event, Scenario, ScenarioError, Scene

# A throwaway secret shared by the local GitHub and the receiver, never a real one.
WEBHOOK_SECRET = "sandbox-webhook-secret"
APP_SLUG = "spark"


class _QuietHandler(WSGIRequestHandler):
    """The receiver's own logs tell the story; werkzeug's access lines would only interleave with it."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Log nothing per request."""


@dataclass(slots=True)
class Step:
    """One scenario event and how long each part of it took."""

    event: str
    fired_s: float = 0.0
    delivered_s: float = 0.0
    jobs_s: float = 0.0
    github_calls: int = 0
    model_calls: int = 0
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Stack:
    """Everything a scenario runs against, started and wired together; ``close`` stops it all."""

    scenario: Scenario
    settings: Settings
    github: GitHubSandbox
    model: ModelSandbox | None
    redis: redis.Redis
    web: BaseWSGIServer
    data_dir: Path
    worker: subprocess.Popen[bytes] | None = None
    worker_log: Path | None = None
    _scene: Scene | None = None
    seen_deliveries: set[int] = field(default_factory=set)
    _web_thread: threading.Thread | None = None

    @property
    def scene(self) -> Scene:
        """Return the scenario as applied to the local GitHub (its repository and pull request)."""
        if self._scene is None:
            raise RuntimeError("the stack has not been seeded yet")
        return self._scene

    @property
    def web_url(self) -> str:
        """Return the webhook receiver's URL."""
        return f"http://127.0.0.1:{self.web.server_port}/api/github/webhooks"

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker, the receiver and both sandboxes."""
        if self.worker is not None:
            processes.stop(self.worker, timeout=10)
        self.web.shutdown()
        self.github.stop()
        if self.model is not None:
            self.model.stop()
        if not self.settings.redis_url:
            # The demo's embedded server lives in a temporary directory: once no user is left, it stops.
            leave(self.data_dir)


def stack_env(
    base: Settings, github: GitHubSandbox, model: ModelSandbox | None, data_dir: Path
) -> dict[str, str]:
    """Return the env a Spark process needs to run against the sandboxes (``spark sandbox`` shows it).

    The log level is left to the reader's own settings (INFO by default): a playground is for watching Spark.
    """
    env = {
        "GITHUB_APP_ID": str(github.app_id),
        "GITHUB_PRIVATE_KEY": github.private_key_pem,
        "GITHUB_WEBHOOK_SECRET": github.webhook_secret,
        "GITHUB_API_URL": github.url,
        "GITHUB_URL": github.url,
        "SPARK_DATA_DIR": str(data_dir),
        "SPARK_MODEL_FAST": base.spark_model_fast,
        "SPARK_MODEL_DEEP": base.spark_model_deep,
        "SPARK_MAX_COMPLETION_TOKENS": str(base.spark_max_completion_tokens),
        "SPARK_REVIEW_DEBOUNCE_SECONDS": str(base.spark_review_debounce_seconds),
        "SPARK_GITHUB_WRITES_PER_MINUTE": str(base.spark_github_writes_per_minute),
        "SPARK_GITHUB_WRITES_PER_HOUR": str(base.spark_github_writes_per_hour),
        "SPARK_GITHUB_MAX_INLINE_WAIT_SECONDS": str(base.spark_github_max_inline_wait_seconds),
        "SPARK_GITHUB_SECONDARY_WAIT_SECONDS": str(base.spark_github_secondary_wait_seconds),
        "SPARK_RUN_LOG": str(base.spark_run_log),
    }
    if base.redis_url:
        env["REDIS_URL"] = base.redis_url
    if model is not None:
        env["CEREBRAS_API_KEY"] = model.api_key
        env["CEREBRAS_BASE_URL"] = model.url
    elif base.cerebras_api_key is not None:  # --live-model: the real API with the user's own key
        env["CEREBRAS_API_KEY"] = base.cerebras_api_key.get_secret_value()
        env["CEREBRAS_BASE_URL"] = base.cerebras_base_url
    return env


def start_sandboxes(
    scenario: Scenario, base: Settings, *, live_model: bool = False, port: int = 0
) -> tuple[GitHubSandbox, ModelSandbox | None]:
    """Start the local GitHub and, unless ``live_model``, the local Cerebras with the scenario's scripts."""
    if live_model and base.cerebras_api_key is None:
        raise ScenarioError(
            "--live-model needs CEREBRAS_API_KEY set (the real Cerebras API serves the model)"
        )
    models = (base.spark_model_fast, base.spark_model_deep)
    model = None if live_model else scenario.model_sandbox(models=models).start()
    # Subscribed to what Spark's manifest asks for, as a registered App is: GitHub sends nothing else.
    events = load_manifest("http://127.0.0.1")["default_events"]
    github = GitHubSandbox(webhook_secret=WEBHOOK_SECRET, app_slug=APP_SLUG, events=events)
    try:
        github.start(port=port)
    except BaseException:
        if model is not None:
            model.stop()
        raise
    return github, model


def start_stack(
    scenario: Scenario,
    base: Settings,
    data_dir: Path,
    *,
    live_model: bool = False,
    worker: bool = True,
    processes: int = 1,
    unlimited_writes: bool = False,
    port: int = 0,
    worker_log_level: str = "WARNING",
) -> Stack:
    """Start both sandboxes, Redis, the receiver and (unless ``worker`` is False) ``spark worker``.

    ``processes`` > 1 runs ``spark worker --processes N``, so a command can run while a review does.
    ``unlimited_writes`` lifts GitHub's content-creation limits and Spark's own write budget, for benchmarks
    that run far more fixes a minute than one installation may make. ``port`` is the local GitHub's (0: any
    free one). The worker logs at ``worker_log_level`` into ``worker.log`` (the demo's and benchmarks' report
    is their output); the receiver in process logs warnings only, since its lines would interleave with it.
    """
    github, model = start_sandboxes(scenario, base, live_model=live_model, port=port)
    if unlimited_writes:
        lifted = 10**9
        github.faults.content.per_minute = github.faults.content.per_hour = lifted
        base = base.model_copy(
            update={"spark_github_writes_per_minute": lifted, "spark_github_writes_per_hour": lifted}
        )
    env = stack_env(base, github, model, data_dir)
    settings = Settings.load({**env, "LOG_LEVEL": "WARNING"}, env_file=None)
    # The receiver's client is bounded as ``spark serve``'s is (a stuck Redis answers 503 in about 2 s).
    conn = connect(settings.redis_url, data_dir, role="demo", **client_options())
    from bot.web.app import create_app  # the receiver is only needed here (``--list`` imports none of it)

    app = create_app(settings, conn)
    web = make_server("127.0.0.1", free_port(), app, threaded=True, request_handler=_QuietHandler)
    stack = Stack(scenario, settings, github, model, conn, web, data_dir)
    # A short poll interval keeps close() fast, as the sandboxes' (shutdown waits for the loop to notice).
    stack._web_thread = threading.Thread(
        target=web.serve_forever, kwargs={"poll_interval": 0.05}, name="demo-web", daemon=True
    )
    stack._web_thread.start()
    github.webhook_url = stack.web_url
    try:
        if worker:
            # It boots while the repository is seeded.
            start_worker(stack, {**env, "LOG_LEVEL": worker_log_level}, processes=processes)
        stack._scene = scenarios.apply(scenario, github)
        if worker:
            wait_for_worker(stack, count=processes)
    except BaseException:
        stack.close()
        raise
    return stack


def start_worker(stack: Stack, env: Mapping[str, str], *, processes: int = 1) -> None:
    """Run ``spark worker`` as its own process, as in production, logging to the data dir."""
    stack.worker_log = stack.data_dir / "worker.log"
    # The child gets the sandbox settings only: none of the caller's GitHub, Cerebras or Redis settings.
    prefixes = ("GITHUB_", "CEREBRAS_", "SPARK_", "REDIS_URL", "LOG_LEVEL")
    child_env = {k: v for k, v in os.environ.items() if not k.upper().startswith(prefixes)}
    child_env.update(env)
    with stack.worker_log.open("wb") as log:
        stack.worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bot.cli.main",
                "--env-file",
                str(stack.data_dir / "none.env"),
                "worker",
                *(["--processes", str(processes)] if processes > 1 else []),
            ],
            env=child_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def wait_for_worker(stack: Stack, timeout: float = 60.0, *, count: int = 1) -> None:
    """Wait until ``count`` workers have registered with Redis, so event timings exclude their start-up."""
    deadline = time.monotonic() + timeout
    while Worker.count(connection=stack.redis) < count:
        _check_worker(stack)
        if time.monotonic() > deadline:
            raise TimeoutError(f"the worker did not start within {timeout:g} s; see {stack.worker_log}")
        time.sleep(0.02)


def _check_worker(stack: Stack) -> None:
    """Raise with the end of the worker's log if its process has exited (the log dies with the temp dir)."""
    if stack.worker is not None and stack.worker.poll() is not None:
        log = stack.worker_log.read_text(errors="replace")[-3000:] if stack.worker_log else ""
        raise RuntimeError(f"the worker exited with code {stack.worker.returncode}:\n{log}")


def fire(stack: Stack, event: Event, *, timeout: float = 60.0) -> Step:
    """Make one scenario event happen on the local GitHub, then wait until its consequences settle."""
    step = Step(event.describe())
    calls_before = len(stack.github.request_log)
    model_before = len(stack.model.requests) if stack.model else 0
    began = time.monotonic()
    stack.scene.act(event)
    step.fired_s = time.monotonic() - began
    settled = wait_for_jobs(stack, timeout=timeout)
    step.delivered_s = settled["delivered_s"]
    step.jobs_s = time.monotonic() - began
    step.deliveries = settled["deliveries"]
    step.jobs = settled["jobs"]
    step.github_calls = len(stack.github.request_log) - calls_before
    step.model_calls = len(stack.model.requests) - model_before if stack.model else 0
    return step


TERMINAL = {JobStatus.FINISHED, JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED}


def wait_for_jobs(stack: Stack, *, timeout: float = 60.0) -> dict[str, Any]:
    """Wait until every webhook is delivered and every job those deliveries queued has ended.

    The receiver records each delivery's job ids under ``spark:delivery:<guid>``, so the demo waits for
    exactly those jobs. Jobs may cause more deliveries (a commit fires a push), so this loops until both
    are quiet together. Returns the new deliveries, the jobs they queued, and when delivery completed.
    """
    began = time.monotonic()
    deadline = began + timeout
    delivered_s: float | None = None
    fresh: list[HookDelivery] = []
    job_ids: list[str] = []
    while True:
        stack.github.wait_for_deliveries(timeout=max(0.1, deadline - time.monotonic()))
        if delivered_s is None:
            delivered_s = time.monotonic() - began
        for delivery in stack.github.deliveries:
            if delivery.id in stack.seen_deliveries or not delivery.done:
                continue
            stack.seen_deliveries.add(delivery.id)
            fresh.append(delivery)
            queued = stack.redis.get(DELIVERY_KEY.format(delivery.guid))
            if 200 <= delivery.status_code < 300 and not delivery.redelivery:
                job_ids += stored_job_ids(queued)
        jobs = [job for job in Job.fetch_many(job_ids, connection=stack.redis) if job is not None]
        ended = all(job.get_status(refresh=False) in TERMINAL for job in jobs)
        if ended and all(d.done for d in stack.github.deliveries):
            break
        _check_worker(stack)
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs still queued or running after {timeout:g} s")
        time.sleep(0.01)
    return {
        "delivered_s": delivered_s,
        "deliveries": [d.summary() for d in fresh],
        "jobs": [_job_info(job) for job in jobs],
    }


def _job_info(job: Job) -> dict[str, Any]:
    def seconds(a: Any, b: Any) -> float | None:
        return round((b - a).total_seconds(), 4) if a and b else None

    info: dict[str, Any] = {
        "id": job.id,
        "func": job.func_name,
        "queue": job.origin,
        "status": str(getattr(job.get_status(refresh=False), "value", "unknown")),
        "queue_wait_s": seconds(job.enqueued_at, job.started_at),
        "run_s": seconds(job.started_at, job.ended_at),
    }
    if info["status"] == "failed":
        result = job.latest_result()
        info["error"] = (result.exc_string if result is not None else None) or "failed"
    return info


def files_at(github: GitHubSandbox, full_name: str, ref: str) -> dict[str, str]:
    """Return every file of a repository at a branch or SHA as text."""
    state = github.state
    sha = state.resolve_ref(state.repo(full_name), ref)
    blobs = state.git.files_at(sha)
    return {
        path: state.git.blobs[blob].decode("utf-8", errors="replace") for path, blob in sorted(blobs.items())
    }


def collect_outcome(stack: Stack) -> dict[str, Any]:
    """Return what GitHub shows: files per ref, comments, reviews, commits and diffs, reactions, checks."""
    gh, sc = stack.github, stack.scenario
    pr = gh.pull(stack.scene.repo, stack.scene.pr_number)
    head_repo, head_sha = pr["head"]["repo"]["full_name"], pr["head"]["sha"]
    files = {
        "head": files_at(gh, head_repo, head_sha),
        "base": files_at(gh, stack.scene.repo, sc.default_branch),
    }
    commits = []
    before = set(gh.state.git.ancestors(stack.scene.initial_head))
    for commit in reversed(gh.commits(head_repo, pr["head"]["ref"])):
        if commit["sha"] in before:
            continue
        parent = commit["parents"][0] if commit["parents"] else stack.scene.initial_head
        diff = unified(files_at(gh, head_repo, parent), files_at(gh, head_repo, commit["sha"]))
        commits.append({**commit, "diff": diff})
    comments = [
        {
            "id": c["id"],
            "author": c["user"]["login"],
            "by_app": c["user"]["login"] == gh.bot_login,
            "body": c["body"],
        }
        for c in gh.issue_comments(stack.scene.repo, stack.scene.pr_number)
    ]
    reviews = [
        {
            "id": r["id"],
            "author": r["user"]["login"],
            "state": r["state"],
            "body": r.get("body") or "",
            "commit_id": r.get("commit_id"),
            "comments": [
                {k: c.get(k) for k in ("id", "path", "line", "start_line", "side", "body")}
                for c in r["comments"]
            ],
        }
        for r in gh.reviews(stack.scene.repo, stack.scene.pr_number)
    ]
    subject_ids = [c["id"] for c in comments] + [
        c["id"] for c in gh.review_comments(stack.scene.repo, stack.scene.pr_number)
    ]
    reactions = [
        {"subject_id": cid, "content": content, "author": login}
        for cid in subject_ids
        for content, login in gh.reactions(cid)
    ]
    check_runs = [
        {k: run.get(k) for k in ("id", "name", "head_sha", "status", "conclusion", "output")}
        for run in gh.check_runs(stack.scene.repo)
    ]
    threads = [
        {k: thread[k] for k in ("path", "line", "resolved")}
        for thread in gh.threads(stack.scene.repo, stack.scene.pr_number)
    ]
    return {
        "scenario": sc.name,
        "pull_request": {
            "repo": stack.scene.repo,
            "number": stack.scene.pr_number,
            "head_repo": head_repo,
            "head_ref": pr["head"]["ref"],
            "head_sha": head_sha,
            "initial_head_sha": stack.scene.initial_head,
            "body": pr.get("body") or "",
        },
        "files": files,
        "new_commits": commits,
        "comments": comments,
        "reviews": reviews,
        "reactions": reactions,
        "check_runs": check_runs,
        "threads": threads,
    }


def unified(before: Mapping[str, str], after: Mapping[str, str]) -> str:
    """Return a unified diff between two {path: text} snapshots, in the core's patch format."""
    paths = sorted(set(before) | set(after))
    return "".join(format_patch(path, before.get(path) or "", after.get(path) or "") for path in paths)
