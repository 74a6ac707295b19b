"""What Spark last saw of a pull request (its head, its base, the paths it changes), to read ahead on.

An ``issue_comment`` webhook names neither the head commit nor the base branch, so a job learns them only
from its first round trip. A job that remembers them from the last time Spark looked (a review, a fix, an
earlier question) reads the files at that head and the config at that base in the same first round trip,
and keeps each read only where the pull request it then reads agrees (``matches_head``, ``matches_base``). A
wrong guess costs the wasted reads, never a wrong answer: commits are immutable, and a read at another
head or base is dropped and made again.

It also keeps what the config at that base said of failed checks (``ci.fix``, ``ci.checks``), so that a check
failing on the head seen gets its offer in the job's first round trip (``workers.flows.ci``), and which pull
request a head seen is the head of (``pull_of_head``: a ``workflow_job`` delivery names no pull request).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

import redis

from bot import keys
from bot.adapters.github_port import PullInfo
from bot.core.config import RepoConfig
from bot.redis_server import as_text

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
    # What the config at this base said of failed checks when Spark last read it (None: not read since the
    # base was seen): ``ci.fix`` and ``ci.checks``.
    ci_fix: str | None = None
    ci_checks: tuple[str, ...] = ()

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
        ci = data.get("ci")
        ci_fix, ci_checks = (str(ci["fix"]), tuple(str(c) for c in ci["checks"])) if ci else (None, ())
        return Seen(
            data["head"], data["base_repo"], data["base_ref"], paths, data.get("reviews"), ci_fix, ci_checks
        )
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
    config: RepoConfig | None = None,
) -> Seen:
    """Keep ``pull``'s head and base, with ``paths`` (None: the paths ``seen`` before), ``reviews`` (None:
    as ``seen`` said) and what ``config``, read at ``pull``'s base, says of failed checks (None: as ``seen``
    said, when the base is the same); return what is kept.

    ``seen`` is what was kept before: nothing is written when nothing changed, so a run of questions on one
    head writes once.
    """
    kept = tuple(paths[:MAX_PATHS]) if paths is not None else (seen.paths if seen is not None else ())
    if reviews is None and seen is not None:
        reviews = seen.reviews
    ci_fix: str | None = None
    ci_checks: tuple[str, ...] = ()
    if config is not None:
        ci_fix, ci_checks = config.ci_fix, config.ci_checks
    elif seen is not None and seen.matches_base(pull):
        ci_fix, ci_checks = seen.ci_fix, seen.ci_checks
    now = Seen(pull.head_sha, pull.base_repo, pull.base_ref, kept, reviews, ci_fix, ci_checks)
    if now == seen:
        return now
    document = {
        "head": now.head_sha,
        "base_repo": now.base_repo,
        "base_ref": now.base_ref,
        "paths": kept,
        "reviews": reviews,
        "ci": {"fix": ci_fix, "checks": list(ci_checks)} if ci_fix is not None else None,
    }
    with conn.pipeline() as pipe:
        pipe.set(keys.LAST_SEEN.format(pr_key), json.dumps(document), ex=keys.LAST_SEEN.seconds)
        if seen is None or seen.head_sha != now.head_sha:
            pipe.set(_head_key(pr_key, now.head_sha), pull.number, ex=keys.HEAD_PR.seconds)
        pipe.execute()
    return now


def _head_key(pr_key: str, head_sha: str) -> str:
    # The pull request's key is "installation:owner/repo#number": the head is the repository's.
    return keys.HEAD_PR.format(pr_key.rsplit("#", 1)[0], head_sha)


def pull_of_head(conn: redis.Redis, installation_id: int, repo: str, head_sha: str) -> int | None:
    """Return the number of the pull request whose head Spark last saw at ``head_sha``, or None."""
    raw = conn.get(keys.HEAD_PR.format(f"{installation_id}:{repo}", head_sha))
    text = as_text(raw) if isinstance(raw, bytes | str) else ""
    return int(text) if text.isdigit() else None


def committed(conn: redis.Redis, pr_key: str, pull: PullInfo, oid: str, paths: Sequence[str]) -> None:
    """Keep the head Spark's own commit ``oid`` moved ``pull`` to (no review reads it), with its ``paths``."""
    seen = recall(conn, pr_key)
    before = seen.paths if seen is not None and seen.base_repo == pull.base_repo else ()
    remember(conn, pr_key, replace(pull, head_sha=oid), list(dict.fromkeys([*before, *paths])), seen)
