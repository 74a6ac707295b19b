"""Structured logging with structlog: one JSON object per line, with context (delivery id, job id) bound.

Secrets never reach a log line: settings hold them as ``SecretStr`` (masked when rendered), payloads are not
logged, and a last processor masks any field whose name says it is a credential.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any

import orjson
import structlog
from structlog.typing import FilteringBoundLogger

from bot.settings import Settings

_SECRET_FIELD = re.compile(
    r"secret|token|password|private_key|signature|authorization|api_key", re.IGNORECASE
)
REDACTED = "[redacted]"


def redact_secrets(
    _logger: object, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Mask the value of every field named like a credential."""
    for name in event_dict:
        if _SECRET_FIELD.search(name):
            event_dict[name] = REDACTED
    return event_dict


def configure_logging(settings: Settings) -> None:
    """Set up structlog (and the standard library's root logger) for ``settings.log_level`` and format."""
    level = logging.getLevelNamesMapping()[settings.log_level]
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        redact_secrets,
    ]
    if settings.spark_log_format == "json":
        # orjson renders bytes, written straight to stdout without an encode step.
        processors.append(structlog.processors.JSONRenderer(serializer=orjson.dumps))
        factory: Any = structlog.BytesLoggerFactory()
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=False))
        factory = structlog.PrintLoggerFactory()
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=factory,
        # Not cached: a module-level logger then follows later configuration and the
        # current stdout; building one per call costs a few microseconds.
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


def get_logger(name: str) -> FilteringBoundLogger:
    """Return a structlog logger whose lines carry ``component=name``."""
    logger: FilteringBoundLogger = structlog.get_logger(component=name)
    return logger
