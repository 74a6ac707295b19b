"""A commit's index made ready on this machine: found in the store, updated from the last one, or built.

Redis holds only coordination, per machine (each machine's store is its own): the commit of a repository
indexed last (``spark:indexed``, the base of the next incremental update) and a build lock
(``spark:index-build``), so two jobs never build the same commit; a job that finds the lock taken waits for
the other's listing, up to its bound. An update reads ``GET /compare`` (one round trip) and, in one parallel
round, the blobs the store lacks (those whose text the job already read, the files of a pull request read
at its head, are taken from it: their SHA names their bytes); when the change cannot be applied (a force
push, more files than GitHub lists, ``.gitattributes`` edited) the commit's archive is read instead.
"""

from __future__ import annotations

import secrets
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import redis

from bot import keys
from bot.adapters.github_port import ChangedFile, GitHubPort
from bot.index.build import (
    ArchiveRead,
    Change,
    Indexer,
    Listing,
    StaleAttributes,
    blob_sha,
    load_listing,
)
from bot.index.lookup import RepoIndex
from bot.index.store import LocalStore
from bot.redis_server import as_text

# GitHub's compare lists at most 300 files: a longer change may be cut, so the archive is read instead.
COMPARE_MAX_FILES = 300
# Blobs read at once during an update: a review's changed files in one round (40 at once, as its own reads).
BLOB_READERS = 48
# Texts a job has read already (a pull request's files at the head), offered to the index's update.
Held = Callable[[], Iterable[str]]
# How often a job waiting for another's build looks for its listing.
POLL_SECONDS = 0.05

_READERS = ThreadPoolExecutor(BLOB_READERS, thread_name_prefix="spark-index-blobs")


def machine() -> str:
    """Return this machine's name, which scopes the coordination keys of its store."""
    return socket.gethostname()


@dataclass(frozen=True, slots=True)
class Ready:
    """The index of a commit when ready (else None), and how it was made: what a review reports."""

    index: RepoIndex | None
    how: str  # "stored", "updated", "built", "busy" (another job builds it), "failed"
    detail: str = ""


def ensure(
    gh: GitHubPort,
    store: LocalStore,
    conn: redis.Redis,
    repo: str,
    commit: str,
    *,
    wait: float,
    indexer: Indexer | None = None,
    held: Held | None = None,
) -> Ready:
    """Return the index of ``repo`` at ``commit``, building it when this job holds the build lock.

    A job that finds another building it waits up to ``wait`` seconds for the listing, then answers
    ``busy``. Errors from GitHub answer ``failed`` with the reason: a review goes on without the index.
    """
    listing = load_listing(store, repo, commit)
    if listing is not None:
        return Ready(RepoIndex(store, repo, commit, listing), "stored")
    lock = keys.INDEX_BUILD.format(machine(), f"{repo}@{commit}")
    token = secrets.token_hex(8)
    if not conn.set(lock, token, nx=True, ex=keys.INDEX_BUILD.seconds):
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            listing = load_listing(store, repo, commit)
            if listing is not None:
                return Ready(RepoIndex(store, repo, commit, listing), "stored")
        return Ready(None, "busy", "another job is building the index")
    try:
        listing, how = _make(gh, store, conn, repo, commit, indexer or Indexer(store), held)
    except Exception as exc:  # a review proceeds without the index; the reason is reported, not raised
        return Ready(None, "failed", f"{type(exc).__name__}: {exc}")
    finally:
        if as_text(conn.get(lock) or b"") == token:
            conn.delete(lock)
    conn.set(keys.INDEXED.format(machine(), repo), commit, ex=keys.INDEXED.seconds)
    return Ready(RepoIndex(store, repo, commit, listing), how)


def _make(
    gh: GitHubPort,
    store: LocalStore,
    conn: redis.Redis,
    repo: str,
    commit: str,
    indexer: Indexer,
    held: Held | None = None,
) -> tuple[Listing, str]:
    last = conn.get(keys.INDEXED.format(machine(), repo))
    base_commit = as_text(last) if last else ""
    base = load_listing(store, repo, base_commit) if base_commit else None
    if base is not None:
        comparison = gh.compare(repo, base_commit, commit)
        if comparison.status in ("ahead", "identical") and len(comparison.files) < COMPARE_MAX_FILES:
            try:
                return update(gh, indexer, repo, commit, base, comparison.files, held), "updated"
            except StaleAttributes:
                pass
    return indexer.build(repo, commit, gh.archive(repo, commit)), "built"


def update(
    gh: GitHubPort,
    indexer: Indexer,
    repo: str,
    commit: str,
    base: Listing,
    files: Sequence[ChangedFile],
    held: Held | None = None,
) -> Listing:
    """Index ``commit`` from ``base`` and the files a compare (or a pull request's file list) names; a blob
    whose text ``held`` offers (its bytes hash to the blob's SHA) is not read again."""
    changes = [Change(f.path, f.status, f.blob, f.previous_path) for f in files]

    def read(shas: Sequence[str]) -> dict[str, bytes]:
        found = held_blobs(held, shas) if held is not None else {}
        rest = [sha for sha in shas if sha not in found]
        return found | dict(zip(rest, _READERS.map(lambda sha: gh.blob(repo, sha), rest), strict=True))

    return indexer.update(repo, commit, base, changes, read)


def held_blobs(held: Held, shas: Iterable[str]) -> dict[str, bytes]:
    """Return the blobs among ``shas`` that texts ``held`` offers, by SHA (a text whose bytes, as GitHub sent
    them, hash to a wanted SHA is that blob)."""
    wanted = set(shas)
    found: dict[str, bytes] = {}
    for text in held():
        data = text.encode("utf-8", "surrogateescape")
        sha = blob_sha(data)
        if sha in wanted:
            found[sha] = data
    return found


def warm(
    gh: GitHubPort, store: LocalStore, conn: redis.Redis, repo: str, indexer: Indexer | None = None
) -> str:
    """Index ``repo``'s default branch before its first review (an installation added it); return the commit.

    One request: the archive of the default branch, whose header names the commit indexed. "" when another
    job is warming it already.
    """
    lock = keys.INDEX_BUILD.format(machine(), f"{repo}@default")
    if not conn.set(lock, "warm", nx=True, ex=keys.INDEX_BUILD.seconds):
        return ""
    read = ArchiveRead()
    try:
        (indexer or Indexer(store)).build(repo, "", gh.archive(repo, ""), read=read)
    finally:
        conn.delete(lock)
    conn.set(keys.INDEXED.format(machine(), repo), read.commit, ex=keys.INDEXED.seconds)
    return read.commit
