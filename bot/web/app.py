"""The Flask app: verify each webhook, decide what it leads to, enqueue it; plus health checks.

The web process only verifies, decides and enqueues. Blueprints are registered in ``BLUEPRINTS``, the one
place to add pages (setup, metrics); they find the settings and Redis client in ``app.extensions["spark"]``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import redis
from flask import Blueprint, Flask, Response, current_app, request
from structlog.typing import FilteringBoundLogger
from werkzeug.exceptions import RequestEntityTooLarge

from bot.intake import signature
from bot.intake.enqueue import DeliveryQueue, client_options
from bot.intake.events import BadDelivery, parse_delivery
from bot.intake.handlers import router
from bot.intake.routing import Router
from bot.logs import configure_logging, get_logger
from bot.metrics import metrics_blueprint, record_delivery
from bot.redis_server import connect
from bot.settings import Settings
from bot.web.setup import needs_setup, setup_blueprint

WEBHOOK_PATH = "/api/github/webhooks"


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


def state() -> SparkState:
    """Return the running app's ``SparkState``."""
    spark: SparkState = current_app.extensions["spark"]
    return spark


def json_response(status: int, body: dict[str, Any]) -> Response:
    """Return ``body`` as a JSON response."""
    return Response(orjson.dumps(body), status=status, mimetype="application/json")


webhooks = Blueprint("webhooks", __name__)
health = Blueprint("health", __name__)


@webhooks.post(WEBHOOK_PATH)
def receive_webhook() -> Response:
    """Verify, decide and enqueue one delivery; answer only once Redis holds its jobs."""
    spark = state()
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
        schema = spark.router.payload_type(event)
        delivery = parse_delivery(event, delivery_id, request.content_type, body, schema)
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


@health.get("/healthz")
def healthz() -> Response:
    """Answer 200 while the process is up."""
    return json_response(200, {"status": "ok"})


@health.get("/readyz")
def readyz() -> Response:
    """Answer 200 when a delivery can be stored the way the intake stores one, else 503."""
    try:
        state().queue.check()
    except redis.RedisError as exc:
        return json_response(503, {"status": "unavailable", "error": f"redis: {type(exc).__name__}"})
    return json_response(200, {"status": "ready"})


# The one place pages are added: (blueprint factory) -> registered in order by create_app.
BLUEPRINTS: list[Callable[[], Blueprint]] = [
    lambda: webhooks,
    lambda: health,
    setup_blueprint,
    metrics_blueprint,
]


def create_app(settings: Settings | None = None, redis: redis.Redis | None = None) -> Flask:
    """Build the Flask app; refuses to start without a webhook secret (verification is never off)."""
    if settings is None:
        settings = Settings.load()
    # First run (nothing of the App configured yet): serve /setup to register it; webhooks get 503 meanwhile.
    if not needs_setup(settings):
        settings.require_web()
    secret = settings.github_webhook_secret
    configure_logging(settings)
    if redis is None:
        redis = connect(settings.redis_url, settings.spark_data_dir, role="web", **client_options())
    app = Flask("spark")
    app.config["MAX_CONTENT_LENGTH"] = settings.spark_max_body_bytes
    app.extensions["spark"] = SparkState(
        settings=settings,
        redis=redis,
        queue=DeliveryQueue(redis),
        router=router,
        secret=secret.get_secret_value().encode() if secret else b"",
        log=get_logger("spark.web").bind(),
    )
    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint())
    return app
