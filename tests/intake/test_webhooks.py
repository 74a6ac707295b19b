"""The webhook endpoint end to end: signed deliveries through Flask onto the real (private) Redis."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
from flask.testing import FlaskClient
from rq import Queue, SimpleWorker
from rq.job import Job

from bot.redis_server import free_port
from bot.settings import SettingsError
from bot.web.app import create_app
from bot.web.webhooks import WEBHOOK_PATH
from tests.conftest import FIXTURES, SHARED, Post, make_settings, signed_post
from tests.intake.expectations import (
    INTERACTIVE,
    REVIEW,
    SIGNAL_ONLY,
    expected_job,
    expected_pr_number,
)
from tests.stories import queued_jobs
from workers.context import install, uninstall

OWN = FIXTURES / "webhooks"
SHARED_WEBHOOKS = SHARED / "github" / "webhooks"


def load_payload(path: Path) -> dict[str, Any]:
    """Return a fixture's webhook body (unwrapping the Probot {event, name, payload} test format)."""
    data: dict[str, Any] = json.loads(path.read_text())
    if set(data) == {"event", "name", "payload"}:
        return data["payload"]  # type: ignore[no-any-return]
    return data


def check_delivery(post: Post, conn: redis.Redis, event: str, payload: dict[str, Any]) -> None:
    """Post one delivery and assert it queued exactly the routing table's job, or was ignored with 202."""
    delivery = str(uuid.uuid4())
    response = post(event, payload, delivery=delivery)
    expected = expected_job(event, payload)
    jobs = queued_jobs(conn)
    if event == "ping":
        assert response.status_code == 200
        assert jobs == []
    elif expected is None:
        assert response.status_code == 202, response.json
        assert response.json is not None and response.json["status"] == "ignored" and response.json["reason"]
        assert jobs == []
    elif expected == SIGNAL_ONLY:
        assert response.status_code == 202, response.json
        assert response.json == {"status": "queued", "jobs": []}
        assert jobs == []
        assert conn.get(f"spark:delivery:{delivery}") == b""
    else:
        assert response.status_code == 202, response.json
        assert response.json == {"status": "queued", "jobs": [expected[0]]}
        assert len(jobs) == 1
        queue_name, job = jobs[0]
        assert (job.func_name, queue_name) == expected
        assert job.id == delivery
        assert job.args == ()
        number = expected_pr_number(event, payload)
        if number is not None:
            pr = job.kwargs["pr"]
            assert pr["number"] == number
            assert pr["installation_id"] == payload["installation"]["id"]
            assert pr["owner"] == payload["repository"]["owner"]["login"]
            assert pr["repo"] == payload["repository"]["name"]
            assert pr["delivery_id"] == delivery
        else:
            assert job.kwargs["installation_id"] == payload["installation"]["id"]
        # Small arguments, never the whole payload.
        assert len(json.dumps(job.kwargs)) < 2000


def _files(root: Path) -> list[Path]:
    return sorted(root.glob("*/*.json")) if root.is_dir() else []


def _shared_files(root: Path) -> list[Any]:
    """The shared deliveries, or one case skipped with the reason (not pytest's "got empty parameter set")."""
    files = _files(root)
    if files:
        return files
    reason = f"../shared is absent (a fresh clone has none): no {root.parent.name}/{root.name} deliveries"
    return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="shared-absent")]


def test_absent_shared_deliveries_skip_with_a_reason(tmp_path: Path) -> None:
    [case] = _shared_files(tmp_path / "github" / "webhooks")
    [mark] = case.marks
    assert mark.kwargs["reason"].startswith("../shared is absent")
    assert "empty parameter set" not in mark.kwargs["reason"]


@pytest.mark.shared
@pytest.mark.parametrize("path", _shared_files(SHARED_WEBHOOKS), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shared_delivery(shared_dir: Path, post: Post, redis_conn: redis.Redis, path: Path) -> None:
    check_delivery(post, redis_conn, path.parent.name, load_payload(path))


@pytest.mark.parametrize("path", _files(OWN), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_own_fixture(post: Post, redis_conn: redis.Redis, path: Path) -> None:
    check_delivery(post, redis_conn, path.parent.name, load_payload(path))


def _only_job(conn: redis.Redis) -> Job:
    jobs = queued_jobs(conn)
    assert len(jobs) == 1
    return jobs[0][1]


def test_command_arguments(post: Post, redis_conn: redis.Redis) -> None:
    payload = load_payload(OWN / "issue_comment" / "created-spark-fix.json")
    assert post("issue_comment", payload).status_code == 202
    command = _only_job(redis_conn).kwargs["command"]
    assert command["name"] == "fix"
    assert command["text"] == "handle empty input\nand keep the API"
    assert (command["comment_id"], command["author"], command["kind"]) == (1001, "mona", "issue_comment")


def test_unknown_command_becomes_help(post: Post, redis_conn: redis.Redis) -> None:
    payload = load_payload(OWN / "issue_comment" / "created-spark-unknown.json")
    assert post("issue_comment", payload).status_code == 202
    command = _only_job(redis_conn).kwargs["command"]
    assert (command["name"], command["text"]) == ("help", "frobnicate now")


def test_review_thread_command(post: Post, redis_conn: redis.Redis) -> None:
    payload = load_payload(OWN / "pull_request_review_comment" / "created-spark-fix-reply.json")
    assert post("pull_request_review_comment", payload).status_code == 202
    kwargs = _only_job(redis_conn).kwargs
    assert kwargs["pr"]["head_sha"] == payload["pull_request"]["head"]["sha"]
    command = kwargs["command"]
    assert command["name"] == "fix" and command["text"] == "use a dict here"
    assert (command["path"], command["start_line"], command["line"], command["side"]) == (
        "src/parser.py",
        12,
        14,
        "RIGHT",
    )
    assert command["kind"] == "review_comment"
    assert command["thread_id"] == 2001  # the top-level comment the reply belongs to


def test_a_plain_reply_in_a_review_thread_is_queued_for_spark_to_judge(
    post: Post, redis_conn: redis.Redis
) -> None:
    payload = load_payload(OWN / "pull_request_review_comment" / "created-spark-fix-reply.json")
    payload["comment"]["body"] = "Why is this a problem?"
    assert post("pull_request_review_comment", payload, delivery="reply-1").status_code == 202
    command = _only_job(redis_conn).kwargs["command"]
    assert (command["name"], command["text"], command["thread_id"]) == (
        "reply",
        "Why is this a problem?",
        2001,
    )
    # A new thread's first comment is no reply to anyone; a bot's reply is never queued.
    top = {**payload, "comment": {**payload["comment"], "in_reply_to_id": None, "id": 3001}}
    assert post("pull_request_review_comment", top, delivery="top-1").json["status"] == "ignored"
    bot_user = {**payload["comment"]["user"], "login": "ci[bot]", "type": "Bot"}
    by_bot = {**payload, "comment": {**payload["comment"], "user": bot_user, "id": 3002}}
    assert post("pull_request_review_comment", by_bot, delivery="bot-1").json["status"] == "ignored"


def test_closed_merged_stops_at_intake_and_queues_no_job(post: Post, redis_conn: redis.Redis) -> None:
    payload = load_payload(OWN / "pull_request" / "closed-merged.json")
    response = post("pull_request", payload, delivery="closed-1")
    assert (response.status_code, response.json) == (202, {"status": "queued", "jobs": []})
    assert queued_jobs(redis_conn) == []
    key = "spark:cancel:{}:{}/{}#{}".format(
        payload["installation"]["id"],
        payload["repository"]["owner"]["login"],
        payload["repository"]["name"],
        payload["pull_request"]["number"],
    )
    assert redis_conn.hget(key, "all") == b"1" and redis_conn.hget(key, "stopped_by") == b""
    # Stored like any delivery: a redelivery stops nothing a second time (work started since goes on).
    assert post("pull_request", payload, delivery="closed-1").json["status"] == "duplicate"
    assert redis_conn.hget(key, "all") == b"1"


def test_job_policy(post: Post, redis_conn: redis.Redis) -> None:
    post("pull_request", load_payload(OWN / "pull_request" / "opened.json"))
    job = _only_job(redis_conn)
    assert job.retries_left == 2  # a job whose worker died is re-run
    assert job.timeout == 600
    assert job.ttl is not None and job.result_ttl is not None and job.failure_ttl is not None


def test_form_encoded_payload_is_accepted(post: Post, redis_conn: redis.Redis) -> None:
    from urllib.parse import urlencode

    payload = (OWN / "pull_request" / "opened.json").read_text()
    body = urlencode({"payload": payload}).encode()
    response = post("pull_request", body=body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 202, response.json
    assert _only_job(redis_conn).func_name == "workers.jobs.review"


OPENED = load_payload(OWN / "pull_request" / "opened.json")


@pytest.mark.parametrize(
    ("kwargs", "status", "reason"),
    [
        ({"headers": {"X-Hub-Signature-256": None}}, 401, "X-Hub-Signature-256"),
        ({"secret": "wrong secret"}, 401, "X-Hub-Signature-256"),
        ({"headers": {"X-Hub-Signature-256": "sha256=" + "0" * 64}}, 401, "X-Hub-Signature-256"),
        ({"headers": {"X-GitHub-Delivery": None}}, 400, "X-GitHub-Delivery"),
        ({"headers": {"X-GitHub-Delivery": "../../etc"}}, 400, "X-GitHub-Delivery"),
        ({"headers": {"X-GitHub-Event": None}}, 400, "X-GitHub-Event"),
        ({"content_type": "text/plain"}, 415, "Content-Type"),
        ({"headers": {"Content-Type": None}}, 415, "Content-Type"),
        ({"body": b'{"action": "opened", '}, 400, "not valid JSON"),
        ({"body": b"\xff\xfe"}, 400, "not valid JSON"),
        ({"body": b"[1, 2]"}, 400, "Expected `object`, got `array`"),
        (
            {"body": b"payload=%7B", "content_type": "application/x-www-form-urlencoded"},
            400,
            "not valid JSON",
        ),
        ({"body": b"other=1", "content_type": "application/x-www-form-urlencoded"}, 400, "'payload'"),
        (
            {"payload": {**OPENED, "pull_request": {"head": {"sha": "abc"}}}},
            400,
            "Object missing required field `number` - at `$.pull_request`",
        ),
        (
            {"payload": {**OPENED, "pull_request": {**OPENED["pull_request"], "number": "7"}}},
            400,
            "Expected `int`, got `str` - at `$.pull_request.number`",
        ),
        (
            {"payload": {**OPENED, "installation": {"id": True}}},
            400,
            "Expected `int`, got `bool` - at `$.installation.id`",
        ),
        (
            {"payload": {**OPENED, "repository": None}},
            400,
            "Expected `object`, got `null` - at `$.repository`",
        ),
        # Beyond 64 bits, a number could not travel in the job's JSON arguments.
        (
            {"body": b'{"action": "opened", "pull_request": {"number": 18446744073709551616}}'},
            400,
            "Expected `int` <= 9223372036854775807 - at `$.pull_request.number`",
        ),
        ({"body": b'{"action": "opened", "pull_request": {"head": {"sha": "\xf4"}}}'}, 400, "not valid JSON"),
        # Fields Spark skips are still checked as JSON.
        (
            {"body": b'{"action": "opened", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"},
            400,
            "nested too deeply",
        ),
        ({"body": b'{"action": "opened", "x": [1,]}'}, 400, "not valid JSON"),
    ],
)
def test_bad_input(
    post: Post, redis_conn: redis.Redis, kwargs: dict[str, Any], status: int, reason: str
) -> None:
    kwargs.setdefault("payload", OPENED)
    response = post("pull_request", **kwargs)
    assert response.status_code == status
    assert response.json is not None and reason in response.json["error"]
    assert queued_jobs(redis_conn) == []
    assert redis_conn.keys("spark:delivery:*") == []  # nothing half-recorded: a fixed redelivery still queues


def test_body_too_large(redis_conn: redis.Redis) -> None:
    app = create_app(make_settings(SPARK_MAX_BODY_BYTES="2048"), redis_conn)
    post = signed_post(app.test_client())
    big = {**OPENED, "padding": "x" * 4096}
    response = post("pull_request", big)
    assert response.status_code == 413
    assert queued_jobs(redis_conn) == []
    assert post("pull_request", OPENED).status_code == 202


def test_body_too_large_without_content_length(redis_conn: redis.Redis) -> None:
    """A chunked body (no Content-Length) is capped while it is read."""
    from io import BytesIO

    from werkzeug.test import EnvironBuilder, run_wsgi_app

    app = create_app(make_settings(SPARK_MAX_BODY_BYTES="2048"), redis_conn)
    body = b"{" + b" " * 8192 + b"}"
    environ = EnvironBuilder(path=WEBHOOK_PATH, method="POST", content_type="application/json").get_environ()
    environ.pop("CONTENT_LENGTH", None)
    environ.update(
        {"wsgi.input": BytesIO(body), "wsgi.input_terminated": True, "HTTP_TRANSFER_ENCODING": "chunked"}
    )
    _, status, _ = run_wsgi_app(app, environ, buffered=True)
    assert status.startswith("413")


def test_duplicate_delivery_queues_once(post: Post, redis_conn: redis.Redis) -> None:
    delivery = str(uuid.uuid4())
    first = post("pull_request", OPENED, delivery=delivery)
    again = post("pull_request", OPENED, delivery=delivery)
    assert first.status_code == 202
    assert again.status_code == 200
    assert again.json == {"status": "duplicate", "reason": "delivery already received"}
    assert len(queued_jobs(redis_conn)) == 1


def test_concurrent_copies_queue_once(client: FlaskClient, redis_conn: redis.Redis) -> None:
    delivery = str(uuid.uuid4())
    statuses: list[int] = []
    barrier = threading.Barrier(8)

    def send() -> None:
        post = signed_post(client.application.test_client())
        barrier.wait()
        statuses.append(post("pull_request", OPENED, delivery=delivery).status_code)

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] * 7 + [202]
    assert len(queued_jobs(redis_conn)) == 1


def test_ping(post: Post, redis_conn: redis.Redis) -> None:
    response = post("ping", {"zen": "Design for failure.", "hook_id": 1})
    assert response.status_code == 200
    assert queued_jobs(redis_conn) == []


def test_unknown_event_is_ignored(post: Post, redis_conn: redis.Redis) -> None:
    response = post("star", {"action": "created"})
    assert response.status_code == 202
    assert response.json == {"status": "ignored", "reason": "star.created is not acted on"}
    # An event no handler acts on is read for its action only: fields of unexpected types do not matter.
    response = post("star", {"action": "created", "repository": 5, "installation": {"id": "x"}})
    assert response.status_code == 202
    assert post("star", {"action": 7}).json == {"status": "ignored", "reason": "star is not acted on"}


def test_redis_down_answers_503() -> None:
    down = redis.Redis(port=free_port(), socket_connect_timeout=0.5)
    app = create_app(make_settings(), down)
    post = signed_post(app.test_client())
    response = post("pull_request", OPENED)
    assert response.status_code == 503
    # Ignored events need no Redis: they still answer at once.
    assert post("pull_request", {**OPENED, "action": "labeled"}).status_code == 202
    assert app.test_client().get("/readyz").status_code == 503
    assert app.test_client().get("/healthz").status_code == 200


def test_redelivery_after_503_is_queued(redis_server: Any, redis_conn: redis.Redis) -> None:
    delivery = str(uuid.uuid4())
    down = create_app(make_settings(), redis.Redis(port=free_port(), socket_connect_timeout=0.5))
    assert signed_post(down.test_client())("pull_request", OPENED, delivery=delivery).status_code == 503
    up = create_app(make_settings(), redis_conn)
    assert signed_post(up.test_client())("pull_request", OPENED, delivery=delivery).status_code == 202
    assert len(queued_jobs(redis_conn)) == 1


def test_health(client: FlaskClient) -> None:
    assert client.get("/healthz").json == {"status": "ok"}
    assert client.get("/readyz").json == {"status": "ready"}


def test_refuses_to_start_without_secret(redis_conn: redis.Redis) -> None:
    from bot.settings import Settings

    with pytest.raises(SettingsError, match="GITHUB_WEBHOOK_SECRET"):
        # Partly configured is a mistake; with nothing configured the app serves /setup (tests/web).
        create_app(Settings.load(env={"GITHUB_APP_ID": "1"}, env_file=None), redis_conn)


def test_worker_runs_queued_jobs(post: Post, redis_conn: redis.Redis) -> None:
    comment = load_payload(OWN / "issue_comment" / "created-spark-fix.json")
    opened = load_payload(OWN / "pull_request" / "opened.json")
    assert post("pull_request", opened, delivery="d-review").status_code == 202
    assert post("issue_comment", comment, delivery="d-command").status_code == 202
    queues = [Queue(INTERACTIVE, connection=redis_conn), Queue(REVIEW, connection=redis_conn)]
    # The opt-in run log (SPARK_RUN_LOG) is how benchmarks count runs; production keeps none.
    install(make_settings(SPARK_RUN_LOG="3"), redis_conn)
    try:
        assert SimpleWorker(queues, connection=redis_conn).work(burst=True)
    finally:
        uninstall()
    ran = [json.loads(line) for line in redis_conn.lrange("spark:jobs:ran", 0, -1)]
    # The interactive queue is drained first: the command ran before the review queued ahead of it. (The real
    # flows fail here without a sandbox and RQ's Retry runs each job 3 times: the log keeps the last 3 runs.)
    assert [(r["job"], r["job_id"]) for r in ran] == [("review", "d-review")] * 3
    # Each run names its worker and start, so a job run again by another worker shows as such (bench.chaos).
    assert all(r["worker"] and r["at"] > 0 for r in ran)
    assert 0 < redis_conn.ttl("spark:jobs:ran") <= 3600
    command, review = (Job.fetch(i, connection=redis_conn) for i in ("d-command", "d-review"))
    assert command.ended_at is not None and review.started_at is not None
    assert command.ended_at <= review.started_at
    assert command.kwargs["command"]["name"] == "fix" and review.kwargs["pr"]["number"] == 7


def test_no_run_log_unless_asked_for(post: Post, redis_conn: redis.Redis) -> None:
    assert post("pull_request", load_payload(OWN / "pull_request" / "opened.json")).status_code == 202
    install(make_settings(), redis_conn)
    try:
        assert SimpleWorker([Queue(REVIEW, connection=redis_conn)], connection=redis_conn).work(burst=True)
    finally:
        uninstall()
    assert not redis_conn.exists("spark:jobs:ran")
