"""One webhook delivery: its headers and body turned into a typed value, or a clear reason why not."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import parse_qs

import msgspec

from bot.intake.payloads import Event

# GitHub sends a GUID; RQ job ids allow letters, digits, "_" and "-", so anything else is refused at the door.
_DELIVERY_ID = re.compile(r"\A[A-Za-z0-9_-]{1,100}\Z")
_EVENT = re.compile(r"\A[a-z_]{1,64}\Z")

T = TypeVar("T")
P = TypeVar("P", bound=Event, covariant=True)


class BadDelivery(Exception):
    """A delivery Spark cannot accept, with the HTTP status and a reason for the sender."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Delivery(Generic[P]):
    """A verified delivery: event (``X-GitHub-Event``), id (``X-GitHub-Delivery``) and its typed payload."""

    event: str
    delivery_id: str
    payload: P

    @property
    def action(self) -> str:
        """Return the payload's ``action`` ("" for events without one, such as ``push``)."""
        return action_of(self.payload)


def action_of(payload: Event) -> str:
    """Return a payload's ``action``, or "" when it has none (or one that is not a string)."""
    action = payload.action
    return action if isinstance(action, str) else ""


def parse_delivery(
    event: str | None,
    delivery_id: str | None,
    content_type: str | None,
    body: bytes,
    decode: Callable[[str, bytes], Event],
) -> Delivery[Event]:
    """Build a ``Delivery`` from the headers and the verified raw body, its payload decoded by ``decode``.

    Raises ``BadDelivery`` for a missing or malformed header, body or payload field.
    """
    if not delivery_id:
        raise BadDelivery(400, "missing X-GitHub-Delivery header")
    if not _DELIVERY_ID.match(delivery_id):
        raise BadDelivery(400, "X-GitHub-Delivery must be letters, digits, '-' or '_' (at most 100)")
    if not event:
        raise BadDelivery(400, "missing X-GitHub-Event header")
    if not _EVENT.match(event):
        raise BadDelivery(400, "X-GitHub-Event is not an event name")
    return Delivery(
        event=event, delivery_id=delivery_id, payload=decode(event, json_body(content_type, body))
    )


def json_body(content_type: str | None, body: bytes) -> bytes:
    """Return the JSON of a body sent as JSON or in GitHub's form encoding (``payload=<json>``)."""
    mimetype = (content_type or "").split(";", 1)[0].strip().lower()
    if mimetype == "application/json":
        return body
    if mimetype != "application/x-www-form-urlencoded":
        raise BadDelivery(415, "Content-Type must be application/json or application/x-www-form-urlencoded")
    # GitHub offers this content type for webhooks; the signature covered the encoded body already.
    try:
        fields = parse_qs(body.decode("utf-8"), strict_parsing=True, max_num_fields=16)
    except (UnicodeDecodeError, ValueError):
        raise BadDelivery(400, "form body is not valid application/x-www-form-urlencoded") from None
    values = fields.get("payload")
    if not values or len(values) != 1:
        raise BadDelivery(400, "form body has no single 'payload' field")
    return values[0].encode("utf-8")


def decode_payload(raw: bytes, schema: type[T]) -> T:
    """Decode a JSON payload object as ``schema``, or raise a 400 ``BadDelivery`` with msgspec's reason.

    msgspec names the field and its path: ``Expected `int`, got `str` - at `$.pull_request.number```.
    """
    try:
        return msgspec.json.decode(raw, type=schema)
    except msgspec.ValidationError as exc:
        raise BadDelivery(400, str(exc)) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise BadDelivery(400, f"body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadDelivery(400, "body is not valid JSON: nested too deeply") from None
