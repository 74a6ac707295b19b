"""The index a job works with: made ready within a bound, then asked for a change's or a question's context.

A job starts :func:`open_index` while its first GitHub reads are out; it waits at most
``SPARK_INDEX_WAIT_SECONDS`` for the head's index. A build that takes longer goes on in the background (the
next job finds it stored) and this job proceeds without context from other files and says so.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

import redis

from bot.adapters.github_port import GitHubPort
from bot.core import crossref
from bot.core.crossref import CrossContext
from bot.core.secrets import SecretValues
from bot.core.types import FileDiff, FileStatus
from bot.index.build import Indexer, load_listing
from bot.index.lookup import RepoIndex
from bot.index.store import LocalStore, store_path
from bot.index.warm import Held, Ready, ensure, warm
from bot.settings import Settings

# Index builds run here, so a job can stop waiting while its build goes on.
_BUILDS = ThreadPoolExecutor(2, thread_name_prefix="spark-index")
# Repositories warmed at most per installation event (the others are indexed at their first pull request).
WARM_MAX = 20


_STORES: dict[tuple[str, int], LocalStore] = {}
_STORES_LOCK = threading.Lock()


def local_store(settings: Settings) -> LocalStore:
    """Return this process's handle on the machine's store (one per data directory and cap)."""
    key = (str(store_path(settings.spark_data_dir).resolve()), settings.spark_index_max_bytes)
    with _STORES_LOCK:
        if key not in _STORES:
            _STORES[key] = LocalStore(store_path(settings.spark_data_dir), settings.spark_index_max_bytes)
        return _STORES[key]


@dataclass(frozen=True, slots=True)
class PullIndex:
    """A pull request's head index (None when not ready) and its base's when stored; why, when missing."""

    head: RepoIndex | None
    base: RepoIndex | None
    note: str = ""
    # The job's secret values: what the context redacts is removed by value from the job's posts too.
    secrets: SecretValues | None = None

    def _shown(self, context: CrossContext) -> CrossContext:
        if self.secrets is not None:
            self.secrets.add(context.secret_values)
        return context

    def for_change(
        self, files: Sequence[FileDiff], budget: int, *, references_first: bool = True
    ) -> CrossContext:
        """Return the context from other files for a change to ``files``, within ``budget`` tokens."""
        if self.head is None or budget <= 0:
            return crossref.NO_CONTEXT
        paths = [f.path for f in files]
        head = self.head.symbols(paths)
        base = self.base.symbols([f.old_path or f.path for f in files]) if self.base is not None else {}
        what = crossref.touched(files, head, base)
        return self._shown(crossref.choose(files, what, self.head, budget, references_first=references_first))

    def for_fix(self, path: str, file: FileDiff | None, instruction: str, budget: int) -> CrossContext:
        """Return the context a fix of ``path`` needs: the definitions of what the file uses (its changed
        lines' names first), and the uses of what the pull request or the instruction changes there."""
        if self.head is None or budget <= 0:
            return crossref.NO_CONTEXT
        head = self.head.symbols([path])
        base = self.base.symbols([file.old_path or path]) if self.base is not None and file else {}
        what = crossref.touched([file], head, base) if file is not None else crossref.Touched({}, ())
        mine = head.get(path)
        named = [n for n in crossref.asked(instruction) if mine is not None and mine.defines(n)]
        changed = {
            **what.changed,
            **dict.fromkeys([n for n in named if n not in what.changed], "asked about"),
        }
        uses = list(what.used)
        if mine is not None:
            own = {d.name for d in mine.definitions}
            uses += sorted(
                (n for n in mine.references if n not in own and n not in uses), key=lambda n: -len(n)
            )
        what = crossref.Touched(changed, tuple(uses[: crossref.MAX_NAMES]))
        target = file or FileDiff(path, None, FileStatus.MODIFIED)  # the file itself is not context
        return self._shown(crossref.choose([target], what, self.head, budget, references_first=False))

    def for_question(self, question: str, budget: int) -> CrossContext:
        """Return the uses and definitions of the names ``question`` asks about that the repository holds."""
        if self.head is None or budget <= 0:
            return crossref.NO_CONTEXT
        names = crossref.asked(question)
        defined = self.head.paths_naming(names, defines=True) if names else {}
        known = [n for n in names if n in defined]
        if not known:
            return crossref.NO_CONTEXT
        return self._shown(crossref.choose([], crossref.about(known), self.head, budget))

    def texts(self, paths: Iterable[str]) -> dict[str, str]:
        """Return the head's texts of ``paths`` (quotes from context are found in them)."""
        return self.head.texts(paths) if self.head is not None else {}


NO_INDEX = PullIndex(None, None, "")


def open_index(
    gh: GitHubPort, settings: Settings, conn: redis.Redis, repo: str, head: str, held: Held | None = None
) -> Future[Ready]:
    """Start making ``repo``'s index at ``head`` ready on this machine (in the background); ``held`` offers
    texts the job read at ``head`` already (an update takes the blobs it lacks from them where they match)."""
    store = local_store(settings)
    indexer = Indexer(store, max_file_bytes=settings.spark_index_max_file_bytes)
    wait = settings.spark_index_wait_seconds
    return _BUILDS.submit(ensure, gh, store, conn, repo, head, wait=wait, indexer=indexer, held=held)


def ready_index(
    started: Future[Ready], settings: Settings, repo: str, base: str = "", secrets: SecretValues | None = None
) -> PullIndex:
    """Return the head's index when ready, waiting at most the bound; else a note of what is missing.

    ``secrets`` (the job's) learns the values each context it gives redacts.
    """
    try:
        ready = started.result(timeout=settings.spark_index_wait_seconds)
    except FutureTimeout:
        return PullIndex(None, None, "the repository index is still being built; no context from other files")
    if ready.index is None:
        why = "still being built" if ready.how == "busy" else f"unavailable ({ready.detail})"
        return PullIndex(None, None, f"the repository index is {why}; no context from other files")
    store = ready.index.store
    listing = load_listing(store, repo, base) if base else None
    return PullIndex(ready.index, RepoIndex(store, repo, base, listing) if listing else None, secrets=secrets)


def warm_repositories(
    gh: GitHubPort, settings: Settings, conn: redis.Redis, repos: Sequence[str]
) -> list[Future[str]]:
    """Start indexing the default branch of ``repos`` (an installation added them) in the background."""
    store = local_store(settings)
    indexer = Indexer(store, max_file_bytes=settings.spark_index_max_file_bytes)
    return [_BUILDS.submit(warm, gh, store, conn, repo, indexer) for repo in repos[:WARM_MAX]]
