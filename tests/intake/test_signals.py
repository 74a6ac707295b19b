"""Cancellation signals raised at intake: a busy worker's running job learns at once that it is stale."""

from __future__ import annotations

import json
from typing import Any

import redis

from bot.cancel import CancelToken, cancel_key
from tests.conftest import FIXTURES, Post

HOOKS = FIXTURES / "webhooks"


def _payload(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HOOKS / name).read_text())
    return data


def _pr_key(payload: dict[str, Any], number: int) -> str:
    repo = payload["repository"]
    return f"{payload['installation']['id']}:{repo['owner']['login']}/{repo['name']}#{number}"


def test_new_fix_comment_supersedes_the_running_fix(post: Post, redis_conn: redis.Redis) -> None:
    comment = _payload("issue_comment/created-spark-fix.json")
    comment["comment"]["author_association"] = "OWNER"
    key = _pr_key(comment, comment["issue"]["number"])
    running = CancelToken.start(redis_conn, key, "fix", order=comment["comment"]["id"] - 1, interval=0)
    assert not running.cancelled()
    assert post("issue_comment", comment, delivery="sig-fix").status_code == 202
    assert running.cancelled()
    assert "superseded" in running.reason


def test_stop_comment_stops_running_work(post: Post, redis_conn: redis.Redis) -> None:
    comment = _payload("issue_comment/created-spark-fix.json")
    comment["comment"].update(body="/spark STOP please", author_association="OWNER")
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


def test_a_members_stop_or_fix_is_an_ask_the_running_job_verifies(
    post: Post, redis_conn: redis.Redis
) -> None:
    """MEMBER and COLLABORATOR include read and triage access: their commands stop nothing unverified."""
    comment = _payload("issue_comment/created-spark-fix.json")
    login = comment["comment"]["user"]["login"] = "maya"
    assert comment["issue"]["user"]["login"] != login
    key = _pr_key(comment, comment["issue"]["number"])
    fix = CancelToken.start(redis_conn, key, "fix", order=comment["comment"]["id"] - 10, interval=0)
    review = CancelToken.start(redis_conn, key, "review", interval=0)
    comment["comment"].update(body="/spark stop", author_association="MEMBER")
    assert post("issue_comment", comment, delivery="sig-member-stop").status_code == 202
    second = _payload("issue_comment/created-spark-fix.json")
    second["comment"].update(author_association="COLLABORATOR", id=comment["comment"]["id"] + 1)
    second["comment"]["user"]["login"] = login
    assert post("issue_comment", second, delivery="sig-member-fix").status_code == 202
    # No verdict yet (the job has not loaded the config): nothing is stopped.
    assert not fix.cancelled() and not review.cancelled()
    asked: list[tuple[str, str]] = []

    def triage_only(who: str, action: str) -> bool:
        asked.append((who, action))
        return False

    fix.verify = review.verify = triage_only
    assert not fix.cancelled() and not review.cancelled()
    assert not fix.cancelled()  # a verdict is asked for once per login and action
    assert sorted(set(asked)) == [(login, "fix"), (login, "stop")] and len(asked) == 3
    writer = CancelToken.start(redis_conn, key, "review", interval=0)
    writer.since = 0
    writer.verify = lambda who, action: True
    assert writer.cancelled() and writer.by == login and "stopped" in writer.reason
    later_fix = CancelToken.start(redis_conn, key, "fix", order=comment["comment"]["id"] - 5, interval=0)
    later_fix.verify = lambda who, action: action == "fix"
    assert later_fix.cancelled() and "superseded" in later_fix.reason and later_fix.by == login
