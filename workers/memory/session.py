"""The per-pull-request session in Redis: one JSON document per PR, kept 7 days from its last write.

Flows record each command as it starts (``start``) and what came of it (``update``); a follow-up fix reads
the history (``bot.core.session.history_text``). Every write is one transaction, so concurrent jobs on one
pull request never lose each other's entries, and writing an entry again replaces it (a re-run records once).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis
from redis.client import Pipeline

from bot import keys
from bot.cancel import transaction
from bot.core.session import Entry, Session


def load(conn: redis.Redis, pr_key: str) -> Session:
    """Return the pull request's session (empty when none was kept, or it expired)."""
    return decode(conn.get(keys.SESSION.format(pr_key)))


def record(conn: redis.Redis, pr_key: str, entry: Entry) -> Session:
    """Record ``entry`` in place of the one with its id (a job run again records once); return the session."""
    return _change(conn, pr_key, lambda session: session.with_entry(entry))


def start(conn: redis.Redis, pr_key: str, entry: Entry) -> Session:
    """Record ``entry`` unless its id is already there (a re-run keeps what the first run recorded)."""
    return _change(conn, pr_key, lambda s: s if s.get(entry.id) is not None else s.with_entry(entry))


def update(conn: redis.Redis, pr_key: str, entry_id: str, **changes: Any) -> Session:
    """Change the fields of the entry ``entry_id``, if the session holds it (nothing is written otherwise)."""
    return _change(conn, pr_key, lambda session: session.updated(entry_id, **changes))


def _change(conn: redis.Redis, pr_key: str, change: Callable[[Session], Session]) -> Session:
    key = keys.SESSION.format(pr_key)

    def write(pipe: Pipeline) -> Session:
        before = decode(pipe.get(key))
        after = change(before)
        pipe.multi()
        if after != before:
            pipe.set(key, after.to_json(), ex=keys.SESSION.seconds)
        return after

    return transaction(conn, write, key)


def decode(raw: object) -> Session:
    """Return the session a stored value holds (empty for None or a value that is not one)."""
    return Session.from_json(raw if isinstance(raw, bytes | str) else None)
