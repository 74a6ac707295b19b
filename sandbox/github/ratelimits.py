"""GitHub's secondary rate limit on content creation, per installation, as the sandbox enforces it.

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
