"""GitHub's rate limits as the sandbox enforces them: the primary limit's use, and content creation's.

The primary limit (``Faults.rate_limit`` requests an hour per installation) is counted per token here and
answered with 403 and ``x-ratelimit-remaining: 0`` by the server.

https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits:
"No more than 80 content-generating requests per minute and no more than 500 content-generating requests per
hour", answered with 403 or 429, with or without a ``retry-after`` header ("you should wait at least one
minute" when it is absent). The budgets are settable so tests reach them in a few requests.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID."
)


@dataclass
class ContentLimits:
    """The content-creation budgets and how a request over them is answered."""

    per_minute: int = 80
    per_hour: int = 500
    status: int = 403  # GitHub answers 403 or 429
    retry_after: int | None = 60  # None: no Retry-After header
    _seen: dict[int, deque[float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, installation: int, now: float | None = None) -> bool:
        """Count one content-creating request of ``installation``; return False when it is over a budget."""
        now = time.monotonic() if now is None else now
        with self._lock:
            seen = self._seen.setdefault(installation, deque())
            while seen and seen[0] <= now - 3600:
                seen.popleft()
            in_minute = sum(1 for t in seen if t > now - 60)
            if len(seen) >= self.per_hour or in_minute >= self.per_minute:
                return False
            seen.append(now)
            return True

    def reset(self) -> None:
        """Forget every counted request (a new window for everyone)."""
        with self._lock:
            self._seen.clear()

    def headers(self) -> dict[str, str]:
        """Return the headers of the refusal (Retry-After when configured)."""
        return {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}


@dataclass
class PrimaryUse:
    """The requests each token (an installation's, or the App's JWT) made in the current hour."""

    reset: int = field(default_factory=lambda: int(time.time()) + 3600)  # when the hour ends (epoch seconds)
    _used: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def used(self, token: str) -> int:
        """Return how many requests ``token`` made this hour."""
        with self._lock:
            return self._used.get(token, 0)

    def count(self, token: str) -> int:
        """Count one request of ``token``; return its use so far."""
        with self._lock:
            self._used[token] = self._used.get(token, 0) + 1
            return self._used[token]
