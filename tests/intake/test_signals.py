"""Cancellation signals raised at intake: a busy worker's running job learns at once that it is stale."""

from __future__ import annotations

import json
from typing import Any

import redis

from bot.cancel import CancelToken, cancel_key
from tests.conftest import FIXTURES
from tests.intake.conftest import Post

HOOKS = FIXTURES / "webhooks"


def _payload(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HOOKS / name).read_text())
    return data


def _pr_key(payload: dict[str, Any], number: int) -> str:
    repo = payload["repository"]
    return f"{payload['installation']['id']}:{repo['owner']['login']}/{repo['name']}#{number}"


def test_new_fix_comment_supersedes_the_running_fix(post: Post, redis_conn: redis.Redis) -> None:
    comment = _payload("issue_comment/created-spark-fix.json")
    key = _pr_key(comment, comment["issue"]["number"])
    running = CancelToken.start(redis_conn, key, "fix", order=comment["comment"]["id"] - 1, interval=0)
    assert not running.cancelled()
    assert post("issue_comment", comment, delivery="sig-fix").status_code == 202
    assert running.cancelled()
    assert "superseded" in running.reason


def test_stop_comment_stops_running_work(post: Post, redis_conn: redis.Redis) -> None:
    comment = _payload("issue_comment/created-spark-fix.json")
    comment["comment"]["body"] = "/spark STOP please"
    key = _pr_key(comment, comment["issue"]["number"])
    running = CancelToken.start(redis_conn, key, "review", interval=0)
    assert post("issue_comment", comment, delivery="sig-stop").status_code == 202
    assert running.cancelled() and "stopped" in running.reason


def test_push_makes_work_on_the_old_head_stale(post: Post, redis_conn: redis.Redis) -> None:
    push = _payload("pull_request/synchronize.json")
    key = _pr_key(push, push["pull_request"]["number"])
    old = CancelToken.start(redis_conn, key, "review", head_sha="0" * 40, interval=0)
    assert post("pull_request", push, delivery="sig-push").status_code == 202
    assert redis_conn.hget(cancel_key(key), "head") == push["pull_request"]["head"]["sha"].encode()
    assert old.cancelled() and "head moved" in old.reason


def test_duplicate_delivery_raises_no_signal(post: Post, redis_conn: redis.Redis) -> None:
    comment = _payload("issue_comment/created-spark-fix.json")
    comment["comment"]["body"] = "/spark stop"
    key = _pr_key(comment, comment["issue"]["number"])
    assert post("issue_comment", comment, delivery="sig-dup").status_code == 202
    first = redis_conn.hget(cancel_key(key), "all")
    assert post("issue_comment", comment, delivery="sig-dup").status_code == 200
    assert redis_conn.hget(cancel_key(key), "all") == first == b"1"


def test_ignored_comment_raises_no_signal(post: Post, redis_conn: redis.Redis) -> None:
    comment = _payload("issue_comment/created-plain.json")
    assert post("issue_comment", comment, delivery="sig-plain").status_code == 202
    assert not redis_conn.keys("spark:cancel:*")


def test_a_strangers_stop_or_fix_signals_nothing(post: Post, redis_conn: redis.Redis) -> None:
    """Anyone may comment, but only the job (after a permission check) decides for a stranger's command."""
    for number, body in enumerate(("/spark stop", "/spark fix it"), start=1):
        comment = _payload("issue_comment/created-spark-fix.json")
        comment["comment"].update(body=body, author_association="NONE", id=comment["comment"]["id"] + number)
        comment["comment"]["user"]["login"] = "stranger"
        assert comment["issue"]["user"]["login"] != "stranger"
        assert post("issue_comment", comment, delivery=f"sig-stranger-{number}").status_code == 202
    assert not redis_conn.keys("spark:cancel:*")


def test_the_pr_authors_stop_signals_even_without_association(post: Post, redis_conn: redis.Redis) -> None:
    comment = _payload("issue_comment/created-spark-fix.json")
    comment["comment"].update(body="/spark stop", author_association="CONTRIBUTOR")
    comment["comment"]["user"]["login"] = comment["issue"]["user"]["login"]
    key = _pr_key(comment, comment["issue"]["number"])
    assert post("issue_comment", comment, delivery="sig-author-stop").status_code == 202
    assert redis_conn.hget(cancel_key(key), "all") == b"1"
