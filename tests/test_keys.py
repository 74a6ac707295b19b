"""The table of Spark's Redis keys: every key it lists expires or is bounded, and only it names keys."""

from __future__ import annotations

import re

import pytest
import redis

from bot import keys
from tests.conftest import ROOT

KEY_LITERAL = re.compile(r"""["']spark:[a-z]""")


def test_unbounded_finds_keys_without_a_ttl_and_keys_nobody_listed(redis_conn: redis.Redis) -> None:
    redis_conn.set(keys.DELIVERY.format("a"), "job", ex=keys.DELIVERY.seconds)
    redis_conn.zadd(keys.QUEUED.pattern, {"job": 1.0})  # bounded: needs no TTL
    redis_conn.hset(keys.INSTALLATIONS.pattern, "1", "octo")
    redis_conn.sadd(keys.INSTALLATION_REPOSITORIES.format(1), "octo/demo")
    assert keys.unbounded(redis_conn) == []
    redis_conn.hset(keys.CANCEL.format("1:o/r#1"), "all", 1)  # should expire, has no TTL
    redis_conn.set("spark:something:new", "1", ex=60)  # not in the table
    redis_conn.set("rq:job:x", "1")  # RQ's own keys are RQ's
    assert keys.unbounded(redis_conn) == ["spark:cancel:1:o/r#1", "spark:something:new"]


def test_entries_match_only_their_own_keys() -> None:
    assert keys.entry_of("spark:installations") is keys.INSTALLATIONS
    assert keys.entry_of("spark:installations:42") is keys.INSTALLATION_REPOSITORIES
    assert keys.entry_of("spark:installation:42:running") is keys.INSTALLATION_SLOTS
    assert keys.entry_of("spark:queued") is keys.QUEUED
    assert keys.entry_of("spark:queued:x") is None
    assert len({k.pattern for k in keys.TABLE}) == len(keys.TABLE)


def test_a_key_states_a_ttl_or_its_bound_never_neither() -> None:
    with pytest.raises(ValueError, match="TTL"):
        keys.Key("spark:x")
    with pytest.raises(ValueError, match="TTL"):
        keys.Key("spark:x", ttl=1, bound="small")
    with pytest.raises(ValueError, match="does not expire"):
        _ = keys.QUEUED.seconds


def test_no_module_but_keys_py_spells_a_redis_key() -> None:
    """Modules build keys from the table (a key spelled elsewhere would escape the bound check)."""
    spelled = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("bot", "workers")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != "keys.py" and "sandbox" not in path.parts
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if KEY_LITERAL.search(line) and "<!--" not in line
    ]
    assert spelled == []
