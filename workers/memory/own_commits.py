"""Spark's own commits: the review skips their push, even when its webhook arrives before the record."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import redis

from bot import keys
from bot.adapters.github_port import PullInfo
from workers.memory import last_seen

# How long the review of a push waits for a commit of Spark's under way on the pull request to be recorded.
PENDING_WAIT_SECONDS = 20.0


@contextmanager
def committing(conn: redis.Redis, pr_key: str) -> Iterator[None]:
    """Mark a commit of Spark's under way on this pull request until the block ends (or the mark expires)."""
    key = keys.COMMITTING.format(pr_key)
    conn.set(key, "1", ex=keys.COMMITTING.seconds)
    try:
        yield
    finally:
        conn.delete(key)


def record(conn: redis.Redis, oid: str) -> None:
    """Remember that ``oid`` is a commit Spark made (inside ``committing``, before its mark goes)."""
    conn.set(keys.OWN_COMMIT.format(oid), "1", ex=keys.OWN_COMMIT.seconds)


def made(conn: redis.Redis, pr_key: str, pull: PullInfo, oid: str, paths: Sequence[str]) -> None:
    """Record Spark's new commit ``oid`` on ``pull``'s branch (changing ``paths``) as its own, and as the
    head Spark last saw: no review reads it, and the next question or fix reads ahead on it."""
    record(conn, oid)
    last_seen.committed(conn, pr_key, pull, oid, paths)


def is_own(conn: redis.Redis, pr_key: str, head_sha: str, *, wait: float = PENDING_WAIT_SECONDS) -> bool:
    """Return whether ``head_sha`` is Spark's own commit, waiting for one under way on the pull request."""
    # GitHub (and the sandbox) can deliver the push of a commit before the job that made it has recorded it.
    deadline = time.monotonic() + wait
    own = keys.OWN_COMMIT.format(head_sha)
    while True:
        if conn.exists(own):
            return True
        if not conn.exists(keys.COMMITTING.format(pr_key)):
            return bool(conn.exists(own))  # recorded just before the mark went
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
