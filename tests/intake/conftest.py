"""Fixtures for the intake tests: the Flask app on the private Redis, and a helper that signs and posts."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import orjson
import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from bot.intake.signature import sign
from bot.settings import Settings
from bot.web.app import create_app
from bot.web.webhooks import WEBHOOK_PATH

SECRET = "test-webhook-secret"

Post = Callable[..., TestResponse]


def make_settings(**extra: str) -> Settings:
    """Return settings with the test secret, reading no .env file."""
    return Settings.load(env={"GITHUB_WEBHOOK_SECRET": SECRET, **extra}, env_file=None)


@pytest.fixture()
def app(redis_conn: redis.Redis) -> Flask:
    """Return the app wired to the private Redis (emptied for each test)."""
    return create_app(make_settings(), redis_conn)


@pytest.fixture()
def client(app: Flask) -> FlaskClient:
    """Return a test client of the app."""
    return app.test_client()


def signed_post(client: FlaskClient) -> Post:
    """Return a function posting a signed delivery; every header can be overridden or dropped (``None``)."""

    def post(
        event: str,
        payload: Any = None,
        *,
        body: bytes | None = None,
        delivery: str | None = None,
        secret: str = SECRET,
        content_type: str = "application/json",
        headers: dict[str, str | None] | None = None,
    ) -> TestResponse:
        raw = body if body is not None else orjson.dumps(payload)
        sent: dict[str, str | None] = {
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-Hub-Signature-256": sign(secret.encode(), raw),
            "Content-Type": content_type,
            "User-Agent": "GitHub-Hookshot/test",
        }
        sent.update(headers or {})
        return client.post(WEBHOOK_PATH, data=raw, headers={k: v for k, v in sent.items() if v is not None})

    return post


@pytest.fixture()
def post(client: FlaskClient) -> Post:
    """Sign and post a delivery to the app."""
    return signed_post(client)
