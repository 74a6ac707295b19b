"""The machine's local store: one SQLite file shared by its worker processes, bounded by size, LRU-evicted.

Values are keyed by what identifies their content: a file's symbols and text by the git blob SHA (shared by
every commit and every repository holding that blob), a commit's listing by repository and commit. Each
table is a :class:`Table` with a ``used`` time and a ``bytes`` size per row; eviction deletes the least
recently used rows of all tables together until the file is under 90 % of its cap. Another kind of value
gets its own table by adding a :class:`Table` to ``TABLES``: it shares the cap, the eviction and the file.

SQLite runs in WAL mode (readers never wait for the writer) with ``auto_vacuum=INCREMENTAL``, so pages freed
by eviction are given back to the disk; a busy writer is waited for up to ``BUSY_SECONDS``.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

BUSY_SECONDS = 10.0
# A read refreshes a row's ``used`` time only when it is older than this: reads stay reads.
TOUCH_AFTER_SECONDS = 300.0
# Eviction brings the file down to this share of the cap, so it does not run on every write.
EVICT_TO = 0.9
# SQLite's limit on bound parameters is 32766 (3.32+); queries batch well below it.
_BATCH = 900


@dataclass(frozen=True, slots=True)
class Table:
    """A table of byte values under a text key, with the two columns eviction reads."""

    name: str


TEXTS = Table("texts")  # a file's text (UTF-8, zlib-compressed) by blob SHA
SYMBOLS = Table("symbols")  # a file's symbols (bot.core.symbols.encode) by blob SHA
LISTINGS = Table("listings")  # a commit's indexed files and skipped files, by "owner/repo@sha"
TABLES: tuple[Table, ...] = (TEXTS, SYMBOLS, LISTINGS)

_SCHEMA = [
    *(
        f"CREATE TABLE IF NOT EXISTS {t.name} (key TEXT PRIMARY KEY, data BLOB NOT NULL, "
        "bytes INTEGER NOT NULL, used REAL NOT NULL)"
        for t in TABLES
    ),
    *(f"CREATE INDEX IF NOT EXISTS {t.name}_used ON {t.name} (used)" for t in TABLES),
    # Which blobs define or reference a name: the inverted index a lookup starts from.
    "CREATE TABLE IF NOT EXISTS names (name TEXT NOT NULL, key TEXT NOT NULL, defines INTEGER NOT NULL, "
    "PRIMARY KEY (name, key)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS names_key ON names (key)",
    "CREATE TRIGGER IF NOT EXISTS symbols_names AFTER DELETE ON symbols "
    "BEGIN DELETE FROM names WHERE key = old.key; END",
]


@dataclass(frozen=True, slots=True)
class Health:
    """What ``spark doctor`` shows of the store: its size, cap, rows per table, and whether it checks."""

    path: Path
    bytes: int
    max_bytes: int
    rows: dict[str, int]
    ok: bool
    message: str


class LocalStore:
    """The SQLite store at ``path``, capped at ``max_bytes``; one connection per thread of this process."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._local = threading.local()
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._write() as db:
            for statement in _SCHEMA:
                db.execute(statement)

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None)
            # auto_vacuum applies only when set before the first table is created; harmless after.
            db.execute("PRAGMA auto_vacuum = INCREMENTAL")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            self._local.db = db
        return db

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        """Close this thread's connection."""
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    # -- values ---------------------------------------------------------------------------------------

    def get_many(self, table: Table, keys: Iterable[str]) -> dict[str, bytes]:
        """Return the values of ``keys`` found in ``table`` (a missing key is left out); marks them used."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, bytes] = {}
        stale: list[str] = []
        now = time.time()
        db = self._db()
        for chunk in _chunks(wanted):
            marks = ",".join("?" * len(chunk))
            rows = db.execute(f"SELECT key, data, used FROM {table.name} WHERE key IN ({marks})", chunk)
            for key, data, used in rows:
                found[key] = data
                if used < now - TOUCH_AFTER_SECONDS:
                    stale.append(key)
        if stale:
            with self._write() as db:
                for chunk in _chunks(stale):
                    marks = ",".join("?" * len(chunk))
                    db.execute(f"UPDATE {table.name} SET used = ? WHERE key IN ({marks})", [now, *chunk])
        return found

    def get(self, table: Table, key: str) -> bytes | None:
        """Return one value of ``table``, or None."""
        return self.get_many(table, [key]).get(key)

    def has(self, table: Table, keys: Iterable[str]) -> set[str]:
        """Return which of ``keys`` ``table`` holds (not marked used)."""
        held: set[str] = set()
        db = self._db()
        for chunk in _chunks(list(keys)):
            marks = ",".join("?" * len(chunk))
            held.update(
                k for (k,) in db.execute(f"SELECT key FROM {table.name} WHERE key IN ({marks})", chunk)
            )
        return held

    def put_many(self, table: Table, items: Sequence[tuple[str, bytes]]) -> None:
        """Store ``items`` (key, value) in ``table`` in one transaction, then evict if over the cap."""
        if not items:
            return
        now = time.time()
        with self._write() as db:
            db.executemany(
                f"INSERT OR REPLACE INTO {table.name} (key, data, bytes, used) VALUES (?, ?, ?, ?)",
                [(key, data, len(key) + len(data), now) for key, data in items],
            )
        self.evict()

    def put_symbols(self, items: Sequence[tuple[str, bytes, dict[str, bool]]]) -> None:
        """Store symbols (blob SHA, encoded symbols, name -> whether the file defines it) and their names."""
        if not items:
            return
        now = time.time()
        with self._write() as db:
            db.executemany(
                "INSERT OR REPLACE INTO symbols (key, data, bytes, used) VALUES (?, ?, ?, ?)",
                # A name row costs about its name and key again in the names table and its index.
                [(k, data, len(data) + sum(2 * len(n) + 90 for n in names), now) for k, data, names in items],
            )
            db.executemany(
                "INSERT OR REPLACE INTO names (name, key, defines) VALUES (?, ?, ?)",
                [(name, key, int(defines)) for key, _, names in items for name, defines in names.items()],
            )
        self.evict()

    def keys_naming(self, names: Iterable[str], *, defines: bool | None = None) -> dict[str, set[str]]:
        """Return, per name, the blob keys whose symbols define or reference it (``defines`` filters)."""
        out: dict[str, set[str]] = {}
        db = self._db()
        wanted = list(dict.fromkeys(names))
        for chunk in _chunks(wanted):
            marks = ",".join("?" * len(chunk))
            query = f"SELECT name, key FROM names WHERE name IN ({marks})"
            if defines is not None:
                query += f" AND defines = {int(defines)}"
            for name, key in db.execute(query, chunk):
                out.setdefault(name, set()).add(key)
        return out

    # -- texts ----------------------------------------------------------------------------------------

    def put_texts(self, items: Sequence[tuple[str, str]]) -> None:
        """Store file texts by blob SHA (compressed)."""
        self.put_many(
            TEXTS, [(sha, zlib.compress(text.encode("utf-8", "surrogatepass"), 1)) for sha, text in items]
        )

    def texts(self, shas: Iterable[str]) -> dict[str, str]:
        """Return the stored texts of ``shas`` (a missing one is left out)."""
        return {
            sha: zlib.decompress(data).decode("utf-8", "surrogatepass")
            for sha, data in self.get_many(TEXTS, shas).items()
        }

    # -- size -----------------------------------------------------------------------------------------

    def size(self) -> int:
        """Return the bytes the store's pages hold (free pages not counted; the WAL not counted)."""
        db = self._db()
        pages = (
            db.execute("PRAGMA page_count").fetchone()[0] - db.execute("PRAGMA freelist_count").fetchone()[0]
        )
        return int(pages) * int(db.execute("PRAGMA page_size").fetchone()[0])

    def evict(self) -> int:
        """Delete the least recently used rows until the store is under 90 % of its cap; return how many."""
        size = self.size()
        if size <= self.max_bytes:
            return 0
        goal = size - int(self.max_bytes * EVICT_TO)
        union = " UNION ALL ".join(f"SELECT '{t.name}', key, bytes, used FROM {t.name}" for t in TABLES)
        deleted = 0
        with self._write() as db:
            freed = 0
            while freed < goal:
                rows = db.execute(f"SELECT * FROM ({union}) ORDER BY used LIMIT 500").fetchall()
                if not rows:
                    break
                for table, key, size_, _ in rows:
                    db.execute(f"DELETE FROM {table} WHERE key = ?", (key,))
                    freed += size_
                    deleted += 1
                    if freed >= goal:
                        break
            db.execute("PRAGMA incremental_vacuum")
        return deleted

    def health(self) -> Health:
        """Return the store's size, cap and rows per table, and SQLite's quick check."""
        db = self._db()
        rows = {t.name: int(db.execute(f"SELECT COUNT(*) FROM {t.name}").fetchone()[0]) for t in TABLES}
        check = str(db.execute("PRAGMA quick_check").fetchone()[0])
        size = self.size()
        ok = check == "ok" and size <= self.max_bytes
        message = check if check != "ok" else ("over its cap" if size > self.max_bytes else "ok")
        return Health(self.path, size, self.max_bytes, rows, ok, message)


def _chunks(keys: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(keys), _BATCH):
        yield keys[start : start + _BATCH]


def store_path(data_dir: Path) -> Path:
    """Return where a machine's store lives under Spark's data directory."""
    return data_dir / "index" / "store.sqlite3"
