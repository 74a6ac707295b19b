"""Fixtures for the security suite: the intake on the private Redis, and whole stacks from tests/e2e."""

from __future__ import annotations

import pytest
import redis
from flask import Flask

from bot.web.app import create_app
from tests.e2e.conftest import e2e_redis_url, start  # noqa: F401 - shared end-to-end fixtures
from tests.intake.conftest import Post, make_settings, signed_post


@pytest.fixture()
def app(redis_conn: redis.Redis) -> Flask:
    """Return the receiver wired to the private Redis (emptied for each test)."""
    return create_app(make_settings(), redis_conn)


@pytest.fixture()
def post(app: Flask) -> Post:
    """Sign and post a delivery to the receiver."""
    return signed_post(app.test_client())
