"""Enqueue a delivery's jobs with RQ, once per ``X-GitHub-Delivery``, in one Redis transaction."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.client import Pipeline
from redis.retry import Retry
from rq import Queue
from rq import Retry as JobRetry
from rq.queue import EnqueueData

from bot import cancel, keys
from bot.cancel import cancel_key, transaction
from bot.intake.routing import INTERACTIVE, REVIEW, JobSpec, Signal
from bot.redis_server import as_text

DELIVERY_TTL = keys.DELIVERY.seconds
DELIVERY_KEY = keys.DELIVERY.pattern
# Sorted set: job id -> when it was queued. A worker takes a job off its queue (BLPOP) before RQ records it as
# started; if the worker or Redis fails in between, the job is in no queue and no registry. The workers'
# reaper finds such jobs here and queues them again (``workers.reaper.recover_dropped``).
QUEUED_KEY = keys.QUEUED.pattern
# GitHub gives up on a delivery after 10 s. A stuck Redis (frozen, swapping, busy with a slow command) must
# turn into a 503 well inside that: every call of the web process gives up after this long. A timeout is not
# retried (Redis is stuck); a dropped connection is, once, on a new socket (a kept one goes stale when Redis
# restarts).
REDIS_TIMEOUT_SECONDS = 2.0
# A readiness probe's delivery id is kept this long: probes store through the intake's own path.
READY_TTL = 60


def client_options() -> dict[str, Any]:
    """Return the ``redis.Redis`` arguments of the web process's client: bounded calls (see above)."""
    return {
        "socket_timeout": REDIS_TIMEOUT_SECONDS,
        "socket_connect_timeout": REDIS_TIMEOUT_SECONDS,
        "retry": Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
    }


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    """How long a queue's jobs may run, wait and be kept, and how often a dead worker's job is re-run."""

    job_timeout: int
    # A job queued longer than this is stale (e.g. a review of a head pushed over long ago).
    ttl: int
    result_ttl: int = 3600
    failure_ttl: int = int(timedelta(days=7).total_seconds())
    retries: int = 2


POLICIES: dict[str, QueuePolicy] = {
    INTERACTIVE: QueuePolicy(job_timeout=120, ttl=3600),
    REVIEW: QueuePolicy(job_timeout=600, ttl=int(timedelta(days=1).total_seconds())),
}


def stored_job_ids(stored: bytes | str | None) -> tuple[str, ...]:
    """Return the job ids a delivery's key holds (none for a delivery that only raised a signal)."""
    return tuple(job_id for job_id in as_text(stored).split(",") if job_id)


@dataclass(frozen=True, slots=True)
class Enqueued:
    """The outcome: the job ids queued, or ``duplicate`` when this delivery id was seen before."""

    job_ids: tuple[str, ...] = ()
    duplicate: bool = False


class DeliveryQueue:
    """Puts a delivery's jobs on the RQ queues with RQ's own API; the delivery id is recorded with them.

    One Redis transaction per delivery: WATCH the delivery's key (and the fields a signal raises), see whether
    the id was stored before, then MULTI ... EXEC writes the id, the jobs (``Queue.enqueue_many`` on the
    transaction's pipeline), the reaper's record and the signals. Either all of it is stored or none; if a
    redelivery of the same id races this one, the losing transaction is retried and finds the id stored.
    """

    def __init__(self, connection: redis.Redis) -> None:
        self.connection = connection
        # One ``Queue`` per name, kept: RQ asks the server's version once per queue object.
        self.queues = {name: Queue(name, connection=connection) for name in POLICIES}
        self.names = tuple(self.queues)

    def enqueue(
        self,
        delivery_id: str,
        jobs: Sequence[JobSpec],
        signals: Sequence[Signal] = (),
        *,
        ttl: int = DELIVERY_TTL,
    ) -> Enqueued:
        """Queue ``jobs``, raise ``signals`` and keep ``delivery_id`` for ``ttl`` s unless seen before.

        Raises ``redis.RedisError`` when nothing was stored.
        """
        job_ids = tuple(delivery_id if len(jobs) == 1 else f"{delivery_id}-{i}" for i in range(len(jobs)))
        key = DELIVERY_KEY.format(delivery_id)
        ordered = [(signal, _order_field(signal)) for signal in signals]
        watched = [key, *dict.fromkeys(cancel_key(s.pr_key) for s, field in ordered if field)]

        def store(pipe: Pipeline) -> bool:
            if pipe.exists(key):
                return False
            current = [
                int(pipe.hget(cancel_key(s.pr_key), field) or 0) if field else 0 for s, field in ordered
            ]
            now = time.time()
            pipe.multi()
            pipe.set(key, ",".join(job_ids), ex=ttl)
            for name, group in _by_queue(job_ids, jobs).items():
                self.queues[name].enqueue_many(
                    [_job_data(job_id, spec, delivery_id) for job_id, spec in group], pipeline=pipe
                )
            if job_ids:
                pipe.zadd(QUEUED_KEY, dict.fromkeys(job_ids, now))
            for (signal, _), value in zip(ordered, current, strict=True):
                _raise(pipe, signal, now, value)
            return True

        stored = transaction(self.connection, store, *watched)
        return Enqueued(job_ids=job_ids) if stored else Enqueued(duplicate=True)

    def check(self) -> None:
        """Store an empty delivery the way ``enqueue`` stores one (readiness); ``redis.RedisError`` if not."""
        self.enqueue(f"ready-{uuid.uuid4().hex}", (), ttl=READY_TTL)


def _by_queue(job_ids: Sequence[str], jobs: Sequence[JobSpec]) -> dict[str, list[tuple[str, JobSpec]]]:
    groups: dict[str, list[tuple[str, JobSpec]]] = {}
    for job_id, spec in zip(job_ids, jobs, strict=True):
        groups.setdefault(spec.queue, []).append((job_id, spec))
    return groups


def _job_data(job_id: str, spec: JobSpec, delivery_id: str) -> EnqueueData:
    policy = POLICIES[spec.queue]
    return Queue.prepare_data(
        spec.func,
        kwargs=spec.kwargs,
        job_id=job_id,
        timeout=policy.job_timeout,
        ttl=policy.ttl,
        result_ttl=policy.result_ttl,
        failure_ttl=policy.failure_ttl,
        retry=JobRetry(max=policy.retries),
        description=f"{spec.func} ({delivery_id})",
    )


def _order_field(signal: Signal) -> str:
    """Return the cancellation field a signal raises to a newer order (read first), or "" for none."""
    if signal.kind == "supersede":
        return cancel.supersede_field(signal.job_kind)
    if signal.kind == "ask-supersede":
        return cancel.ask_supersede_field(signal.job_kind, signal.by)
    return ""


def _raise(pipe: Pipeline, signal: Signal, now: float, current: int) -> None:
    """Queue one signal's writes (``bot.cancel``'s writer for its kind) on the delivery's transaction."""
    if signal.kind == "stop":
        cancel.stop(pipe, signal.pr_key, at=now, by=signal.by)
    elif signal.kind == "ask-stop":
        cancel.ask_stop(pipe, signal.pr_key, at=now, by=signal.by)
    elif signal.kind == "head":
        cancel.new_head(pipe, signal.pr_key, str(signal.value))
    elif signal.kind == "supersede":
        cancel.supersede(
            pipe, signal.pr_key, signal.job_kind, int(signal.value), current=current, by=signal.by
        )
    elif signal.kind == "ask-supersede":
        cancel.ask_supersede(
            pipe, signal.pr_key, signal.job_kind, int(signal.value), current=current, by=signal.by
        )
    elif signal.kind == "check-failed":
        # Not a cancellation: a failed check noted on its head for the CI jobs reading that head.
        key = keys.CI_FAILED.format(signal.pr_key)
        pipe.hset(key, str(signal.value), signal.data)
        pipe.expire(key, keys.CI_FAILED.seconds)
    else:
        raise ValueError(f"unknown signal {signal.kind!r}")
