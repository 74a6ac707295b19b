"""Per-installation concurrency cap: one busy installation cannot take every worker of the fleet.

Each running job holds a slot in a Redis sorted set per installation (member: job id, score: when the slot
lapses). A worker that dequeues a job whose installation already holds ``limit`` slots puts the job back at
the tail of its queue in the same atomic step and dequeues the next one, so other installations' jobs run
meanwhile. Slots lapse after the job's timeout, so a worker killed with ``kill -9`` cannot leak one forever.
Why a cap and not a token bucket at intake: GitHub's write limits (80 content writes per minute) are per
installation, and what starves others is long jobs holding workers, not deliveries arriving.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import redis
from rq import Queue
from rq.job import Job

from bot import keys
from bot.adapters.ratelimit import WriteLimits

SLOTS_KEY = keys.INSTALLATION_SLOTS.pattern
# Set (expiring) while GitHub has asked this installation's calls to wait (a rate limit, see workers/jobs.py):
# its jobs stay queued until then, and other installations' jobs run meanwhile.
PAUSE_KEY = keys.INSTALLATION_PAUSE.pattern
# Margin past a job's timeout before its slot lapses (the worker's own heartbeat TTL uses the same 60 s).
LAPSE_MARGIN_SECONDS = 60

# KEYS[1] slots set, KEYS[2] queue list, KEYS[3] RQ's intermediate list (a one-queue worker dequeues with
# LMOVE into it), KEYS[4] the installation's pause key. ARGV: job id, now, lapse time, limit.
# Returns 1 when the job holds a slot, 0 when it went back to the tail of its queue.
_ACQUIRE_OR_DEFER = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
local paused = redis.call('EXISTS', KEYS[4]) == 1
local held = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not paused and (held or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[4])) then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  redis.call('EXPIRE', KEYS[1], math.ceil(ARGV[3] - ARGV[2]) + 1)
  return 1
end
redis.call('LREM', KEYS[3], 1, ARGV[1])
redis.call('RPUSH', KEYS[2], ARGV[1])
return 0
"""


# KEYS[1] the installation's writes (member: a unique id, score: when, wall-clock seconds).
# ARGV: now, per minute, per hour, member. Returns "0" once the write is recorded, else the seconds to wait
# (as a string: Lua would truncate a number to an integer).
_RESERVE_WRITE = """
local now, per_minute, per_hour = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 3600)
local wait = 0
local in_hour = redis.call('ZCARD', KEYS[1])
if in_hour >= per_hour then
  local oldest = redis.call('ZRANGE', KEYS[1], in_hour - per_hour, in_hour - per_hour, 'WITHSCORES')
  wait = tonumber(oldest[2]) + 3600 - now
end
local in_minute = redis.call('ZCOUNT', KEYS[1], '(' .. (now - 60), '+inf')
if in_minute >= per_minute then
  local first = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. (now - 60), '+inf', 'WITHSCORES', 'LIMIT',
                           in_minute - per_minute, 1)
  wait = math.max(wait, tonumber(first[2]) + 60 - now)
end
if wait > 0 then
  return tostring(wait)
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('EXPIRE', KEYS[1], 3601)
return '0'
"""


class SharedWriteBudget:
    """One installation's write budget counted in Redis, so every worker process and machine shares it.

    GitHub counts an installation's content-creating requests (80 a minute, 500 an hour) wherever they come
    from: a budget per process would let two workers spend twice the minute's budget and meet GitHub's
    secondary limit, which asks for a minute's wait.
    """

    def __init__(self, conn: redis.Redis, installation: int, limits: WriteLimits) -> None:
        self.key = keys.INSTALLATION_WRITES.format(installation)
        self.limits = limits
        self._script = conn.register_script(_RESERVE_WRITE)

    def reserve(self, now: float) -> float:
        """Record a write at ``now`` (wall-clock seconds) and return 0, or return how long to wait first."""
        args: list[str | int] = [repr(now), self.limits.per_minute, self.limits.per_hour, uuid.uuid4().hex]
        return float(self._script(keys=[self.key], args=args))


def pause_installation(conn: redis.Redis, installation: int, seconds: float) -> None:
    """Hold ``installation``'s jobs in their queues for ``seconds`` (the key expires by itself)."""
    conn.set(PAUSE_KEY.format(installation), "1", px=max(1, int(seconds * 1000)))


def installation_of(job: Job) -> int | None:
    """Return the installation id a job acts for (its ``pr`` ref or ``installation_id``), or None."""
    kwargs: Any = job.kwargs
    if not isinstance(kwargs, dict):
        return None
    pr = kwargs.get("pr")
    value = pr.get("installation_id") if isinstance(pr, dict) else kwargs.get("installation_id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class InstallationSlots:
    """At most ``limit`` running jobs per installation across every worker sharing this Redis."""

    def __init__(self, conn: redis.Redis, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the per-installation job limit must be at least 1, got {limit}")
        self.conn = conn
        self.limit = limit
        self._acquire_or_defer = conn.register_script(_ACQUIRE_OR_DEFER)

    def acquire_or_defer(self, job: Job, queue: Queue) -> bool:
        """Take a slot for ``job`` (True), or push it back to the tail of ``queue`` (False)."""
        installation = installation_of(job)
        if installation is None:
            return True  # nothing to be fair about: installation events and the like run at once
        now = time.time()
        lapse = now + (job.timeout or 180) + LAPSE_MARGIN_SECONDS
        args: list[str | float | int] = [job.id, now, lapse, self.limit]
        keys = [
            SLOTS_KEY.format(installation),
            queue.key,
            queue.intermediate_queue_key,
            PAUSE_KEY.format(installation),
        ]
        return bool(self._acquire_or_defer(keys=keys, args=args))

    def release(self, job: Job) -> None:
        """Give back ``job``'s slot (a no-op for a job that held none)."""
        installation = installation_of(job)
        if installation is not None:
            self.conn.zrem(SLOTS_KEY.format(installation), job.id)

    def running(self, installation: int) -> int:
        """Return how many jobs of ``installation`` hold a slot now."""
        key = SLOTS_KEY.format(installation)
        return int(self.conn.zcount(key, time.time(), "+inf"))
