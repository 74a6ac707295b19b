"""Enqueue a delivery's jobs by dotted path, once per ``X-GitHub-Delivery``, in one atomic Redis step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

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
# The writes travel as one length-prefixed blob ("argc\n" then "len\n<bytes>" per argument): packing ~70
# separate arguments was the largest CPU cost of a delivery in redis-py's pure-Python encoder.
_ENQUEUE_ONCE = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then
  return 0
end
local blob = ARGV[3]
local pos = 1
while pos <= #blob do
  local eol = string.find(blob, '\\n', pos, true)
  local argc = tonumber(string.sub(blob, pos, eol - 1))
  pos = eol + 1
  local command = {}
  for k = 1, argc do
    eol = string.find(blob, '\\n', pos, true)
    local size = tonumber(string.sub(blob, pos, eol - 1))
    command[k] = string.sub(blob, eol + 1, eol + size)
    pos = eol + 1 + size
  end
  if command[1] == 'SPARK.HMAX' then
    -- HSET key field value only if value is greater (a newer /spark fix supersedes, an older one never does).
    local current = tonumber(redis.call('HGET', command[2], command[3]) or '0')
    if tonumber(command[4]) > current then redis.call('HSET', command[2], command[3], command[4]) end
  else
    redis.call(unpack(command))
  end
end
return 1
"""


def _to_bytes(value: object) -> bytes:
    """Encode one command argument as redis-py would (bytes as is, numbers as text, str as UTF-8)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value).encode()
    raise TypeError(f"cannot send {type(value).__name__} to Redis")


def pack_commands(commands: Sequence[Sequence[object]]) -> bytes:
    """Return ``commands`` as the blob ``_ENQUEUE_ONCE`` replays."""
    parts: list[bytes] = []
    for command in commands:
        parts.append(b"%d\n" % len(command))
        for arg in command:
            data = _to_bytes(arg)
            parts += (b"%d\n" % len(data), data)
    return b"".join(parts)


class DeliveryQueue:
    """Puts a delivery's jobs on the RQ queues; the delivery id is recorded in the same atomic step."""

    def __init__(self, connection: redis.Redis) -> None:
        self.connection = connection
        # One Queue per name for the process: RQ caches the server version on it (one INFO, not one per job).
        self.queues = {name: Queue(name, connection=connection) for name in POLICIES}
        self._enqueue_once = connection.register_script(_ENQUEUE_ONCE)

    def enqueue(
        self, delivery_id: str, jobs: Sequence[JobSpec], also: Sequence[Sequence[object]] = ()
    ) -> Enqueued:
        """Queue ``jobs`` for ``delivery_id`` unless seen before; ``redis.RedisError`` if not stored.

        ``also``: further Redis commands to run in the same atomic step, only for a new delivery (the
        cancellation signals of ``bot.cancel.signal_commands``; ``SPARK.HMAX`` raises a hash field).
        """
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
        blob = pack_commands([*(command for command, _options in recorder.command_stack), *also])
        recorder.reset()
        args: list[bytes | str | int] = [",".join(job_ids), DELIVERY_TTL, blob]
        stored = self._enqueue_once(keys=[DELIVERY_KEY.format(delivery_id)], args=args)
        if not stored:
            return Enqueued(duplicate=True)
        return Enqueued(job_ids=job_ids)
