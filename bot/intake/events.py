"""One webhook delivery: its headers and body turned into a typed value, or a clear reason why not."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qs

import orjson

# GitHub sends a GUID; RQ job ids allow letters, digits, "_" and "-", so anything else is refused at the door.
_DELIVERY_ID = re.compile(r"\A[A-Za-z0-9_-]{1,100}\Z")
_EVENT = re.compile(r"\A[a-z_]{1,64}\Z")

T = TypeVar("T")


class BadDelivery(Exception):
    """A delivery Spark cannot accept, with the HTTP status and a reason for the sender."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Delivery:
    """A verified delivery: event (``X-GitHub-Event``), id (``X-GitHub-Delivery``) and payload."""

    event: str
    delivery_id: str
    payload: dict[str, Any]

    @property
    def action(self) -> str:
        """Return the payload's ``action`` ("" for events without one, such as ``push``)."""
        action = self.payload.get("action")
        return action if isinstance(action, str) else ""

    def get(self, path: str, kind: type[T]) -> T:
        """Return the value at dotted ``path``, or raise a 400 ``BadDelivery`` naming it."""
        value = lookup(self.payload, path)
        # bool is an int in Python; a number field holding true is still malformed.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise BadDelivery(
                400, f"payload field {path} is missing or not {_KIND_NAMES.get(kind, kind.__name__)}"
            )
        return value

    def optional(self, path: str, kind: type[T]) -> T | None:
        """Return the value at dotted ``path`` when present and of ``kind``; ``None`` when absent or null."""
        value = lookup(self.payload, path)
        if value is None:
            return None
        return self.get(path, kind)


_KIND_NAMES = {int: "an integer", str: "a string", dict: "an object", list: "a list", bool: "a boolean"}


def lookup(payload: dict[str, Any], path: str) -> Any:
    """Return the value at dotted ``path`` in ``payload``, or ``None`` when any step is missing."""
    value: Any = payload
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def parse_delivery(
    event: str | None, delivery_id: str | None, content_type: str | None, body: bytes
) -> Delivery:
    """Build a ``Delivery`` from the headers and the (already verified) raw body, or raise ``BadDelivery``."""
    if not delivery_id:
        raise BadDelivery(400, "missing X-GitHub-Delivery header")
    if not _DELIVERY_ID.match(delivery_id):
        raise BadDelivery(400, "X-GitHub-Delivery must be letters, digits, '-' or '_' (at most 100)")
    if not event:
        raise BadDelivery(400, "missing X-GitHub-Event header")
    if not _EVENT.match(event):
        raise BadDelivery(400, "X-GitHub-Event is not an event name")
    payload = parse_body(content_type, body)
    return Delivery(event=event, delivery_id=delivery_id, payload=payload)


def parse_body(content_type: str | None, body: bytes) -> dict[str, Any]:
    """Decode a JSON body, or GitHub's form encoding (``payload=<json>``), into the payload object."""
    mimetype = (content_type or "").split(";", 1)[0].strip().lower()
    if mimetype == "application/json":
        raw = body
    elif mimetype == "application/x-www-form-urlencoded":
        # GitHub offers this content type for webhooks; the signature covered the encoded body already.
        try:
            fields = parse_qs(body.decode("utf-8"), strict_parsing=True, max_num_fields=16)
        except (UnicodeDecodeError, ValueError):
            raise BadDelivery(400, "form body is not valid application/x-www-form-urlencoded") from None
        values = fields.get("payload")
        if not values or len(values) != 1:
            raise BadDelivery(400, "form body has no single 'payload' field")
        raw = values[0].encode("utf-8")
    else:
        raise BadDelivery(415, "Content-Type must be application/json or application/x-www-form-urlencoded")
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadDelivery(400, f"body is not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise BadDelivery(400, "payload must be a JSON object")
    return payload
