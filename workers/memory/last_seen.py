"""What Spark last saw of a pull request (its head, its base, the paths it changes), to read ahead on.

An ``issue_comment`` webhook names neither the head commit nor the base branch, so a job learns them only
from its first round trip. A job that remembers them from the last time Spark looked (a review, a fix, an
earlier question) reads the files at that head and the config at that base in the same first round trip,
and keeps each read only where the pull request it then reads agrees (``matches_head``, ``matches_base``). A
wrong guess costs the wasted reads, never a wrong answer: commits are immutable, and a read at another
head or base is dropped and made again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

import redis

from bot import keys
from bot.adapters.github_port import PullInfo

# The paths kept: enough to name the files a question or fix is likely to need, not a large PR's listing.
MAX_PATHS = 100


@dataclass(frozen=True, slots=True)
class Seen:
    """A pull request's head commit, base repository and branch, and changed paths, as last seen."""

    head_sha: str
    base_repo: str
    base_ref: str
    paths: tuple[str, ...] = ()
    # Whether the last review job went on to review (None: no review job has looked yet). A review reads its
    # files, diff and threads ahead only where the last one did: a repository with reviews off pays nothing.
    reviews: bool | None = None

    def matches_head(self, pull: PullInfo) -> bool:
        """Return whether ``pull`` is still at the head seen (a read there is a read of its head)."""
        return bool(self.head_sha) and pull.head_sha == self.head_sha and pull.base_repo == self.base_repo

    def matches_base(self, pull: PullInfo) -> bool:
        """Return whether ``pull`` still merges into the base seen (its config is read from there)."""
        return pull.base_repo == self.base_repo and pull.base_ref == self.base_ref


def recall(conn: redis.Redis, pr_key: str) -> Seen | None:
    """Return what was last seen of the pull request, or None (never seen, expired, or unreadable)."""
    raw = conn.get(keys.LAST_SEEN.format(pr_key))
    if not isinstance(raw, bytes | str):
        return None
    try:
        data = json.loads(raw)
        paths = tuple(data["paths"][:MAX_PATHS])
        return Seen(data["head"], data["base_repo"], data["base_ref"], paths, data.get("reviews"))
    except (ValueError, KeyError, TypeError):
        return None


def remember(
    conn: redis.Redis,
    pr_key: str,
    pull: PullInfo,
    paths: Sequence[str] | None,
    seen: Seen | None = None,
    *,
    reviews: bool | None = None,
) -> Seen:
    """Keep ``pull``'s head and base, with ``paths`` (None: the paths ``seen`` before) and ``reviews`` (None:
    as ``seen`` said); return what is kept.

    ``seen`` is what was kept before: nothing is written when nothing changed, so a run of questions on one
    head writes once.
    """
    kept = tuple(paths[:MAX_PATHS]) if paths is not None else (seen.paths if seen is not None else ())
    if reviews is None and seen is not None:
        reviews = seen.reviews
    now = Seen(pull.head_sha, pull.base_repo, pull.base_ref, kept, reviews)
    if now == seen:
        return now
    document = {
        "head": now.head_sha,
        "base_repo": now.base_repo,
        "base_ref": now.base_ref,
        "paths": kept,
        "reviews": reviews,
    }
    conn.set(keys.LAST_SEEN.format(pr_key), json.dumps(document), ex=keys.LAST_SEEN.seconds)
    return now


def committed(conn: redis.Redis, pr_key: str, pull: PullInfo, oid: str, paths: Sequence[str]) -> None:
    """Keep the head Spark's own commit ``oid`` moved ``pull`` to (no review reads it), with its ``paths``."""
    seen = recall(conn, pr_key)
    before = seen.paths if seen is not None and seen.base_repo == pull.base_repo else ()
    remember(conn, pr_key, replace(pull, head_sha=oid), list(dict.fromkeys([*before, *paths])), seen)
