"""Hostile deliveries: each gets the right status, and nothing is queued that should not be."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import orjson
import pytest
import redis
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rq import Queue

from bench import fuzz_intake
from bot.intake.enqueue import stored_job_ids
from bot.intake.routing import INTERACTIVE, REVIEW
from bot.intake.signature import sign
from bot.web.app import create_app
from bot.web.webhooks import WEBHOOK_PATH
from tests.conftest import FIXTURES, SECRET, Post, make_settings, signed_post

EXAMPLES = int(os.environ.get("SPARK_FUZZ_EXAMPLES") or 120)
FIX_COMMENT: dict[str, Any] = orjson.loads(
    (FIXTURES / "webhooks" / "issue_comment" / "created-spark-fix.json").read_bytes()
)
OPENED: dict[str, Any] = orjson.loads((FIXTURES / "webhooks" / "pull_request" / "opened.json").read_bytes())


def queued(conn: redis.Redis) -> list[Any]:
    """Return every job on both queues."""
    return [job for name in (INTERACTIVE, REVIEW) for job in Queue(name, connection=conn).get_jobs()]


def comment(body: str) -> dict[str, Any]:
    """Return the /spark fix delivery with another comment body."""
    return {**FIX_COMMENT, "comment": {**FIX_COMMENT["comment"], "body": body}}


def _raw_post(app: Flask, body: bytes, headers: dict[str, str]) -> int:
    return app.test_client().post(WEBHOOK_PATH, data=body, headers=headers).status_code


def _headers(body: bytes, **extra: str) -> dict[str, str]:
    return {
        "X-GitHub-Event": "issue_comment",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "Content-Type": "application/json",
        "X-Hub-Signature-256": sign(SECRET.encode(), body),
        **extra,
    }


def test_unsigned_and_forged_deliveries_are_refused(app: Flask, redis_conn: redis.Redis) -> None:
    body = orjson.dumps(FIX_COMMENT)
    other = orjson.dumps(comment("/spark fix something else"))
    unsigned = {k: v for k, v in _headers(body).items() if k != "X-Hub-Signature-256"}
    cases = {
        "unsigned": (body, unsigned),
        "wrong secret": (body, _headers(body, **{"X-Hub-Signature-256": sign(b"guess", body)})),
        "signature of another body": (
            body,
            _headers(body, **{"X-Hub-Signature-256": sign(SECRET.encode(), other)}),
        ),
        "sha1 header only": (body, {**unsigned, "X-Hub-Signature": "sha1=" + "0" * 40}),
        "truncated signature": (
            body,
            _headers(body, **{"X-Hub-Signature-256": sign(SECRET.encode(), body)[:-2]}),
        ),
        "empty signature": (body, _headers(body, **{"X-Hub-Signature-256": ""})),
    }
    statuses = {name: _raw_post(app, raw, headers) for name, (raw, headers) in cases.items()}
    assert statuses == dict.fromkeys(cases, 401)
    assert queued(redis_conn) == []
    assert redis_conn.keys("spark:delivery:*") == []


def test_replayed_delivery_queues_once(post: Post, redis_conn: redis.Redis) -> None:
    delivery = str(uuid.uuid4())
    statuses = [post("issue_comment", FIX_COMMENT, delivery=delivery).status_code for _ in range(5)]
    assert statuses == [202, 200, 200, 200, 200]
    assert len(queued(redis_conn)) == 1
    # The same id with another (validly signed) body is still the same delivery: nothing new is queued.
    assert post("issue_comment", comment("/spark fix other"), delivery=delivery).status_code == 200
    assert len(queued(redis_conn)) == 1


@pytest.mark.parametrize(
    ("kwargs", "status"),
    [
        ({"body": b"{not json"}, 400),
        ({"body": b"\xff\xfe\x00"}, 400),
        ({"body": b"[1, 2]"}, 400),
        ({"body": b""}, 400),
        ({"content_type": "text/plain"}, 415),
        ({"content_type": "application/xml"}, 415),
        ({"payload": comment(7)}, 400),  # type: ignore[arg-type]
        ({"payload": {**FIX_COMMENT, "installation": {"id": "12"}}}, 400),
        ({"payload": {**FIX_COMMENT, "issue": {**FIX_COMMENT["issue"], "number": 1.5}}}, 400),
        ({"payload": {**FIX_COMMENT, "comment": {**FIX_COMMENT["comment"], "id": None}}}, 400),
        ({"payload": {**FIX_COMMENT, "repository": []}}, 400),
        ({"headers": {"X-GitHub-Delivery": "../../etc/passwd"}}, 400),
        ({"headers": {"X-GitHub-Delivery": None}}, 400),
        ({"headers": {"X-GitHub-Event": "Issue Comment"}}, 400),
    ],
    ids=lambda value: str(value)[:40],
)
def test_malformed_deliveries_get_a_reason_and_queue_nothing(
    post: Post, redis_conn: redis.Redis, kwargs: dict[str, Any], status: int
) -> None:
    kwargs.setdefault("payload", FIX_COMMENT)
    response = post("issue_comment", **kwargs)
    assert response.status_code == status
    assert response.json is not None and response.json["error"]
    assert queued(redis_conn) == []
    assert redis_conn.keys("spark:delivery:*") == []


def test_oversized_body_is_refused_before_it_is_read(redis_conn: redis.Redis) -> None:
    app = create_app(make_settings(SPARK_MAX_BODY_BYTES="65536"), redis_conn)
    post = signed_post(app.test_client())
    response = post("issue_comment", comment("/spark fix " + "x" * 70_000))
    assert response.status_code == 413
    assert queued(redis_conn) == []


@pytest.mark.parametrize(
    "text",
    [
        "x" * 65_000,  # GitHub's comment limit is 65,536 characters
        "naïve – “quotes” 🚀 中文 עברית \u202e reversed \u200b zero-width",
        "line one\r\nline two\n\n```python\nprint('hi')\n```",
    ],
    ids=["long", "unicode", "multiline"],
)
def test_long_and_unicode_comments_are_queued_intact(post: Post, redis_conn: redis.Redis, text: str) -> None:
    response = post("issue_comment", comment(f"/spark fix {text}"))
    assert response.status_code == 202
    (job,) = queued(redis_conn)
    assert job.kwargs["command"]["name"] == "fix"
    assert job.kwargs["command"]["text"].split() == text.split()


def test_commands_from_bots_and_the_app_itself_are_not_queued(post: Post, redis_conn: redis.Redis) -> None:
    bot_user = {"login": "dependabot[bot]", "id": 49699333, "type": "Bot"}
    app_user = {"login": "spark[bot]", "id": 1, "type": "Bot"}
    for user in (bot_user, app_user):
        payload = {**FIX_COMMENT, "comment": {**FIX_COMMENT["comment"], "user": user}, "sender": user}
        response = post("issue_comment", payload)
        assert response.status_code == 202
        assert response.json is not None and response.json["status"] == "ignored"
    via_app = {**FIX_COMMENT, "comment": {**FIX_COMMENT["comment"], "performed_via_github_app": {"id": 1}}}
    assert post("issue_comment", via_app).json == {"status": "ignored", "reason": "comment written by a bot"}
    assert queued(redis_conn) == []


def test_check_run_with_a_boolean_pull_request_number_is_not_queued(
    post: Post, redis_conn: redis.Redis
) -> None:
    """Found by the intake fuzzer: ``"number": true`` passed the int check and was queued as PR ``True``."""
    payload = orjson.loads((FIXTURES / "webhooks" / "check_run" / "rerequested.json").read_bytes())
    payload["check_run"]["pull_requests"][0]["number"] = True
    response = post("check_run", payload)
    assert response.status_code == 202
    assert response.json is not None and response.json["status"] == "ignored"
    assert queued(redis_conn) == []


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    index=st.integers(min_value=0),
    edits=st.lists(st.tuples(st.integers(min_value=0), JSON), min_size=1, max_size=3),
)
def test_fuzzed_payloads_never_crash_or_half_queue(
    app: Flask, redis_conn: redis.Redis, index: int, edits: list[tuple[int, Any]]
) -> None:
    """Real deliveries with fields replaced by values of any JSON type: 2xx only when stored, never 5xx."""
    samples = fuzz_intake.corpus()
    event, payload = samples[index % len(samples)]
    data = orjson.loads(orjson.dumps(payload))
    paths = fuzz_intake._paths(data)
    for at, value in edits:
        try:
            fuzz_intake._set(data, paths[at % len(paths)], value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit replaced this path's parent
    delivery = str(uuid.uuid4())
    before = len(queued(redis_conn))
    # The standard encoder, not orjson: it writes integers beyond 64 bits, which the receiver must refuse.
    body = json.dumps(data).encode()
    response = signed_post(app.test_client())(event, body=body, delivery=delivery)
    assert response.status_code in (200, 202, 400), response.json
    stored: bytes | None = redis_conn.get(f"spark:delivery:{delivery}")  # type: ignore[assignment]
    answer = response.json or {}
    if answer.get("status") == "queued":
        assert stored is not None and len(queued(redis_conn)) == before + len(stored_job_ids(stored))
        assert len(stored_job_ids(stored)) == len(answer["jobs"])
    else:
        assert stored is None and len(queued(redis_conn)) == before


def test_intake_fuzzer_finds_no_crash() -> None:
    """A short run of the fuzzer the report runs for a million inputs (parse, route, build job arguments)."""
    crashes, tally, _seconds = fuzz_intake.run(
        EXAMPLES * 10, seed=int(os.environ.get("SPARK_FUZZ_SEED") or 1)
    )
    assert crashes == 0
    assert tally["400 bad delivery"] and tally["202 ignored"]
    assert any(label.startswith("202 queued") for label in tally)
