"""One webhook delivery: its headers and body turned into a typed value, or a clear reason why not."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qs

import msgspec

from bot.intake.payloads import Event

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
    payload: Event

    @property
    def action(self) -> str:
        """Return the payload's ``action`` ("" for events without one, such as ``push``)."""
        action = self.payload.action
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


def lookup(payload: Event, path: str) -> Any:
    """Return the value at dotted ``path`` in ``payload``, or ``None`` when any step is missing."""
    value: Any = payload
    for part in path.split("."):
        if not isinstance(value, msgspec.Struct):
            return None
        value = getattr(value, part, None)
    return value


def parse_delivery(
    event: str | None, delivery_id: str | None, content_type: str | None, body: bytes, schema: type[Event]
) -> Delivery:
    """Build a ``Delivery`` (its payload decoded as ``schema``) from the headers and the verified raw body.

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
    payload = decode_payload(json_body(content_type, body), schema)
    return Delivery(event=event, delivery_id=delivery_id, payload=payload)


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


# msgspec's word for each JSON type, mapped to the Python type whose name a reason gives.
_MSGSPEC_TYPES = {"int": int, "str": str, "bool": bool, "object": dict, "array": list}
_WRONG_TYPE = re.compile(r"Expected `(?P<expected>[a-z]+)[^`]*`(?P<rest>.*?) - at `\$\.?(?P<path>[^`]*)`")


def decode_payload(raw: bytes, schema: type[T]) -> T:
    """Decode a JSON payload object as ``schema``, or raise a ``BadDelivery`` saying what is wrong."""
    try:
        return msgspec.json.decode(raw, type=schema)
    except msgspec.ValidationError as exc:
        message = str(exc)
        if " - at `$" not in message:
            raise BadDelivery(400, "payload must be a JSON object") from None
        wrong = _WRONG_TYPE.match(message)
        if wrong is None:
            path = message.rsplit(" - at `$", 1)[1].strip("`.")
            raise BadDelivery(400, f"payload field {path}: {message.rsplit(' - at ', 1)[0]}") from None
        expected = _MSGSPEC_TYPES.get(wrong["expected"])
        kind = _KIND_NAMES[expected] if expected else wrong["expected"]
        detail = wrong["rest"].replace("`", "")
        raise BadDelivery(400, f"payload field {wrong['path']} is not {kind}{detail}") from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise BadDelivery(400, f"body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadDelivery(400, "body is not valid JSON: nested too deeply") from None
