"""Stable finding fingerprints, and the ``finding`` markers (markers.py) that carry them in comment bodies.

A fingerprint names *what* a finding is about, not *where*: the file, the code with all whitespace removed
(so moving it up or down, re-indenting or re-wrapping keeps it), and the rule or title in lower case.
"""

from __future__ import annotations

import hashlib
import re

from bot.core import markers
from bot.core.types import Finding

__all__ = [
    "finding_marker",
    "fingerprint",
    "fingerprint_of",
    "normalise_code",
    "read_finding_marker",
]

_VERSION = "1"
_LENGTH = 16
_FINGERPRINT = re.compile(r"[0-9a-f]{16}")
_WHITESPACE = re.compile(r"\s+")


def normalise_code(code: str) -> str:
    """Return ``code`` with every whitespace character removed (layout is not identity)."""
    return _WHITESPACE.sub("", code)


def fingerprint(path: str, code: str, rule_or_title: str) -> str:
    """Return a 16-hex-digit fingerprint of a finding: its file, normalised code, and rule or title."""
    rule = " ".join(rule_or_title.lower().split())
    material = "\0".join((_VERSION, path, normalise_code(code), rule))
    return hashlib.sha256(material.encode("utf-8", "surrogateescape")).hexdigest()[:_LENGTH]


def fingerprint_of(finding: Finding) -> str:
    """Return the finding's own fingerprint when it carries a valid one, else compute it from its parts."""
    if _FINGERPRINT.fullmatch(finding.fingerprint):
        return finding.fingerprint
    return fingerprint(finding.path, finding.code, finding.rule or finding.title)


def finding_marker(fp: str) -> str:
    """Return the hidden marker that carries ``fp`` in a GitHub comment body."""
    if not _FINGERPRINT.fullmatch(fp):
        raise ValueError(f"not a finding fingerprint: {fp!r}")
    return markers.tag("finding", fp)


def read_finding_marker(body: str) -> str | None:
    """Return the fingerprint marked on the last line of ``body``, or ``None``.

    Only the last line counts: text quoted above it (a model's words, code in a suggestion) cannot forge one.
    Callers also check that the App wrote the comment.
    """
    fp = markers.trailing(body, "finding")
    return fp if fp is not None and _FINGERPRINT.fullmatch(fp) else None
