"""What a job rebuilds from its small dict arguments: cached clients, refs, logger, cancel token, timings.

The worker installs its ``Settings`` and Redis connection once (``install``); jobs call ``JobContext.build``.
Clients are built on first use and kept for the life of the process, which keeps pools and installation
tokens warm from one job to the next.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis
import structlog
from rq import get_current_job
from rq.job import Job

from bot.adapters.cerebras import Completion, ModelClient
from bot.adapters.github_app import GitHubApp
from bot.adapters.ratelimit import WriteLimits
from bot.adapters.redacting import RedactingPort
from bot.cancel import CancelToken
from bot.core.config import RepoConfig
from bot.core.prompts import Messages
from bot.core.reasoning import Effort, Task, cut_off_while_reasoning, cutoff_retry, reasoning_options
from bot.core.window import Limits
from bot.metrics import MODEL_CUTOFF_RETRIES
from bot.refs import PullRequestRef
from bot.settings import Settings
from workers.limits import SharedWriteBudget
from workers.timings import Timings


class ProcessClients:
    """The clients one worker process shares across its jobs, each built on first use."""

    def __init__(self, settings: Settings, conn: redis.Redis) -> None:
        self.settings = settings
        self.redis = conn
        self._github: GitHubApp | None = None
        self._model: ModelClient | None = None
        self._lock = threading.Lock()

    @property
    def github(self) -> GitHubApp:
        """Return the process's GitHub App handle."""
        with self._lock:
            if self._github is None:
                # Every worker process and machine counts an installation's writes in one place, as GitHub
                # does.
                self._github = GitHubApp.from_settings(self.settings, budget_for=self._shared_budget)
            return self._github

    def _shared_budget(self, installation: int, limits: WriteLimits) -> SharedWriteBudget:
        return SharedWriteBudget(self.redis, installation, limits)

    @property
    def model(self) -> ModelClient:
        """Return the process's model client."""
        with self._lock:
            if self._model is None:
                self._model = ModelClient.from_settings(self.settings)
            return self._model

    def close(self) -> None:
        """Close every client this process built."""
        with self._lock:
            if self._github is not None:
                self._github.close()
            if self._model is not None:
                self._model.close()
            self._github = self._model = None


_process: ProcessClients | None = None


def install(settings: Settings, conn: redis.Redis) -> ProcessClients:
    """Make ``settings`` and ``conn`` the process's; called once by the worker before it takes jobs."""
    global _process
    _process = ProcessClients(settings, conn)
    return _process


def uninstall() -> None:
    """Close and forget the process's clients (worker shutdown)."""
    global _process
    if _process is not None:
        _process.close()
    _process = None


def process() -> ProcessClients:
    """Return the installed process clients, or fail clearly outside a worker."""
    if _process is None:
        raise RuntimeError("no worker process state: run jobs under `spark worker` (workers.runtime.work)")
    return _process


def log_fields(pr: object, job_id: str = "") -> dict[str, object]:
    """Return the ids a job's log lines carry: job (when there is one), delivery, installation, repo, PR."""
    fields: dict[str, object] = {"job_id": job_id} if job_id else {}
    if isinstance(pr, Mapping):
        fields.update(
            delivery_id=pr.get("delivery_id", ""),
            installation=pr.get("installation_id"),
            repo=f"{pr.get('owner')}/{pr.get('repo')}",
            pr=pr.get("number"),
        )
    return fields


def job_log_fields(job: Job) -> dict[str, object]:
    """Return the log fields of an RQ job, read from its ``pr`` argument."""
    return log_fields(job.kwargs.get("pr") if isinstance(job.kwargs, dict) else None, job.id)


@contextmanager
def job_logging(fields: dict[str, object]) -> Iterator[None]:
    """Bind ``fields`` to every log line of the block, structlog's and the libraries' (RQ, HTTP) alike.

    Context variables, not a bound logger: the standard library's records (rendered by ``bot.logs``) carry
    them too, and so do the flows' helper threads, which run in a copy of the job's context.
    """
    with structlog.contextvars.bound_contextvars(**fields):
        yield


def _utc(moment: datetime) -> datetime:
    # RQ may hand back its times naive, in UTC.
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def enqueued_at(job: Job | None) -> datetime | None:
    """Return when ``job`` was queued, time-zone aware."""
    return None if job is None or job.enqueued_at is None else _utc(job.enqueued_at)


def queue_wait(job: Job | None) -> float:
    """Return the seconds ``job`` waited in its queue: until RQ started it, or until now (0 outside a job)."""
    enqueued = enqueued_at(job)
    if job is None or enqueued is None:
        return 0.0
    started = None if job.started_at is None else _utc(job.started_at)
    # A job queued again (a reaped orphan) still carries its earlier run's start until it starts anew.
    until = started if started is not None and started >= enqueued else datetime.now(UTC)
    return max(0.0, (until - enqueued).total_seconds())


@dataclass
class JobContext:
    """Everything a flow needs for one job on one pull request."""

    settings: Settings
    redis: redis.Redis
    pr: PullRequestRef
    # Every post of a job goes through it (the secret values of what the job read are removed by value).
    github: RedactingPort
    clients: ProcessClients
    log: Any
    cancel: CancelToken
    timings: Timings
    job_id: str = ""
    # Set once a model request of this context is out (a fix asked early: the rest of its first round trip
    # waits for it, ``workers.commands.fix.ahead``).
    model_sent: threading.Event | None = None

    @property
    def repo(self) -> str:
        """Return ``owner/repo``."""
        return self.pr.full_name

    def complete(self, messages: Messages, model: str, task: Task, config: RepoConfig) -> Completion:
        """Ask ``model`` for ``task`` at the effort the repository (else the deployment) chose, cancellably,
        and count the call in the job's timings.

        An answer cut off by the length limit after reasoning is asked again once, with less effort and more
        room (``reasoning.cutoff_retry``); the job's reply carries the note that says so.
        """
        effort = config.efforts(self.settings.reasoning_efforts())[task]
        max_tokens = self.settings.spark_max_completion_tokens
        completion = self._ask(messages, model, effort, max_tokens)
        if not cut_off_while_reasoning(completion.finish_reason, completion.reasoning_tokens):
            return completion
        retry = cutoff_retry(model, effort, max_tokens, completion.reasoning_tokens)
        MODEL_CUTOFF_RETRIES.labels(model=model).inc()
        self.log.info(
            "model.cutoff_retry",
            model=model,
            task=task,
            reasoning_tokens=completion.reasoning_tokens,
            effort=retry.effort,
            max_tokens=retry.max_tokens,
        )
        self.timings.note(retry.note)
        return self._ask(messages, model, retry.effort, retry.max_tokens)

    def _ask(self, messages: Messages, model: str, effort: Effort, max_tokens: int) -> Completion:
        self.cancel.check()
        completion = self.clients.model.complete(
            messages,
            model,
            max_tokens,
            cancel=self.cancel,
            sent=self.model_sent,
            **reasoning_options(model, effort),
        )
        if completion.cancelled:
            raise self.cancel.error()
        self.timings.count(completion)
        return completion

    @property
    def limits(self) -> Limits:
        """Return the room of one model request, from the settings: the context, the completion's share."""
        settings = self.settings
        return Limits(
            model_context=settings.spark_context_tokens,
            cap=settings.spark_context_tokens,
            completion_reserve=settings.spark_max_completion_tokens,
        )

    def private_key(self, visible: str) -> str:
        """Return ``visible`` plus a tag only Spark can compute: nobody can predict (and pre-empt) the key."""
        settings = self.settings
        held = (settings.github_private_key, settings.github_webhook_secret, settings.github_token)
        secret = next((s.get_secret_value() for s in held if s is not None), "")
        tag = hmac.new(secret.encode(), visible.encode(), hashlib.sha256).hexdigest()[:16]
        return f"{visible}-{tag}"

    @classmethod
    def build(
        cls,
        pr: dict[str, Any] | PullRequestRef,
        *,
        kind: str,
        order: int = 0,
        claim: bool = True,
        heard: str = "",
    ) -> JobContext:
        """Rebuild the context from a job's ``pr`` argument; register a cancel token of ``kind``.

        The job posts through a ``RedactingPort``: the secret values of what it reads, and of ``heard`` (the
        comment that asked), never reach a post.
        """
        state = process()
        ref = pr if isinstance(pr, PullRequestRef) else PullRequestRef.from_dict(pr)
        job = get_current_job()
        job_id = job.id if job is not None else ""
        enqueued = enqueued_at(job)
        token = CancelToken.start(
            state.redis,
            ref.key,
            kind,
            order=order,
            head_sha=ref.head_sha,
            enqueued_at=enqueued.timestamp() if enqueued is not None else None,
            claim=claim,
        )
        return cls(
            settings=state.settings,
            redis=state.redis,
            pr=ref,
            github=RedactingPort(state.github.installation(ref.installation_id), heard=heard),
            clients=state,
            # The job's ids are bound to every line by the runtime (``job_logging``).
            log=structlog.get_logger("spark.job"),
            cancel=token,
            timings=Timings(queue_wait=queue_wait(job)),
            job_id=job_id,
        )
