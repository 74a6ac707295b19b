"""GitHub's rate limits as Spark meets them: how long an answer asks to wait, and a write budget.

GitHub's rules (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api and
https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api):
- a primary or secondary limit answers 403 or 429; with ``retry-after``, wait that many seconds; with
  ``x-ratelimit-remaining: 0``, wait until ``x-ratelimit-reset``; otherwise wait at least a minute;
- content-creating requests go one at a time, at most 80 a minute and 500 an hour per installation.

``WriteBudget`` keeps the second rule inside one process (``spark review`` from a shell); the workers
share one budget per installation through Redis (``workers.limits.SharedWriteBudget``), since GitHub counts
an installation's writes across every process and machine. GitHub's own answers, handled by the first rule,
stay the backstop.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

SECONDARY_HINTS = ("secondary rate limit", "abuse detection", "rate limit exceeded")


@dataclass(frozen=True, slots=True)
class WriteLimits:
    """How Spark paces one installation's writes and how long a job may wait in place for GitHub."""

    per_minute: int = 80
    per_hour: int = 500
    # A wait GitHub asks for up to this long is slept inside the job; a longer one defers the job.
    max_inline_wait: float = 10.0
    # What "wait at least a minute" means when a limit answer names no time.
    secondary_wait: float = 60.0


def rate_limit_wait(
    status: int, headers: Mapping[str, str] | None, message: str, *, now: float, secondary_wait: float
) -> float | None:
    """Return the seconds a 403/429 answer asks Spark to wait, or None when it is no rate limit."""
    if status not in (403, 429):
        return None
    found = {key.lower(): str(value) for key, value in (headers or {}).items()}
    retry_after = found.get("retry-after", "")
    if retry_after.isdigit():
        return float(retry_after)
    reset = found.get("x-ratelimit-reset", "")
    if found.get("x-ratelimit-remaining") == "0" and reset.isdigit():
        # Plus a second: GitHub does not say where in that second the window resets.
        return max(float(reset) - now, 0.0) + 1.0
    if status == 429 or any(hint in message.lower() for hint in SECONDARY_HINTS):
        return secondary_wait
    return None  # a 403 that is a refusal, not a limit


class Budget(Protocol):
    """Where an installation's writes are counted against its minute and hour budgets."""

    def reserve(self, now: float) -> float:
        """Record a write at ``now`` (wall-clock seconds) and return 0, or return how long to wait first."""
        ...


class WriteBudget:
    """One installation's content-creating requests in the last hour, against the minute and hour budgets."""

    def __init__(self, limits: WriteLimits) -> None:
        self.limits = limits
        self._times: deque[float] = deque()
        self._lock = threading.Lock()

    def reserve(self, now: float) -> float:
        """Record a write at ``now`` and return 0, or return how long to wait before one may go."""
        with self._lock:
            while self._times and self._times[0] <= now - 3600:
                self._times.popleft()
            wait = 0.0
            if len(self._times) >= self.limits.per_hour:
                wait = self._times[len(self._times) - self.limits.per_hour] + 3600 - now
            in_minute = [t for t in self._times if t > now - 60]
            if len(in_minute) >= self.limits.per_minute:
                wait = max(wait, in_minute[len(in_minute) - self.limits.per_minute] + 60 - now)
            if wait > 0:
                return wait
            self._times.append(now)
            return 0.0
