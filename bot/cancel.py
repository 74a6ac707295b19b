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
from typing import TypeVar, cast

import redis
from redis.client import Pipeline

from bot import keys
from bot.redis_server import as_text

KEY_PREFIX = keys.CANCEL.prefix
# The hash outlives any job by far; it only has to be there while jobs of that PR run.
KEY_TTL_SECONDS = keys.CANCEL.seconds
# Worst-case delay between a cancel and a running job noticing it (the target is one second).
DEFAULT_INTERVAL = 0.2


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


T = TypeVar("T")


def transaction(conn: redis.Redis, func: Callable[[Pipeline], T], *watched: str) -> T:
    """Run ``func`` as redis-py's ``Redis.transaction`` does (again whenever a watched key changed first).

    ``func`` reads under WATCH, calls ``pipe.multi()`` and queues its writes; its value is returned.
    """
    # redis-py types ``func`` as returning None, though ``value_from_callable`` returns its value.
    return cast(T, conn.transaction(func, *watched, value_from_callable=True))  # type: ignore[arg-type]


# The writers: one per signal. Each queues its commands on ``pipe``, a redis-py pipeline in MULTI mode, so the
# intake runs them in the transaction that stores the delivery's jobs and a job in a transaction of its own.
# ``current`` (for the two that raise an order) is the field's value read under WATCH before MULTI: a newer
# order wins, an older one arriving late never lowers it.


def stop(pipe: Pipeline, pr_key: str, *, at: float, by: str = "") -> None:
    """Cancel every started job of the pull request, and those queued before ``at`` (stop, PR closed)."""
    key = cancel_key(pr_key)
    pipe.hincrby(key, "all", 1)
    pipe.hset(key, mapping={"stopped_at": repr(at), "stopped_by": by})
    pipe.expire(key, KEY_TTL_SECONDS)


def ask_stop(pipe: Pipeline, pr_key: str, *, at: float, by: str) -> None:
    """Record that ``by`` asked to stop the PR's work; running jobs obey once they verify ``by`` may."""
    key = cancel_key(pr_key)
    pipe.hset(key, f"ask:stop:{by}", repr(at))
    pipe.expire(key, KEY_TTL_SECONDS)


def new_head(pipe: Pipeline, pr_key: str, head_sha: str) -> None:
    """Record the pull request's newest head: jobs working on any other head become stale."""
    key = cancel_key(pr_key)
    pipe.hset(key, "head", head_sha)
    pipe.expire(key, KEY_TTL_SECONDS)


def supersede_field(kind: str) -> str:
    """Return the field holding the newest order of a job ``kind`` (read it before ``supersede``)."""
    return f"kind:{kind}"


def supersede(pipe: Pipeline, pr_key: str, kind: str, order: int, *, current: int, by: str = "") -> None:
    """Make ``order`` the newest job of ``kind`` if it is newer than ``current``: older ones become stale."""
    key = cancel_key(pr_key)
    if order > current:
        pipe.hset(key, mapping={supersede_field(kind): order, f"by:{kind}": by})
    pipe.expire(key, KEY_TTL_SECONDS)


def ask_supersede_field(kind: str, by: str) -> str:
    """Return the field holding the newest job of ``kind`` that ``by`` asked for."""
    return f"ask:{kind}:{by}"


def ask_supersede(pipe: Pipeline, pr_key: str, kind: str, order: int, *, current: int, by: str) -> None:
    """Record that ``by`` asked for a newer job of ``kind`` (``order``); running ones obey once verified."""
    key = cancel_key(pr_key)
    if order > current:
        pipe.hset(key, ask_supersede_field(kind, by), order)
    pipe.expire(key, KEY_TTL_SECONDS)


def cancel_pr(conn: redis.Redis, pr_key: str, *, at: float | None = None, by: str = "") -> None:
    """Stop the pull request's work now, from a job (``/spark stop`` by someone verified to be allowed)."""
    with conn.pipeline() as pipe:
        stop(pipe, pr_key, at=time.time() if at is None else at, by=by)
        pipe.execute()


@dataclass(frozen=True, slots=True)
class _Registered:
    order: int
    generation: int
    stopped_at: float


def _register(
    conn: redis.Redis, pr_key: str, kind: str, order: int, *, claim: bool, by: str = "", head_sha: str = ""
) -> _Registered:
    """Read the PR's state and, with ``claim``, supersede older jobs of ``kind``: one transaction.

    ``order`` 0 means "newer than any so far". WATCH makes the read and the raise one step: two jobs starting
    at once agree on which one is newest (redis-py's ``transaction`` runs it again if the hash changed).
    A job whose head is already stale claims nothing: two workers may start a burst's jobs in either order,
    and the older push's job starting last must not supersede the newest head's.
    """
    key = cancel_key(pr_key)

    def register(pipe: Pipeline) -> _Registered:
        current, generation, stopped_at, head = pipe.hmget(
            key, supersede_field(kind), "all", "stopped_at", "head"
        )
        newest = int(current or 0)
        registered = _Registered(order or newest + 1, int(generation or 0), float(stopped_at or 0))
        stale = bool(head_sha and head and as_text(head) != head_sha)
        pipe.multi()
        if claim and not stale:
            supersede(pipe, pr_key, kind, registered.order, current=newest, by=by)
        return registered

    return transaction(conn, register, key)


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
        registered = _register(conn, pr_key, kind, order, claim=claim, head_sha=head_sha)
        stopped_while_queued = enqueued_at is not None and registered.stopped_at >= enqueued_at > 0
        token = cls(
            conn=conn,
            pr_key=pr_key,
            kind=kind,
            order=registered.order,
            generation=registered.generation,
            head_sha=head_sha,
            interval=interval,
            reason=STOPPED if stopped_while_queued else "",
            since=enqueued_at if enqueued_at is not None and enqueued_at > 0 else time.time(),
        )
        if stopped_while_queued:
            token.by = as_text(conn.hget(cancel_key(pr_key), "stopped_by"))
        return token

    def claim(self, by: str = "") -> None:
        """Supersede older jobs of this kind now (the job's requester, ``by``, turned out to be allowed)."""
        if self.conn is not None:
            registered = _register(
                self.conn, self.pr_key, self.kind, self.order, claim=True, by=by, head_sha=self.head_sha
            )
            self.order = registered.order

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
        state = {as_text(k): as_text(v) for k, v in self.conn.hgetall(cancel_key(self.pr_key)).items()}
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
