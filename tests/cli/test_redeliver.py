"""``spark redeliver`` against the local GitHub's delivery log and a real receiver on a real Redis."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis
from werkzeug.serving import BaseWSGIServer, make_server

from bot.adapters.github_app import HookDelivery
from bot.cli.redeliver import failed_events, parse_since
from bot.redis_server import PrivateRedis, free_port
from bot.settings import Settings, SettingsError
from bot.web.app import create_app
from sandbox.github import GitHubSandbox
from sandbox.github.auth import generate_private_key_pem
from tests.cli.conftest import Spark


def app_env(github: GitHubSandbox) -> dict[str, str]:
    return {
        "GITHUB_APP_ID": str(github.app_id),
        "GITHUB_PRIVATE_KEY": github.private_key_pem,
        "GITHUB_API_URL": github.url,
    }


@pytest.fixture()
def offline_github() -> Iterator[tuple[GitHubSandbox, int]]:
    """A local GitHub whose webhook URL points at a port nobody listens on yet: every delivery fails."""
    port = free_port()
    with GitHubSandbox(webhook_url=f"http://127.0.0.1:{port}/api/github/webhooks") as github:
        installation = github.create_installation("acme")
        github.create_repo("acme/app", {"app.py": "x = 1\n"}, installation)
        number = github.open_pull_request("acme/app", "change", {"app.py": "x = 2\n"}, author="dev")
        github.comment("acme/app", number, "/spark help", author="dev")
        github.wait_for_deliveries()
        yield github, port


def serve_receiver(github: GitHubSandbox, port: int, url: str) -> BaseWSGIServer:
    """Start the real webhook receiver on ``port`` (the App's webhook URL), queueing on Redis at ``url``."""
    settings = Settings.load(
        {"GITHUB_WEBHOOK_SECRET": github.webhook_secret, "REDIS_URL": url, "LOG_LEVEL": "WARNING"},
        env_file=None,
    )
    server = make_server("127.0.0.1", port, create_app(settings, redis.Redis.from_url(url)), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_redelivers_each_failed_event_once_and_then_finds_none(
    spark: Spark,
    offline_github: tuple[GitHubSandbox, int],
    redis_server: PrivateRedis,
    redis_conn: redis.Redis,
) -> None:
    github, port = offline_github
    failed = github.deliveries
    assert len(failed) >= 2 and all(d.status_code == 0 for d in failed)
    guids = {d.guid for d in failed}

    code, out, err = spark(app_env(github), "redeliver", "--dry-run", "--json")
    report = json.loads(out)
    assert code == 0
    assert report["failed"] == len(guids) and report["redelivered"] == 0
    assert {e["result"] for e in report["events"]} == {"would redeliver"}
    assert "[1/" in err  # progress on stderr, JSON alone on stdout
    assert len(github.deliveries) == len(failed), "a dry run redelivers nothing"

    code, out, _ = spark(app_env(github), "redeliver", "--dry-run")
    assert code == 0
    assert out.count("-> would redeliver") == len(guids)

    receiver = serve_receiver(github, port, redis_server.url)
    try:
        code, out, _ = spark(app_env(github), "redeliver", "--since", "6h", "--json")
        report = json.loads(out)
        assert code == 0
        assert report["redelivered"] == len(guids)
        retried = github.wait_for_deliveries()[len(failed) :]
        assert sorted(d.guid for d in retried) == sorted(guids)
        assert all(d.redelivery and 200 <= d.status_code < 300 for d in retried)
        # The receiver stored every redelivered event under its original delivery id.
        assert all(redis_conn.exists(f"spark:delivery:{guid}") for guid in guids)

        code, out, _ = spark(app_env(github), "redeliver")
        assert code == 0
        assert "No failed deliveries to redeliver." in out
        assert len(github.deliveries) == len(failed) + len(guids)
    finally:
        receiver.shutdown()


def test_listing_refused_exits_1(spark: Spark, offline_github: tuple[GitHubSandbox, int]) -> None:
    github, _ = offline_github
    env = app_env(github) | {"GITHUB_PRIVATE_KEY": generate_private_key_pem()}
    code, _, err = spark(env, "redeliver")
    assert code == 1
    assert "cannot list the App's deliveries" in err and "401" in err


def test_bad_since_and_missing_app_exit_2(spark: Spark, offline_github: tuple[GitHubSandbox, int]) -> None:
    github, _ = offline_github
    code, _, err = spark(app_env(github), "redeliver", "--since", "yesterday")
    assert code == 2 and "--since" in err
    code, _, err = spark({"GITHUB_API_URL": github.url}, "redeliver")
    assert code == 2 and "GITHUB_APP_ID" in err


def attempt(id_: int, guid: str, status_code: int, age: timedelta, now: datetime) -> HookDelivery:
    when = (now - age).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = "OK" if 200 <= status_code < 300 else f"Invalid HTTP Response: {status_code}"
    return HookDelivery(id_, guid, when, status, status_code, "pull_request", "opened", id_ > 1)


def test_grouping_by_guid_and_the_three_day_window() -> None:
    now = datetime(2026, 5, 1, 12, tzinfo=UTC)
    hour = timedelta(hours=1)
    log = [
        attempt(1, "recovered", 503, 5 * hour, now),
        attempt(2, "recovered", 202, 4 * hour, now),
        attempt(3, "twice-failed", 503, 3 * hour, now),
        attempt(4, "twice-failed", 500, 2 * hour, now),
        attempt(5, "old", 503, 80 * hour, now),
        attempt(6, "outside-since", 503, 30 * hour, now),
    ]
    found = failed_events(log, now, parse_since("1d"))
    assert [(f.guid, f.attempts, f.latest_id) for f in found] == [("twice-failed", 2, 4)]
    found = failed_events(log, now, parse_since("4d"))
    assert [(f.guid, f.redeliverable) for f in found] == [
        ("old", False),
        ("outside-since", True),
        ("twice-failed", True),
    ]


def test_parse_since() -> None:
    assert parse_since("90m") == timedelta(minutes=90)
    assert parse_since("3d") == timedelta(days=3)
    assert parse_since("1.5h") == timedelta(hours=1.5)
    with pytest.raises(SettingsError):
        parse_since("3 days")


def test_deliveries_refused_while_redis_was_down_are_recovered(spark: Spark) -> None:
    """The receiver answers 503 while Redis is down; after Redis is back, redelivery stores every event."""
    with PrivateRedis() as queue_redis, GitHubSandbox() as github:
        port = free_port()
        github.webhook_url = f"http://127.0.0.1:{port}/api/github/webhooks"
        receiver = serve_receiver(github, port, queue_redis.url)
        try:
            installation = github.create_installation("acme")
            github.create_repo("acme/app", {"app.py": "x = 1\n"}, installation)
            queue_redis.stop()
            number = github.open_pull_request("acme/app", "change", {"app.py": "x = 2\n"}, author="dev")
            github.comment("acme/app", number, "/spark help", author="dev")
            refused = [
                d for d in github.wait_for_deliveries() if d.event in ("pull_request", "issue_comment")
            ]
            assert refused and {d.status_code for d in refused} == {503}
            queue_redis.start()

            code, out, _ = spark(app_env(github), "redeliver", "--json")
            assert code == 0 and json.loads(out)["redelivered"] >= len(refused)
            github.wait_for_deliveries()
            conn = redis.Redis.from_url(queue_redis.url)
            assert all(conn.exists(f"spark:delivery:{d.guid}") for d in refused)
            conn.close()
        finally:
            receiver.shutdown()
