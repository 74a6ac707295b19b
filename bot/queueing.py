"""Enqueue a delivery's jobs by dotted path, once per ``X-GitHub-Delivery``, in one atomic Redis step."""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import redis
from rq import Queue, Retry
from rq.utils import now, utcformat

from bot.intake.routing import INTERACTIVE, REVIEW, JobSpec
from bot.resp import Script, bulk, encode

# GitHub lets a delivery be redelivered for 3 days (7 on GHES) with the same id: remember ids a little longer.
DELIVERY_TTL = int(timedelta(days=8).total_seconds())
DELIVERY_KEY = "spark:delivery:{}"
# Sorted set: job id -> when it was queued. A worker takes a job off its queue (BLPOP) before RQ records it as
# started; if the worker or Redis fails in between, the job is in no queue and no registry. The workers'
# reaper finds such jobs here and queues them again (``workers.runtime.recover_dropped``).
QUEUED_KEY = "spark:queued"


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
# The writes follow as arguments, each command as its argument count and then its arguments: Redis parses
# them in C, where splitting one blob in the script cost Redis more than the writes themselves.
_ENQUEUE_ONCE = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then
  return 0
end
local i, n = 3, #ARGV
while i <= n do
  local argc = tonumber(ARGV[i])
  if ARGV[i + 1] == 'SPARK.HMAX' then
    -- HSET key field value only if value is greater (a newer /spark fix supersedes, an older one never does).
    local current = tonumber(redis.call('HGET', ARGV[i + 2], ARGV[i + 3]) or '0')
    if tonumber(ARGV[i + 4]) > current then redis.call('HSET', ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]) end
  else
    redis.call(unpack(ARGV, i + 1, i + argc))
  end
  i = i + 1 + argc
end
return 1
"""


@dataclass(frozen=True, slots=True)
class Packed:
    """Script arguments packed as RESP bulk strings, and how many there are."""

    data: bytes
    count: int


def pack_commands(commands: Sequence[Sequence[object]]) -> Packed:
    """Return ``commands`` as the arguments ``_ENQUEUE_ONCE`` replays (argument count, then arguments)."""
    return Packed(
        b"".join(argc(command) + b"".join(bulk(encode(arg)) for arg in command) for command in commands),
        sum(1 + len(command) for command in commands),
    )


def argc(command: Sequence[object]) -> bytes:
    """Return the argument that leads a command in ``_ENQUEUE_ONCE``'s arguments: how many follow."""
    return bulk(b"%d" % len(command))


# The parts of a job that differ from one job to the next (the job id, and these fields of its hash);
# everything else RQ writes is the same every time.
_ID = "id"
_FILLED_FIELDS = ("created_at", "enqueued_at", "data", "description")
_TEMPLATE_ID = "spark-template-job-id"
# A slot: the value named by the middle element, between a fixed prefix and suffix (a key holding the job id).
Slot = tuple[bytes, str, bytes]


def _compress(data: bytes) -> bytes:
    """Return ``data`` zlib-compressed, as RQ stores a job's call (RQ decompresses any zlib stream).

    ``zlib.compress`` sets up a 32 KB window and a 256 KB state for every call, about 90 us, for a few hundred
    bytes of pickled kwargs; a small window and state give the same format in a tenth of the time.
    """
    compressor = zlib.compressobj(6, zlib.DEFLATED, 12, 4)
    return compressor.compress(data) + compressor.flush()


class JobWriter:
    """Writes one queue's jobs exactly as RQ does, from the commands RQ recorded once for a template job.

    RQ's ``enqueue_call`` costs about half a millisecond of CPU per job (building a ``Job``, formatting and
    encoding some thirty fields); the commands it sends are the same for every job of a queue but for the
    job id, two timestamps, the serialized call and the description. So RQ records them once, here, and each
    job fills in those five values. ``tests/intake/test_queueing.py`` checks the result against RQ's own.
    """

    def __init__(self, queue: Queue, policy: QueuePolicy) -> None:
        self.serializer = queue.serializer
        recorder = queue.connection.pipeline(transaction=False)
        queue.enqueue_call(
            "spark.template",
            job_id=_TEMPLATE_ID,
            timeout=policy.job_timeout,
            ttl=policy.ttl,
            result_ttl=policy.result_ttl,
            failure_ttl=policy.failure_ttl,
            retry=Retry(max=policy.retries),
            description=_TEMPLATE_ID,
            pipeline=recorder,
        )
        self.template, self.count = self._template([command for command, _options in recorder.command_stack])
        recorder.reset()

    @staticmethod
    def _template(commands: Sequence[Sequence[object]]) -> tuple[list[bytes | Slot], int]:
        """Return recorded commands packed, as runs of constant bytes between slots to fill per job."""
        parts: list[bytes | Slot] = []
        template_id = _TEMPLATE_ID.encode()

        def constant(data: bytes) -> None:
            if parts and isinstance(parts[-1], bytes):
                parts[-1] += data
            else:
                parts.append(data)

        for command in commands:
            constant(argc(command))
            args = [encode(arg) for arg in command]
            for i, arg in enumerate(args):
                # HSET key field value ...: the values are at odd positions from 3 on.
                field = args[i - 1].decode() if args[0] == b"HSET" and i >= 3 and i % 2 == 1 else ""
                if field in _FILLED_FIELDS:
                    parts.append((b"", field, b""))
                elif template_id in arg:
                    prefix, _, suffix = arg.partition(template_id)
                    parts.append((prefix, _ID, suffix))
                else:
                    constant(bulk(arg))
        return parts, pack_commands(commands).count

    def pack(self, job_id: str, func: str, kwargs: dict[str, Any], description: str) -> Packed:
        """Return the script arguments that enqueue one job (in the format of ``pack_commands``)."""
        stamp = utcformat(now()).encode()
        values = {
            _ID: job_id.encode(),
            "created_at": stamp,
            "enqueued_at": stamp,
            "data": _compress(self.serializer.dumps((func, None, (), kwargs))),
            "description": description.encode(),
        }
        data = b"".join(
            part if isinstance(part, bytes) else bulk(part[0] + values[part[1]] + part[2])
            for part in self.template
        )
        return Packed(data, self.count)


class DeliveryQueue:
    """Puts a delivery's jobs on the RQ queues; the delivery id is recorded in the same atomic step."""

    def __init__(self, connection: redis.Redis) -> None:
        self.connection = connection
        self.names = tuple(POLICIES)
        # Built on first use: RQ asks the server's version while recording, and the app starts without Redis.
        self.writers: dict[str, JobWriter] = {}
        self._enqueue_once = Script(connection, _ENQUEUE_ONCE)

    def _writer(self, queue: str) -> JobWriter:
        writer = self.writers.get(queue)
        if writer is None:
            # Two threads may both build it; both get the same template.
            writer = self.writers[queue] = JobWriter(
                Queue(queue, connection=self.connection), POLICIES[queue]
            )
        return writer

    def enqueue(
        self, delivery_id: str, jobs: Sequence[JobSpec], also: Sequence[Sequence[object]] = ()
    ) -> Enqueued:
        """Queue ``jobs`` for ``delivery_id`` unless seen before; ``redis.RedisError`` if not stored.

        ``also``: further Redis commands to run in the same atomic step, only for a new delivery (the
        cancellation signals of ``bot.cancel.signal_commands``; ``SPARK.HMAX`` raises a hash field).
        """
        job_ids = tuple(delivery_id if len(jobs) == 1 else f"{delivery_id}-{i}" for i in range(len(jobs)))
        # The writes are replayed inside the script, after the duplicate check.
        writes = [
            self._writer(spec.queue).pack(job_id, spec.func, spec.kwargs, f"{spec.func} ({delivery_id})")
            for job_id, spec in zip(job_ids, jobs, strict=True)
        ]
        writes.append(
            pack_commands([*(("ZADD", QUEUED_KEY, time.time(), job_id) for job_id in job_ids), *also])
        )
        head = bulk(",".join(job_ids).encode()) + bulk(b"%d" % DELIVERY_TTL)
        stored = self._enqueue_once(
            DELIVERY_KEY.format(delivery_id).encode(),
            head + b"".join(w.data for w in writes),
            2 + sum(w.count for w in writes),
        )
        if not stored:
            return Enqueued(duplicate=True)
        return Enqueued(job_ids=job_ids)
