"""What Spark last saw of a pull request: kept a week, written only when it changed, never trusted blindly."""

from __future__ import annotations

import dataclasses

import redis

from bot import keys
from bot.core.config import RepoConfig
from tests.stories import SAME_REPO
from workers.memory import last_seen

PR = "1:acme/calculator#1"
# The pull request of the policy tests, in the calculator's repository.
PULL = dataclasses.replace(SAME_REPO, head_repo="acme/calculator", base_repo="acme/calculator")


def test_what_was_seen_comes_back_and_expires_in_a_week(redis_conn: redis.Redis) -> None:
    assert last_seen.recall(redis_conn, PR) is None
    last_seen.remember(redis_conn, PR, PULL, ["src/calc.py", "README.md"])
    seen = last_seen.recall(redis_conn, PR)
    assert seen == last_seen.Seen("a" * 40, "acme/calculator", "main", ("src/calc.py", "README.md"))
    assert 7 * 86400 - 5 < int(redis_conn.ttl(keys.LAST_SEEN.format(PR))) <= 7 * 86400
    assert keys.unbounded(redis_conn) == []


def test_an_unchanged_sighting_writes_nothing_and_unknown_paths_keep_the_last_ones(
    redis_conn: redis.Redis,
) -> None:
    last_seen.remember(redis_conn, PR, PULL, ["src/calc.py"])
    seen = last_seen.recall(redis_conn, PR)
    redis_conn.expire(keys.LAST_SEEN.format(PR), 100)
    last_seen.remember(redis_conn, PR, PULL, ["src/calc.py"], seen)
    assert int(redis_conn.ttl(keys.LAST_SEEN.format(PR))) <= 100  # not written again
    pushed = dataclasses.replace(PULL, head_sha="c" * 40)
    last_seen.remember(redis_conn, PR, pushed, None, seen)
    assert last_seen.recall(redis_conn, PR) == last_seen.Seen(
        "c" * 40, "acme/calculator", "main", ("src/calc.py",)
    )


def test_spark_s_own_commit_moves_the_head_and_adds_its_files(redis_conn: redis.Redis) -> None:
    last_seen.remember(redis_conn, PR, PULL, ["src/calc.py"])
    last_seen.committed(redis_conn, PR, PULL, "d" * 40, ["src/calc.py", "src/new.py"])
    seen = last_seen.recall(redis_conn, PR)
    assert seen is not None and seen.head_sha == "d" * 40 and seen.paths == ("src/calc.py", "src/new.py")


def test_the_guess_holds_only_for_the_same_head_and_base() -> None:
    seen = last_seen.Seen("a" * 40, "acme/calculator", "main")
    assert seen.matches_head(PULL) and seen.matches_base(PULL)
    assert not seen.matches_head(dataclasses.replace(PULL, head_sha="e" * 40))
    assert not seen.matches_base(dataclasses.replace(PULL, base_ref="release"))
    assert not seen.matches_head(dataclasses.replace(PULL, base_repo="other/calculator"))


def test_a_damaged_or_foreign_document_is_no_guess(redis_conn: redis.Redis) -> None:
    key = keys.LAST_SEEN.format(PR)
    for raw in (
        "not json",
        "[]",
        '{"head": "a"}',
        '{"head": "a", "base_repo": 1, "base_ref": "m", "paths": 3}',
        '{"head": "a", "base_repo": "r", "base_ref": "m", "paths": [], "ci": 3}',
    ):
        redis_conn.set(key, raw, ex=60)
        assert last_seen.recall(redis_conn, PR) is None, raw
    assert last_seen.recall(redis_conn, "2:acme/calculator#2") is None


def test_what_the_config_says_of_failed_checks_is_kept_for_its_base_only(redis_conn: redis.Redis) -> None:
    config = RepoConfig(ci_fix="auto", ci_checks=("lint", "test*"))
    last_seen.remember(redis_conn, PR, PULL, ["src/calc.py"], config=config)
    seen = last_seen.recall(redis_conn, PR)
    assert seen is not None and (seen.ci_fix, seen.ci_checks) == ("auto", ("lint", "test*"))
    # A push keeps it (same base), Spark's own commit too; another base forgets it until read there.
    pushed = dataclasses.replace(PULL, head_sha="c" * 40)
    seen = last_seen.remember(redis_conn, PR, pushed, None, seen)
    last_seen.committed(redis_conn, PR, pushed, "d" * 40, ["src/calc.py"])
    kept = last_seen.recall(redis_conn, PR)
    assert kept is not None and kept.head_sha == "d" * 40 and kept.ci_fix == "auto"
    retargeted = dataclasses.replace(PULL, base_ref="release")
    last_seen.remember(redis_conn, PR, retargeted, None, kept)
    moved = last_seen.recall(redis_conn, PR)
    assert moved is not None and moved.ci_fix is None and moved.ci_checks == ()
    assert keys.unbounded(redis_conn) == []


def test_a_head_seen_names_its_pull_request(redis_conn: redis.Redis) -> None:
    last_seen.remember(redis_conn, PR, PULL, ["src/calc.py"])
    assert last_seen.pull_of_head(redis_conn, 1, "acme/calculator", "a" * 40) == 1
    assert last_seen.pull_of_head(redis_conn, 1, "acme/calculator", "b" * 40) is None
    assert last_seen.pull_of_head(redis_conn, 2, "acme/calculator", "a" * 40) is None
