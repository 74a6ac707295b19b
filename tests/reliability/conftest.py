"""Fixtures for the reliability suite: real ``spark worker`` processes against the session's private Redis.

Sizes come from environment knobs so CI runs a short version and ``bench/report.py`` the full one:
``SPARK_RELIABILITY_DELIVERIES`` (load test deliveries), ``SPARK_FUZZ_EXAMPLES`` (hypothesis examples).
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.e2e.conftest import e2e_redis_url, start  # noqa: F401 - shared end-to-end fixtures

ROOT = Path(__file__).resolve().parents[2]


def knob(name: str, default: int) -> int:
    """Return the integer environment knob ``name`` (the report script raises the sizes), else ``default``."""
    return int(os.environ.get(name) or default)
