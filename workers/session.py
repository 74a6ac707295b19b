"""The per-pull-request session in Redis: one JSON document per PR, kept 7 days from its last write."""

from __future__ import annotations

import redis
from redis.client import Pipeline

from bot import keys
from bot.cancel import transaction
from bot.core.session import Entry, Session


def load(conn: redis.Redis, pr_key: str) -> Session:
    """Return the pull request's session (empty when none was kept, or it expired)."""
    raw = conn.get(keys.SESSION.format(pr_key))
    return Session.from_json(raw if isinstance(raw, bytes | str) else None)


def record(conn: redis.Redis, pr_key: str, entry: Entry) -> Session:
    """Record ``entry`` (replacing the one with its id, so a job run again records once); return the session.

    Read and written in one transaction, so two jobs recording at once both land.
    """
    key = keys.SESSION.format(pr_key)

    def write(pipe: Pipeline) -> Session:
        raw = pipe.get(key)
        session = Session.from_json(raw if isinstance(raw, bytes | str) else None).with_entry(entry)
        pipe.multi()
        pipe.set(key, session.to_json(), ex=keys.SESSION.seconds)
        return session

    return transaction(conn, write, key)
