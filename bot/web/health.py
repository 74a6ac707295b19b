"""Health checks: ``/healthz`` (the process is up) and ``/readyz`` (a delivery can be stored now)."""

from __future__ import annotations

import redis
from flask import Blueprint, Response

from bot.web.state import current_state, json_response

blueprint = Blueprint("health", __name__)


@blueprint.get("/healthz")
def healthz() -> Response:
    """Answer 200 while the process is up."""
    return json_response(200, {"status": "ok"})


@blueprint.get("/readyz")
def readyz() -> Response:
    """Answer 200 when a delivery can be stored the way the intake stores one, else 503."""
    try:
        current_state().queue.check()
    except redis.RedisError as exc:
        return json_response(503, {"status": "unavailable", "error": f"redis: {type(exc).__name__}"})
    return json_response(200, {"status": "ready"})
