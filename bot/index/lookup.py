"""One commit's index read from the store: who defines and who references a name, and files' texts."""

from __future__ import annotations

from collections.abc import Iterable

from bot.core.symbols import FileSymbols, decode
from bot.index.build import Listing
from bot.index.store import SYMBOLS, LocalStore


class RepoIndex:
    """The index of one commit (its listing) over the machine's store; every read is local."""

    def __init__(self, store: LocalStore, repo: str, commit: str, listing: Listing) -> None:
        self.store = store
        self.repo = repo
        self.commit = commit
        self.listing = listing
        self._paths: dict[str, list[str]] = {}
        for path, sha in listing.files.items():
            self._paths.setdefault(sha, []).append(path)
        self._symbols: dict[str, FileSymbols] = {}

    def paths_naming(self, names: Iterable[str], *, defines: bool | None = None) -> dict[str, list[str]]:
        """Return, per name, the paths of this commit that define or reference it (``defines`` filters)."""
        out: dict[str, list[str]] = {}
        for name, keys in self.store.keys_naming(names, defines=defines).items():
            paths = sorted(p for key in keys for p in self._paths.get(key, ()))
            if paths:
                out[name] = paths
        return out

    def symbols(self, paths: Iterable[str]) -> dict[str, FileSymbols]:
        """Return the symbols of the indexed ``paths`` (others are left out)."""
        wanted = {p: self.listing.files[p] for p in paths if p in self.listing.files}
        missing = {sha for sha in wanted.values() if sha not in self._symbols}
        for sha, data in self.store.get_many(SYMBOLS, missing).items():
            self._symbols[sha] = decode(data)
        return {p: self._symbols[sha] for p, sha in wanted.items() if sha in self._symbols}

    def texts(self, paths: Iterable[str]) -> dict[str, str]:
        """Return the texts of the indexed ``paths`` (others are left out)."""
        wanted = {p: self.listing.files[p] for p in paths if p in self.listing.files}
        found = self.store.texts(set(wanted.values()))
        return {p: found[sha] for p, sha in wanted.items() if sha in found}
