"""Cooperative cancellation: generations in Redis, keyed by pull request, that running jobs check.

RQ's stop command never reaches a ``SimpleWorker``'s job (there is no work horse to kill), so a job cancels
itself: it takes a ``CancelToken`` when it starts and checks it between steps and between streamed chunks.
One Redis hash per pull request holds what makes a running job stale:

- ``all``: bumped by ``/spark stop`` and by the PR closing; every job that started before is cancelled.
- ``stopped_at``: when that happened (epoch seconds); a job queued before it and started after is cancelled
  at once, so a stop also reaches work still waiting in the queue.
- ``kind:<kind>``: the newest ``order`` (e.g. the comment id) that started a job of that kind; a job whose
  order is lower was superseded (a newer ``/spark fix`` cancels the running one).
- ``head``: the newest head SHA seen; a job working on another head is stale (a push steers it).
- ``stopped_by`` / ``by:<kind>``: who stopped the PR's work or started the newest job of a kind, so a
  cancelled job can tell its requester who stopped it.
- ``ask:stop:<login>`` (when) and ``ask:<kind>:<login>`` (the order): a stop or a newer job asked for by
  someone whose right to it the intake cannot see (a ``MEMBER`` may have read access only). A running job
  honours an ask only after its ``verify`` callback (a permission check through GitHub's API) says yes.

Checks are throttled (``interval``) so a stream of thousands of tokens costs a handful of round trips.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

KEY_PREFIX = "spark:cancel:"
# The hash outlives any job by far; it only has to be there while jobs of that PR run.
KEY_TTL_SECONDS = 7 * 24 * 3600
# Worst-case delay between a cancel and a running job noticing it (the target is one second).
DEFAULT_INTERVAL = 0.2

# Atomically raise ``kind:<kind>`` to max(current, order) and return the hash's state, so two jobs starting
# at once agree on which one is newest.
_SUPERSEDE = """
local field = 'kind:' .. ARGV[1]
local order = tonumber(ARGV[2])
local current = tonumber(redis.call('HGET', KEYS[1], field) or '0')
if order == 0 then order = current + 1 end
if ARGV[4] == '1' and order > current then
  redis.call('HSET', KEYS[1], field, order, 'by:' .. ARGV[1], ARGV[5])
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {order, redis.call('HGET', KEYS[1], 'all') or '0', redis.call('HGET', KEYS[1], 'stopped_at') or '0'}
"""


class Cancelled(Exception):
    """Raised by ``CancelToken.check`` when the job's work is no longer wanted; ``by``: who wanted that."""

    def __init__(self, reason: str, by: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.by = by


STOPPED = "stopped: /spark stop or the pull request was closed"
# A running job's check of whether ``login`` may take ``action`` ("stop", or a job kind such as "fix").
Verify = Callable[[str, str], bool]


def cancel_key(pr_key: str) -> str:
    """Return the Redis hash holding the cancellation state of one pull request."""
    return KEY_PREFIX + pr_key


def cancel_pr(conn: redis.Redis, pr_key: str, *, at: float | None = None, by: str = "") -> int:
    """Cancel every started job of the pull request (``/spark stop``, PR closed); return the generation.

    Like ``supersede`` and ``note_head``, this needs only Redis, so the webhook intake can call it the moment
    the event arrives instead of queueing the cancel behind the very job it should stop.
    """
    key = cancel_key(pr_key)
    with conn.pipeline() as pipe:
        pipe.hincrby(key, "all", 1)
        pipe.hset(key, mapping={"stopped_at": repr(time.time() if at is None else at), "stopped_by": by})
        pipe.expire(key, KEY_TTL_SECONDS)
        generation, _, _ = pipe.execute()
    return int(generation)


def supersede(conn: redis.Redis, pr_key: str, kind: str, order: int = 0) -> tuple[int, int]:
    """Mark ``order`` as the newest job of ``kind`` on the PR; return (that order, the PR's generation).

    Call it at intake too (e.g. with the new ``/spark fix`` comment's id): a single busy worker cannot run the
    newer job until the older one ends, so the older one must learn it is stale from Redis, not from a job.
    """
    new_order, generation, _ = _register(conn, pr_key, kind, order)
    return new_order, generation


def _register(
    conn: redis.Redis, pr_key: str, kind: str, order: int, *, claim: bool = True, by: str = ""
) -> tuple[int, int, float]:
    result = conn.eval(
        _SUPERSEDE, 1, cancel_key(pr_key), kind, str(order), str(KEY_TTL_SECONDS), "1" if claim else "0", by
    )
    new_order, generation, stopped_at = result
    return int(new_order), int(generation), float(stopped_at)


def signal_commands(
    kind: str, pr_key: str, *, job_kind: str = "", value: str | int = "", now: float, by: str = ""
) -> list[tuple[object, ...]]:
    """Return the Redis commands that raise one intake signal, to run with the delivery's enqueue.

    ``supersede`` (``value``: the newer job's order; ``SPARK.HMAX`` only raises it), ``stop``, or ``head``
    (``value``: the new head SHA): the same fields ``supersede``, ``cancel_pr`` and ``note_head`` write.
    ``ask-stop`` and ``ask-supersede`` record what ``by`` asked for; running jobs verify it before obeying.
    """
    key = cancel_key(pr_key)
    if kind == "supersede":
        commands: list[tuple[object, ...]] = [
            ("SPARK.HMAX", key, f"kind:{job_kind}", int(value)),
            ("HSET", key, f"by:{job_kind}", by),
        ]
    elif kind == "stop":
        commands = [("HINCRBY", key, "all", 1), ("HSET", key, "stopped_at", repr(now), "stopped_by", by)]
    elif kind == "ask-stop":
        commands = [("HSET", key, f"ask:stop:{by}", repr(now))]
    elif kind == "ask-supersede":
        commands = [("SPARK.HMAX", key, f"ask:{job_kind}:{by}", int(value))]
    elif kind == "head":
        commands = [("HSET", key, "head", str(value))]
    else:
        raise ValueError(f"unknown cancellation signal {kind!r}")
    return [*commands, ("EXPIRE", key, KEY_TTL_SECONDS)]


def note_head(conn: redis.Redis, pr_key: str, head_sha: str) -> None:
    """Record the pull request's newest head: jobs working on any other head become stale."""
    key = cancel_key(pr_key)
    with conn.pipeline() as pipe:
        pipe.hset(key, "head", head_sha)
        pipe.expire(key, KEY_TTL_SECONDS)
        pipe.execute()


@dataclass
class CancelToken:
    """A running job's cancellation state; ``cancelled()`` asks Redis at most once per ``interval``."""

    conn: redis.Redis | None
    pr_key: str
    kind: str
    order: int
    generation: int
    head_sha: str = ""
    interval: float = DEFAULT_INTERVAL
    clock: Callable[[], float] = time.monotonic
    reason: str = ""
    # Who made the job stale (a login), when someone did.
    by: str = ""
    # Asks older than this (epoch seconds: when the job was queued) are not about this job.
    since: float = 0.0
    # Set by the job once it can check permissions; until then asks wait (they are not refused).
    verify: Verify | None = None
    _checked_at: float = field(default=float("-inf"), repr=False)
    _verified: dict[tuple[str, str], bool] = field(default_factory=dict, repr=False)

    @classmethod
    def start(
        cls,
        conn: redis.Redis,
        pr_key: str,
        kind: str,
        *,
        order: int = 0,
        head_sha: str = "",
        interval: float = DEFAULT_INTERVAL,
        enqueued_at: float | None = None,
        claim: bool = True,
    ) -> CancelToken:
        """Register a job of ``kind`` on the PR, superseding older ones; ``order`` 0 means "newest".

        ``enqueued_at`` (epoch seconds) lets a stop that came while the job waited in the queue cancel it.
        With ``claim=False`` the job does not supersede anything until it calls ``claim()`` (after it has
        checked that its requester may act).
        """
        new_order, generation, stopped_at = _register(conn, pr_key, kind, order, claim=claim)
        stopped_while_queued = enqueued_at is not None and stopped_at >= enqueued_at > 0
        token = cls(
            conn=conn,
            pr_key=pr_key,
            kind=kind,
            order=new_order,
            generation=generation,
            head_sha=head_sha,
            interval=interval,
            reason=STOPPED if stopped_while_queued else "",
            since=enqueued_at if enqueued_at is not None and enqueued_at > 0 else time.time(),
        )
        if stopped_while_queued:
            token.by = _text(conn.hget(cancel_key(pr_key), "stopped_by"))
        return token

    def claim(self, by: str = "") -> None:
        """Supersede older jobs of this kind now (the job's requester, ``by``, turned out to be allowed)."""
        if self.conn is not None:
            self.order, _, _ = _register(self.conn, self.pr_key, self.kind, self.order, by=by)

    @classmethod
    def never(cls) -> CancelToken:
        """Return a token that is never cancelled (one-shot CLI runs, tests of pure steps)."""
        return cls(conn=None, pr_key="", kind="", order=0, generation=0)

    def cancelled(self) -> bool:
        """Return True once the job is stale; asks Redis at most once per ``interval`` seconds."""
        if self.reason:
            return True
        if self.conn is None:
            return False
        now = self.clock()
        if now - self._checked_at < self.interval:
            return False
        self._checked_at = now
        self.reason = self._stale_reason()
        return bool(self.reason)

    def check(self) -> None:
        """Raise ``Cancelled`` if the job is stale (call between steps and between streamed chunks)."""
        if self.cancelled():
            raise self.error()

    def error(self) -> Cancelled:
        """Return the exception that says why (and by whom) this job was cancelled."""
        return Cancelled(self.reason or "cancelled", self.by)

    def _stale_reason(self) -> str:
        assert self.conn is not None
        state = {_text(k): _text(v) for k, v in self.conn.hgetall(cancel_key(self.pr_key)).items()}
        if int(state.get("all") or 0) > self.generation:
            self.by = state.get("stopped_by", "")
            return STOPPED
        if int(state.get(f"kind:{self.kind}") or 0) > self.order:
            self.by = state.get(f"by:{self.kind}", "")
            return f"superseded by a newer {self.kind}"
        head = state.get("head", "")
        if head and self.head_sha and head != self.head_sha:
            return f"the head moved from {self.head_sha[:7]} to {head[:7]}"
        return self._granted_ask(state)

    def _granted_ask(self, state: dict[str, str]) -> str:
        """Return the reason of the first ask (a stop, a newer job of this kind) whose asker may make it."""
        if self.verify is None:
            return ""
        for field_name, value in state.items():
            if not field_name.startswith("ask:") or field_name.count(":") < 2:
                continue
            _, action, login = field_name.split(":", 2)
            if action == "stop" and float(value or 0) >= self.since and self._allowed(login, "stop"):
                self.by = login
                return STOPPED
            if action == self.kind and int(value or 0) > self.order and self._allowed(login, action):
                self.by = login
                return f"superseded by a newer {self.kind}"
        return ""

    def _allowed(self, login: str, action: str) -> bool:
        """Return (once per login and action) whether ``login`` may ``action``: one permission check."""
        key = (login, action)
        if key not in self._verified:
            assert self.verify is not None
            self._verified[key] = self.verify(login, action)
        return self._verified[key]


def _text(value: bytes | str | None) -> str:
    return value.decode() if isinstance(value, bytes) else (value or "")
