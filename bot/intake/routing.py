"""The handler registry: handlers, registered by event and action, return what to queue (never queue it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bot.intake.events import BadDelivery, Delivery, action_of, decode_payload
from bot.intake.payloads import Event

INTERACTIVE = "spark-interactive"
REVIEW = "spark-review"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job to enqueue: the worker function by dotted path, its queue, and small JSON-able kwargs."""

    func: str
    queue: str
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Signal:
    """A signal to raise the moment the event arrives, for running jobs to read from Redis.

    A single busy worker cannot run a new job until the old one ends, so the old one must learn from Redis,
    right away, that a newer ``/spark fix``, a ``/spark stop``, a close or a push made it stale
    (``bot.cancel``), or that another check failed on the head it is reading the failures of.
    """

    # "supersede" (value: the newer job's order), "stop", "head" (value: the new head SHA), or an ask a
    # running job verifies first: "ask-stop", "ask-supersede" (value: the newer job's order); or
    # "check-failed" (``pr_key``: the head's key, value: the check run id, data: the check as JSON).
    kind: str
    pr_key: str
    job_kind: str = ""
    value: str | int = ""
    # Who raised it (the commenter's login): a cancelled job tells its requester who stopped it.
    by: str = ""
    data: str = ""


@dataclass(frozen=True, slots=True)
class Decision:
    """What a delivery leads to: jobs to queue, or none and the reason it is ignored."""

    jobs: tuple[JobSpec, ...] = ()
    reason: str = ""
    signals: tuple[Signal, ...] = ()

    @property
    def ignored(self) -> bool:
        """Return whether nothing is to be stored (no job and no signal)."""
        return not self.jobs and not self.signals


def queue(*jobs: JobSpec, signals: tuple[Signal, ...] = ()) -> Decision:
    """Return a decision to queue ``jobs`` and raise ``signals`` (in the same transaction)."""
    return Decision(jobs=jobs, signals=signals)


def ignore(reason: str) -> Decision:
    """Return a decision to queue nothing, with a short reason for the response."""
    return Decision(reason=reason)


E = TypeVar("E", bound=Event)
# A handler reads the struct its event was registered with (``Router.decode`` decodes it as that).
Handler = Callable[[Delivery[Any]], Decision]


class Router:
    """Maps (event, action) to a handler; ``action=None`` registers for every action of an event.

    Each event has one payload struct (``bot.intake.payloads``) its handlers read; an event without a handler
    is decoded for its action only.
    """

    def __init__(self) -> None:
        self._handlers: dict[tuple[str, str | None], Handler] = {}
        self._schemas: dict[str, type[Event]] = {}

    def register(
        self, event: str, schema: type[E], *actions: str
    ) -> Callable[[Callable[[Delivery[E]], Decision]], Callable[[Delivery[E]], Decision]]:
        """Decorate a handler of ``event`` payloads decoded as ``schema``, for ``actions`` (none: all)."""
        if self._schemas.setdefault(event, schema) is not schema:
            raise ValueError(f"{event} payloads are decoded as {self._schemas[event].__name__} already")

        def decorator(handler: Callable[[Delivery[E]], Decision]) -> Callable[[Delivery[E]], Decision]:
            for action in actions or (None,):
                key = (event, action)
                if key in self._handlers:
                    raise ValueError(f"two handlers for {event}.{action or '*'}")
                self._handlers[key] = handler
            return handler

        return decorator

    def payload_type(self, event: str) -> type[Event]:
        """Return what an ``event`` payload is decoded as: its handlers' struct, or only the action."""
        return self._schemas.get(event, Event)

    def decode(self, event: str, raw: bytes) -> Event:
        """Decode an ``event`` payload as its struct; ``BadDelivery`` (400) when a handler would act on it.

        A payload whose action no handler acts on is not refused for fields only a handler reads: it is
        decoded again for its action alone (only a malformed delivery pays for a second decode).
        """
        schema = self.payload_type(event)
        try:
            return decode_payload(raw, schema)
        except BadDelivery:
            if schema is Event:
                raise
            action_only = decode_payload(raw, Event)  # refuses what is not even a JSON object
            if self.handler_for(event, action_of(action_only)) is None:
                return action_only
            raise

    def handler_for(self, event: str, action: str) -> Handler | None:
        """Return the handler for this event and action, if one is registered."""
        return self._handlers.get((event, action)) or self._handlers.get((event, None))

    def decide(self, delivery: Delivery[Event]) -> Decision:
        """Return what ``delivery`` leads to; ``BadDelivery`` propagates when a needed field is missing."""
        handler = self.handler_for(delivery.event, delivery.action)
        if handler is None:
            what = f"{delivery.event}.{delivery.action}" if delivery.action else delivery.event
            return ignore(f"{what} is not acted on")
        return handler(delivery)

    @property
    def routes(self) -> list[tuple[str, str | None]]:
        """Return every registered (event, action) pair."""
        return sorted(self._handlers, key=lambda key: (key[0], key[1] or ""))
