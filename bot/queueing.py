"""Enqueue a delivery's jobs by dotted path, once per ``X-GitHub-Delivery``, in one atomic Redis step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import redis
from rq import Queue, Retry

from bot.intake.routing import INTERACTIVE, REVIEW, JobSpec

# GitHub lets a delivery be redelivered for 3 days (7 on GHES) with the same id: remember ids a little longer.
DELIVERY_TTL = int(timedelta(days=8).total_seconds())
DELIVERY_KEY = "spark:delivery:{}"


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


@dataclass(frozen=True, slots=True)
class Enqueued:
    """The outcome: the job ids queued, or ``duplicate`` when this delivery id was seen before."""

    job_ids: tuple[str, ...] = ()
    duplicate: bool = False


# Record the delivery id and apply RQ's enqueue writes in one atomic step, one round trip: the writes run only
# when SET NX succeeds, so a redelivery (same id) queues nothing and a delivery is never half-queued.
_ENQUEUE_ONCE = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then
  return 0
end
local i = 3
while i <= #ARGV do
  local argc = tonumber(ARGV[i])
  redis.call(unpack(ARGV, i + 1, i + argc))
  i = i + argc + 1
end
return 1
"""


class DeliveryQueue:
    """Puts a delivery's jobs on the RQ queues; the delivery id is recorded in the same atomic step."""

    def __init__(self, connection: redis.Redis) -> None:
        self.connection = connection
        # One Queue per name for the process: RQ caches the server version on it (one INFO, not one per job).
        self.queues = {name: Queue(name, connection=connection) for name in POLICIES}
        self._enqueue_once = connection.register_script(_ENQUEUE_ONCE)

    def enqueue(self, delivery_id: str, jobs: Sequence[JobSpec]) -> Enqueued:
        """Queue ``jobs`` for ``delivery_id`` unless seen before; ``redis.RedisError`` if not stored."""
        job_ids = tuple(delivery_id if len(jobs) == 1 else f"{delivery_id}-{i}" for i in range(len(jobs)))
        # RQ decides what a job is in Redis: let it write into a pipeline that is never executed, and replay
        # those commands inside the script, after the duplicate check.
        recorder = self.connection.pipeline(transaction=False)
        for job_id, spec in zip(job_ids, jobs, strict=True):
            policy = POLICIES[spec.queue]
            self.queues[spec.queue].enqueue_call(
                spec.func,
                kwargs=spec.kwargs,
                job_id=job_id,
                timeout=policy.job_timeout,
                ttl=policy.ttl,
                result_ttl=policy.result_ttl,
                failure_ttl=policy.failure_ttl,
                retry=Retry(max=policy.retries),
                description=f"{spec.func} ({delivery_id})",
                pipeline=recorder,
            )
        args: list[Any] = [",".join(job_ids), DELIVERY_TTL]
        for command, _options in recorder.command_stack:
            args += [len(command), *command]
        recorder.reset()
        stored = self._enqueue_once(keys=[DELIVERY_KEY.format(delivery_id)], args=args)
        if not stored:
            return Enqueued(duplicate=True)
        return Enqueued(job_ids=job_ids)
