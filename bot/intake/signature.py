"""``X-Hub-Signature-256``: HMAC-SHA256 of the raw body with the webhook secret, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "sha256="


def sign(secret: bytes, body: bytes) -> str:
    """Return the ``X-Hub-Signature-256`` header value GitHub would send for ``body``."""
    return PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(secret: bytes, body: bytes, header: str | None) -> bool:
    """Return whether ``header`` is the valid signature of ``body`` (a missing or malformed header is not)."""
    if not header or not header.startswith(PREFIX):
        return False
    # Compare bytes: compare_digest refuses non-ASCII str, and a forged header may contain anything.
    return hmac.compare_digest(sign(secret, body).encode(), header.encode("utf-8", "replace"))
