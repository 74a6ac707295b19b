"""Building a commit's index: from the repository archive (cold), or from an indexed commit and what changed.

A commit's *listing* names its indexed files (path -> blob SHA) and the files not indexed with their reason;
each blob's symbols and text are stored once, by SHA, whatever commits and repositories hold it. A cold
build reads the tarball as it downloads (nothing is written to disk but the store); an incremental one
reads only the blobs the change names that the store does not hold yet.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import msgspec

from bot.core import symbols as sym
from bot.index.store import LISTINGS, SYMBOLS, LocalStore

# Blobs extracted and written per transaction during a cold build.
_BATCH = 256


class Listing(msgspec.Struct, frozen=True):
    """A commit's files: the indexed ones by blob SHA, the others with why; its root ``.gitattributes``."""

    files: dict[str, str]
    skipped: dict[str, str]
    gitattributes: str = ""


_LISTING_DECODER = msgspec.msgpack.Decoder(Listing)


def listing_key(repo: str, commit: str) -> str:
    """Return the store key of a commit's listing."""
    return f"{repo}@{commit}"


def load_listing(store: LocalStore, repo: str, commit: str) -> Listing | None:
    """Return the stored listing of ``repo`` at ``commit``, or None."""
    data = store.get(LISTINGS, listing_key(repo, commit))
    return None if data is None else _LISTING_DECODER.decode(data)


def blob_sha(data: bytes) -> str:
    """Return git's SHA-1 of a blob holding ``data``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass(frozen=True, slots=True)
class ArchiveFile:
    """A regular file of an archive, its path without the archive's top directory."""

    path: str
    data: bytes


@dataclass
class ArchiveRead:
    """What an archive held besides its regular files: the commit its header names, links and submodules."""

    commit: str = ""
    symlinks: tuple[str, ...] = ()
    submodules: tuple[str, ...] = ()


class _Chunks(io.RawIOBase):
    """A readable stream over an iterator of byte chunks (the download, as it arrives)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._left:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._left = chunk
        size = min(len(buffer), len(self._left))
        buffer[:size] = self._left[:size]
        self._left = self._left[size:]
        return size


def read_archive(chunks: Iterable[bytes], read: ArchiveRead) -> Iterator[ArchiveFile]:
    """Yield the regular files of a gzipped tar as GitHub writes a repository archive, as it streams.

    Entries sit under one top directory (``owner-repo-shortsha/``), which is dropped; the pax global header's
    ``comment`` names the commit. Symlinks are not followed (listed in ``read``), and an empty directory is a
    submodule (git tracks no empty directory).
    """
    directories: set[str] = set()
    parents: set[str] = set()
    links: list[str] = []
    stream = io.BufferedReader(_Chunks(chunks), buffer_size=256 * 1024)
    with tarfile.open(fileobj=stream, mode="r|gz") as tar:
        for member in tar:
            if not read.commit:
                read.commit = str(tar.pax_headers.get("comment", ""))
            _, _, path = member.name.partition("/")
            if not path:
                continue
            path = path.rstrip("/")
            parents.add(path.rpartition("/")[0])
            if member.isdir():
                directories.add(path)
            elif member.issym() or member.islnk():
                links.append(path)
            elif member.isfile():
                handle = tar.extractfile(member)
                if handle is not None:
                    yield ArchiveFile(path, handle.read())
    read.symlinks = tuple(links)
    read.submodules = tuple(sorted(directories - parents))


class Indexer:
    """Builds listings into a store: blobs extracted once, listings written whole."""

    def __init__(self, store: LocalStore, *, max_file_bytes: int = sym.DEFAULT_MAX_BYTES) -> None:
        self.store = store
        self.max_file_bytes = max_file_bytes

    def build(
        self, repo: str, commit: str, chunks: Iterable[bytes], *, read: ArchiveRead | None = None
    ) -> Listing:
        """Index ``repo`` at ``commit`` (or at the commit the archive's header names) from the archive."""
        read = read or ArchiveRead()
        files: dict[str, str] = {}
        skipped: dict[str, str] = {}
        batch: list[tuple[str, str, bytes]] = []
        attributes = ""
        for item in read_archive(chunks, read):
            if item.path == ".gitattributes":
                attributes = item.data.decode("utf-8", "replace")
            reason = sym.unindexable(item.path, item.data, max_bytes=self.max_file_bytes)
            if reason is not None:
                skipped[item.path] = reason
                continue
            sha = blob_sha(item.data)
            files[item.path] = sha
            batch.append((item.path, sha, item.data))
            if len(batch) >= _BATCH:
                self._add_blobs(batch)
                batch = []
        self._add_blobs(batch)
        if read.commit and commit and read.commit != commit:
            raise ValueError(f"the archive is of {read.commit[:12]}, not {commit[:12]}")
        # An archive of a branch names its commit in its header.
        commit = commit or read.commit
        if not commit:
            raise ValueError("the archive names no commit and none was given")
        skipped.update({path: "symbolic link" for path in read.symlinks})
        skipped.update({path: "submodule" for path in read.submodules})
        return self._save(repo, commit, _apply_attributes(files, skipped, attributes))

    def update(
        self,
        repo: str,
        commit: str,
        base: Listing,
        changes: Sequence[Change],
        read_blob: Callable[[Sequence[str]], dict[str, bytes]],
    ) -> Listing:
        """Index ``commit`` from ``base`` and the files changed since: only unknown blobs are read."""
        files = dict(base.files)
        skipped = dict(base.skipped)
        for change in changes:
            for path in (change.path, change.previous_path):
                if path:
                    files.pop(path, None)
                    skipped.pop(path, None)
        present = [c for c in changes if c.status != "removed"]
        known = self.store.has(SYMBOLS, {c.blob for c in present})
        wanted = sorted({c.blob for c in present if c.blob not in known} | _attributes_blob(present))
        blobs = read_blob(wanted) if wanted else {}
        attributes = base.gitattributes
        batch: list[tuple[str, str, bytes]] = []
        for change in present:
            if change.path == ".gitattributes":
                attributes = blobs.get(change.blob, b"").decode("utf-8", "replace")
            if change.blob in known:
                files[change.path] = change.blob
                continue
            data = blobs.get(change.blob)
            if data is None:
                skipped[change.path] = "not read"
                continue
            reason = sym.unindexable(change.path, data, max_bytes=self.max_file_bytes)
            if reason is not None:
                skipped[change.path] = reason
                continue
            files[change.path] = change.blob
            batch.append((change.path, change.blob, data))
        self._add_blobs(batch)
        if attributes != base.gitattributes:
            # The generated paths changed: files the old attributes skipped are indexed again from scratch.
            raise StaleAttributes
        return self._save(repo, commit, _apply_attributes(files, skipped, attributes))

    def _add_blobs(self, batch: Sequence[tuple[str, str, bytes]]) -> None:
        if not batch:
            return
        known = self.store.has(SYMBOLS, {sha for _, sha, _ in batch})
        symbols: list[tuple[str, bytes, dict[str, bool]]] = []
        texts: list[tuple[str, str]] = []
        for path, sha, data in batch:
            if sha in known:
                continue
            known.add(sha)
            text = data.decode("utf-8", "replace")
            found = sym.extract(path, text)
            if found is None:
                continue
            names = dict.fromkeys(found.references, False)
            names.update((d.name, True) for d in found.definitions)
            symbols.append((sha, sym.encode(found), names))
            texts.append((sha, text))
        self.store.put_texts(texts)
        self.store.put_symbols(symbols)

    def _save(self, repo: str, commit: str, listing: Listing) -> Listing:
        self.store.put_many(LISTINGS, [(listing_key(repo, commit), msgspec.msgpack.encode(listing))])
        return listing


@dataclass(frozen=True, slots=True)
class Change:
    """A file a push changed: its status (added, modified, removed, renamed, ...), paths and blob SHA."""

    path: str
    status: str
    blob: str
    previous_path: str | None = None


class StaleAttributes(Exception):
    """The change edits ``.gitattributes``: the commit is indexed from its archive instead."""


def _attributes_blob(changes: Iterable[Change]) -> set[str]:
    return {c.blob for c in changes if c.path == ".gitattributes"}


def _apply_attributes(files: dict[str, str], skipped: dict[str, str], attributes: str) -> Listing:
    """Move the files ``.gitattributes`` marks generated or vendored from the indexed to the skipped ones."""
    spec = sym.linguist_globs(attributes)
    if spec is not None:
        for path in [p for p in files if spec.match_file(p)]:
            del files[path]
            skipped[path] = "linguist-generated or -vendored (.gitattributes)"
    return Listing(files, skipped, attributes)
