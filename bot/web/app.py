"""The Flask app: ``create_app`` builds the shared state and registers every blueprint.

``BLUEPRINTS`` is the one place to add pages; each blueprint finds the settings and Redis client through
``bot.web.state.current_state()``.
"""

from __future__ import annotations

import redis
from flask import Blueprint, Flask

from bot.intake.enqueue import DeliveryQueue, client_options
from bot.intake.handlers import router
from bot.logs import configure_logging, get_logger
from bot.redis_server import connect
from bot.settings import Settings
from bot.web import health, metrics, webhooks
from bot.web.setup import needs_setup, setup_blueprint
from bot.web.state import EXTENSION, SparkState

# Registered in this order by create_app.
BLUEPRINTS: tuple[Blueprint, ...] = (
    webhooks.blueprint,
    health.blueprint,
    setup_blueprint(),
    metrics.blueprint,
)


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
    app.extensions[EXTENSION] = SparkState(
        settings=settings,
        redis=redis,
        queue=DeliveryQueue(redis),
        router=router,
        secret=secret.get_secret_value().encode() if secret else b"",
        log=get_logger("spark.web").bind(),
    )
    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint)
    return app
