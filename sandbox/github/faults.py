"""Fault injection: added latency, canned error responses, and actions run on the Nth matching request."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from sandbox.github.ratelimits import SECONDARY_MESSAGE, ContentLimits, PrimaryUse


@dataclass
class Injection:
    """A canned response served instead of the real one for requests matching method and path."""

    status: int
    method: str
    path: re.Pattern[str]
    times: int
    headers: dict[str, str]
    body: object
    hits: int = 0


@dataclass
class Trigger:
    """An action run (before the request is served) on the Nth request matching method and path."""

    method: str
    path: re.Pattern[str]
    nth: int
    action: Callable[[], object]
    seen: int = 0
    fired: bool = False


@dataclass
class Faults:
    """The sandbox's fault knobs; change them at any time, from any thread."""

    latency: float = 0.0  # seconds added to every API call
    webhooks_enabled: bool = True
    rate_limit: int = 5000  # primary limit per installation per hour (GitHub's minimum for an installation)
    primary: PrimaryUse = field(default_factory=PrimaryUse)  # each token's use of ``rate_limit`` this hour
    content: ContentLimits = field(default_factory=ContentLimits)  # the secondary content-creation limits
    injections: list[Injection] = field(default_factory=list)
    lost: list[Injection] = field(default_factory=list)
    triggers: list[Trigger] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def inject(
        self,
        status: int,
        method: str = "*",
        path: str = ".*",
        times: int = 1,
        headers: dict[str, str] | None = None,
        body: object = None,
    ) -> Injection:
        """Answer the next ``times`` requests whose path matches the regex ``path`` with ``status``."""
        rule = Injection(status, method.upper(), re.compile(path), times, dict(headers or {}), body)
        with self._lock:
            self.injections.append(rule)
        return rule

    def secondary_rate_limit(self, method: str = "*", path: str = ".*", retry_after: int = 1) -> Injection:
        """Answer once with GitHub's 403 secondary rate limit and a Retry-After header."""
        return self.inject(
            403, method, path, headers={"Retry-After": str(retry_after)}, body={"message": SECONDARY_MESSAGE}
        )

    def lose_answer(self, method: str = "*", path: str = ".*", times: int = 1) -> Injection:
        """Serve the next ``times`` matching requests (writes happen), then drop the connection unanswered.

        The client sees a reset where an answer should be, as after a timeout or a dropped connection.
        """
        rule = Injection(0, method.upper(), re.compile(path), times, {}, None)
        with self._lock:
            self.lost.append(rule)
        return rule

    def take_lost(self, method: str, path: str) -> bool:
        """Return whether this request's answer is to be lost (consuming one use of the rule)."""
        with self._lock:
            for rule in self.lost:
                if rule.hits < rule.times and rule.method in ("*", method) and rule.path.search(path):
                    rule.hits += 1
                    return True
        return False

    def on_request(self, method: str, path: str, action: Callable[[], object], nth: int = 1) -> Trigger:
        """Run ``action`` just before serving the ``nth`` request matching method and path (move a head)."""
        trigger = Trigger(method.upper(), re.compile(path), nth, action)
        with self._lock:
            self.triggers.append(trigger)
        return trigger

    def clear(self) -> None:
        """Remove every injection and trigger and the added latency."""
        with self._lock:
            self.injections.clear()
            self.triggers.clear()
            self.lost.clear()
            self.latency = 0.0

    def take_injection(self, method: str, path: str) -> Injection | None:
        """Return the injection that answers this request (consuming one use), if any."""
        with self._lock:
            for rule in self.injections:
                if rule.hits < rule.times and rule.method in ("*", method) and rule.path.search(path):
                    rule.hits += 1
                    return rule
        return None

    def due_triggers(self, method: str, path: str) -> list[Trigger]:
        """Count this request against every trigger and return those that fire now."""
        due: list[Trigger] = []
        with self._lock:
            for trigger in self.triggers:
                if trigger.fired or trigger.method not in ("*", method) or not trigger.path.search(path):
                    continue
                trigger.seen += 1
                if trigger.seen >= trigger.nth:
                    trigger.fired = True
                    due.append(trigger)
        return due
