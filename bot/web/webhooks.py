"""``POST /api/github/webhooks``: verify each delivery, decide what it leads to, enqueue it, then answer.

The web process only verifies, decides and enqueues: a 2xx means Redis holds the delivery's jobs.
"""

from __future__ import annotations

import time
from typing import Any

import redis
from flask import Blueprint, Response, request
from structlog.typing import FilteringBoundLogger
from werkzeug.exceptions import RequestEntityTooLarge

from bot.intake import signature
from bot.intake.events import BadDelivery, parse_delivery
from bot.metrics import record_delivery
from bot.web.state import SparkState, current_state, json_response

WEBHOOK_PATH = "/api/github/webhooks"

blueprint = Blueprint("webhooks", __name__)


@blueprint.post(WEBHOOK_PATH)
def receive_webhook() -> Response:
    """Verify, decide and enqueue one delivery; answer only once Redis holds its jobs."""
    spark = current_state()
    started = time.perf_counter()
    delivery_id = request.headers.get("X-GitHub-Delivery", "")
    event = request.headers.get("X-GitHub-Event", "")
    # Bound to this delivery's logger rather than to context variables: cheaper, and the web process logs
    # nothing else about a delivery.
    log = spark.log.bind(delivery_id=delivery_id[:100], github_event=event[:64])
    try:
        status, body = _handle(spark, log, delivery_id, event)
    except RequestEntityTooLarge:
        status, body = 413, {"error": f"body over {spark.settings.spark_max_body_bytes} bytes"}
    elapsed = time.perf_counter() - started
    elapsed_ms = round(elapsed * 1000, 3)
    # Only a verified delivery's event header becomes a label (no unbounded label values from strangers).
    verified = status not in (401, 413) and bool(spark.secret)
    record_delivery(event if verified else "unverified", body.get("status", _outcome(status)), elapsed)
    log.info(
        "delivery", status=status, outcome=body.get("status", "rejected"), ms=elapsed_ms, **_reason(body)
    )
    return json_response(status, body)


def _outcome(status: int) -> str:
    return "unavailable" if status == 503 else "rejected"


def _reason(body: dict[str, Any]) -> dict[str, Any]:
    return {"reason": body["error"]} if "error" in body else {}


def _handle(
    spark: SparkState, log: FilteringBoundLogger, delivery_id: str, event: str
) -> tuple[int, dict[str, Any]]:
    # The size limit comes first: Werkzeug refuses on Content-Length before reading and caps the stream while
    # reading (MAX_CONTENT_LENGTH), so an oversized body is never buffered whole.
    if not spark.secret:
        return 503, {"error": "not configured: register the GitHub App at /setup, then restart"}
    body = request.get_data(cache=False)
    if request.content_length is None and len(body) >= spark.settings.spark_max_body_bytes:
        # A streamed (chunked) body is cut at the limit by Werkzeug rather than refused: refuse it here.
        raise RequestEntityTooLarge()
    if not signature.verify(spark.secret, body, request.headers.get("X-Hub-Signature-256")):
        return 401, {"error": "missing or invalid X-Hub-Signature-256"}
    try:
        delivery = parse_delivery(event, delivery_id, request.content_type, body, spark.router.decode)
        if delivery.event == "ping":
            return 200, {"status": "pong"}
        decision = spark.router.decide(delivery)
    except BadDelivery as exc:
        return exc.status, {"error": exc.reason}
    if decision.ignored:
        return 202, {"status": "ignored", "reason": decision.reason}
    try:
        enqueued = spark.queue.enqueue(delivery.delivery_id, decision.jobs, decision.signals)
    except redis.RedisError as exc:
        # Never 2xx for a delivery that is not stored: GitHub shows it as failed and it can be redelivered.
        log.warning("redis unavailable", error=type(exc).__name__)
        return 503, {"error": "queue unavailable, please redeliver"}
    if enqueued.duplicate:
        return 200, {"status": "duplicate", "reason": "delivery already received"}
    return 202, {"status": "queued", "jobs": [spec.func for spec in decision.jobs]}
