"""Fixtures for the security suite: whole stacks from tests/e2e (the app and post: tests/conftest.py)."""

from __future__ import annotations

from tests.e2e.conftest import e2e_redis_url, start  # noqa: F401 - shared end-to-end fixtures
