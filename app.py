"""WSGI entry point for a WSGI server: ``granian --interface wsgi app:app`` (``spark serve`` runs granian)."""

import sys

import redis

from bot.web.app import create_app
from bot.web.setup import SETUP_TOKEN_CONFIG, needs_setup, setup_token
from bot.web.state import EXTENSION

app = create_app()
# As under `spark serve`: /setup opens only with the token said here (Redis', the same in every process).
app.config[SETUP_TOKEN_CONFIG] = True
_spark = app.extensions[EXTENSION]
if needs_setup(_spark.settings):
    try:
        _where = f"/setup?token={setup_token(_spark.redis)}"
    except redis.RedisError as exc:
        _where = f"/setup (its token once Redis answers: {type(exc).__name__})"
    print(f"spark: no GitHub App is configured yet; register one at {_where}", file=sys.stderr, flush=True)
