"""Structured logging with structlog: one JSON object per line, with context (delivery id, job id) bound.

Secrets never reach a log line: settings hold them as ``SecretStr`` (masked when rendered), payloads are not
logged, and the last processors mask any field whose name says it is a credential and any configured secret's
value found inside a field (an exception's text, a library's message).
"""

from __future__ import annotations

import functools
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
# The root logger's handler this module installed (replaced, not duplicated, on reconfiguration).
_stdlib_handler: logging.Handler | None = None


def redact_secrets(
    _logger: object, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Mask the value of every field named like a credential."""
    for name in event_dict:
        if _named_like_a_secret(name):
            event_dict[name] = REDACTED
    return event_dict


class MaskSecretValues:
    """Replace every secret value of the settings found inside a text field (an error's message, say)."""

    def __init__(self, values: list[str]) -> None:
        self.values = values

    def __call__(
        self, _logger: object, _method: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        """Mask the values in place; a line without any costs one substring test per secret and field."""
        for name, value in event_dict.items():
            if isinstance(value, str) and any(secret in value for secret in self.values):
                event_dict[name] = mask(value, self.values)
        return event_dict


def mask(text: str, values: list[str]) -> str:
    """Return ``text`` with each of ``values`` replaced by ``[redacted]``."""
    for value in values:
        text = text.replace(value, REDACTED)
    return text


# Terminal colour codes: RQ colours its own messages even when they go to a file or a JSON log.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def strip_colours(
    _logger: object, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Remove terminal colour codes from a library's message."""
    event = event_dict.get("event")
    if isinstance(event, str) and "\x1b[" in event:
        event_dict["event"] = _ANSI.sub("", event)
    return event_dict


# Field names come from the code's log calls, a few dozen in all; a line has about ten.
@functools.lru_cache(maxsize=1024)
def _named_like_a_secret(name: str) -> bool:
    return _SECRET_FIELD.search(name) is not None


def configure_logging(settings: Settings) -> None:
    """Set up structlog (and the standard library's root logger) for ``settings.log_level`` and format."""
    global _stdlib_handler
    level = logging.getLevelNamesMapping()[settings.log_level]
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    masked = MaskSecretValues(settings.secret_values())
    processors: list[Any] = [*shared, structlog.processors.format_exc_info, redact_secrets, masked]
    json_format = settings.spark_log_format == "json"
    if json_format:
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
    # Libraries (RQ, httpx, werkzeug) log through the standard library: render their records the same way,
    # with the same bound ids, so every line is one structured object.
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name, strip_colours, redact_secrets],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            masked,
            structlog.processors.JSONRenderer()
            if json_format
            else structlog.dev.ConsoleRenderer(colors=False),
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    if _stdlib_handler is not None:
        root.removeHandler(_stdlib_handler)
    root.addHandler(handler)
    root.setLevel(level)
    _stdlib_handler = handler


def get_logger(name: str) -> FilteringBoundLogger:
    """Return a structlog logger whose lines carry ``component=name``."""
    logger: FilteringBoundLogger = structlog.get_logger(component=name)
    return logger
