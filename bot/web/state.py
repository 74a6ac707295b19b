"""What the app's views share: settings, the Redis client, the queue, the router, and how they answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
import redis
from flask import Response, current_app
from structlog.typing import FilteringBoundLogger

from bot.intake.enqueue import DeliveryQueue
from bot.intake.routing import Router
from bot.settings import Settings

# Where create_app keeps the state; blueprints read it through ``current_state()``.
EXTENSION = "spark"


@dataclass(frozen=True, slots=True)
class SparkState:
    """What the app's views share: settings, the Redis client, the queue and the router."""

    settings: Settings
    redis: redis.Redis
    queue: DeliveryQueue
    router: Router
    secret: bytes
    # Bound once, after logging is configured: the lazy module-level proxy rebuilds its logger on every call.
    log: FilteringBoundLogger


def current_state() -> SparkState:
    """Return the running app's ``SparkState``."""
    spark: SparkState = current_app.extensions[EXTENSION]
    return spark


def json_response(status: int, body: dict[str, Any]) -> Response:
    """Return ``body`` as a JSON response."""
    return Response(orjson.dumps(body), status=status, mimetype="application/json")
