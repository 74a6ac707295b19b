"""Reads started before the pull request is read, on what Spark last saw of it (``workers.memory.last_seen``).

A comment's webhook names neither the head nor the base, so a flow reads the pull request first; files at
its head and the config at its base would wait a round trip for it. Started ahead on the head and base last
seen, they leave with the pull request instead, and each is kept only where the pull request then agrees
(``file``, ``repo_config``); the rest is read once it is known, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from bot.adapters.github_port import GitHubPort, PullInfo
from bot.core.config import ConfigResult
from workers.flows.parallel import submit
from workers.flows.repo_config import load_repo_config
from workers.memory.last_seen import Seen

T = TypeVar("T")

# Reads one file for a flow: ``read(repo, sha, path)``.
Reader = Callable[[str, str, str], T]


@dataclass(frozen=True, slots=True)
class ReadAhead(Generic[T]):
    """Files read at the head last seen and the config read at the base last seen, still under way."""

    seen: Seen | None
    read: Reader[T] | None = None
    files: dict[str, Future[T]] = field(default_factory=dict)
    config: Future[ConfigResult] | None = None
    # ``start_more`` (on the thread the CI job's annotations come back on) and ``file`` (the fix's) may race
    # for one path: whichever comes first starts the read, the other takes it.
    lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    @classmethod
    def start(
        cls,
        gh: GitHubPort,
        seen: Seen | None,
        paths: Iterable[str] = (),
        read: Reader[T] | None = None,
        *,
        config: bool = True,
    ) -> ReadAhead[T]:
        """Start reading ``paths`` with ``read`` at the head seen and, with ``config``, the base's config."""
        if seen is None:
            return cls(None, read)
        # The config first: every model request waits for it, and a long list of files would queue it.
        loading = submit(load_repo_config, gh, seen.base_repo, seen.base_ref) if config else None
        files = {p: submit(read, seen.base_repo, seen.head_sha, p) for p in paths} if read is not None else {}
        return cls(seen, read, files, loading)

    def start_more(self, pull: PullInfo, paths: Iterable[str]) -> None:
        """Start reading ``paths`` too, where the head seen is ``pull``'s (later ``file`` calls find them)."""
        if self.read is None or self.seen is None or not self.seen.matches_head(pull):
            return
        with self.lock:
            for path in paths:
                if path not in self.files:
                    self.files[path] = submit(self.read, pull.base_repo, pull.head_sha, path)

    def held(self, pull: PullInfo) -> dict[str, Future[T]]:
        """Return the file reads started ahead that are reads of ``pull``'s head."""
        if self.seen is None or not self.seen.matches_head(pull):
            return {}
        return self.files

    def file(self, pull: PullInfo, path: str) -> Future[T]:
        """Return the read of ``path`` at ``pull``'s head: the one started ahead if it held, else anew."""
        assert self.read is not None, "a flow that reads files ahead passes its reader"
        if self.seen is None or not self.seen.matches_head(pull):
            return submit(self.read, pull.base_repo, pull.head_sha, path)
        with self.lock:  # a read of the head seen is kept, so a later ``start_more`` of it takes this one
            if path not in self.files:
                self.files[path] = submit(self.read, pull.base_repo, pull.head_sha, path)
            return self.files[path]

    def repo_config(self, gh: GitHubPort, pull: PullInfo) -> ConfigResult:
        """Return the config at ``pull``'s base: the read started ahead when that base held, else read now."""
        if self.config is not None and self.seen is not None and self.seen.matches_base(pull):
            return self.config.result()
        return load_repo_config(gh, pull.base_repo, pull.base_ref)
