"""``GET /metrics``: every metric Spark records, plus the live depth of its queues read from Redis."""

from __future__ import annotations

from flask import Blueprint, Response
from prometheus_client import CONTENT_TYPE_LATEST

from bot.metrics import render_metrics
from bot.web.state import current_state

blueprint = Blueprint("metrics", __name__)


@blueprint.get("/metrics")
def metrics() -> Response:
    """Return the Prometheus text exposition."""
    spark = current_state()
    return Response(render_metrics(spark.redis, spark.queue.names), mimetype=CONTENT_TYPE_LATEST)
