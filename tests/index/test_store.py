"""The machine's local store: values by key, names by blob, the size cap and least-recently-used eviction."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bot.index.store import LISTINGS, SYMBOLS, TEXTS, LocalStore


def test_values_texts_and_names_round_trip(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s.sqlite3", 10_000_000)
    store.put_texts([("a" * 40, "def f():\n    return 1\n")])
    store.put_symbols([("a" * 40, b"sym", {"f": True, "g": False})])
    store.put_many(LISTINGS, [("octo/x@1", b"listing")])
    assert store.texts(["a" * 40, "b" * 40]) == {"a" * 40: "def f():\n    return 1\n"}
    assert store.get(SYMBOLS, "a" * 40) == b"sym"
    assert store.keys_naming(["f", "g", "h"]) == {"f": {"a" * 40}, "g": {"a" * 40}}
    assert store.keys_naming(["f", "g"], defines=True) == {"f": {"a" * 40}}
    assert store.has(LISTINGS, ["octo/x@1", "octo/x@2"]) == {"octo/x@1"}


def test_a_second_process_reads_what_the_first_wrote(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    LocalStore(path, 10_000_000).put_texts([("c" * 40, "x = 1\n")])
    pid = os.fork()
    if pid == 0:
        os._exit(0 if LocalStore(path, 10_000_000).texts(["c" * 40]) == {"c" * 40: "x = 1\n"} else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_over_its_cap_the_least_recently_used_rows_go_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalStore(tmp_path / "s.sqlite3", 600_000)
    clock = [1000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    # Random-looking bytes do not shrink in SQLite's pages: each value costs its size.
    values = [(f"{n:040d}", os.urandom(20_000)) for n in range(20)]
    for key, data in values:
        clock[0] += 1000  # each write later than the last, and past the touch interval
        store.put_many(TEXTS, [(key, data)])
    clock[0] += 1000
    store.get(TEXTS, values[0][0])  # the oldest is read: now the most recently used
    for n in range(20, 40):
        clock[0] += 1000
        store.put_many(TEXTS, [(f"{n:040d}", os.urandom(20_000))])
    kept = store.has(TEXTS, [key for key, _ in values])
    assert values[0][0] in kept
    assert values[1][0] not in kept
    assert store.size() <= 600_000
    health = store.health()
    assert health.ok
    assert health.bytes == store.size()
    assert health.rows["texts"] < 40


def test_evicting_symbols_drops_their_names(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s.sqlite3", 10_000_000)
    store.put_symbols([("d" * 40, b"x", {"name": True})])
    store.max_bytes = 1
    store.evict()
    assert store.keys_naming(["name"]) == {}
    assert not store.health().ok  # an empty store's pages still exceed a one-byte cap


def test_reads_do_not_write_within_the_touch_interval(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s.sqlite3", 10_000_000)
    store.put_many(TEXTS, [("e" * 40, b"x")])
    before = store._db().execute("SELECT used FROM texts").fetchone()[0]
    time.sleep(0.01)
    store.get(TEXTS, "e" * 40)
    assert store._db().execute("SELECT used FROM texts").fetchone()[0] == before
