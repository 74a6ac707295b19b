"""Hidden markers: the one syntax, ``<!-- spark:<name>=<value> -->``, of every tag Spark writes into a body.

GitHub renders an HTML comment as nothing, so a marker lets Spark find its own comment, review or section
again. Spark writes a marker on its own last line (:func:`append`); :func:`trailing` reads only that line, so
text quoted above it (a user's words, a model's prose) cannot forge one. Callers also check that the App
wrote the body. Text Spark did not write has its ``<!--`` broken before it is posted (``render.py``).

To add a tag: add its name to ``NAMES`` with what it marks, write it with :func:`tag` or :func:`append`, read
it with :func:`trailing` (or :func:`values` where Spark's own body lists several), and test a forged copy
above the last line. A value is one word (``VALUE`` below): letters, digits, ``_ . : / -``.
"""

from __future__ import annotations

import re

# Every tag Spark writes, with what it marks.
NAMES: dict[str, str] = {
    "finding": "a review comment's finding, by its fingerprint (findings.py); a review body lists several",
    "reply": "a comment or review Spark posts once per key (a retried job edits it instead of posting again)",
    "describe": "the start and the end of Spark's summary section in a pull request's body (describe.py)",
}
VALUE = re.compile(r"[\w.:/-]+")
_ANY = re.compile(r"<!--\s*spark:.*?-->", re.DOTALL)
_TAG = re.compile(r"<!--\s*spark:([a-z][a-z0-9-]*)=([\w.:/-]+)\s*-->")
_LAST = re.compile(r"<!-- spark:([a-z][a-z0-9-]*)=([\w.:/-]+) -->")


def tag(name: str, value: str) -> str:
    """Return ``<!-- spark:name=value -->``; raise ValueError for a name not in ``NAMES`` or a bad value."""
    if name not in NAMES:
        raise ValueError(f"not a Spark marker name: {name!r} (add it to markers.NAMES)")
    if not VALUE.fullmatch(value):
        raise ValueError(f"not a marker value: {value!r}")
    return f"<!-- spark:{name}={value} -->"


def append(body: str, name: str, value: str) -> str:
    """Return ``body`` ending with the marker on its own last line (``body`` unchanged if it already does)."""
    if trailing(body, name) == value:
        return body
    return f"{body.rstrip()}\n\n{tag(name, value)}" if body.strip() else tag(name, value)


def trailing(body: str, name: str) -> str | None:
    """Return the value of the ``name`` marker on the last line of ``body``, or ``None``."""
    last = body.rstrip().rsplit("\n", 1)[-1]
    found = _LAST.fullmatch(last)
    return found.group(2) if found is not None and found.group(1) == name else None


def carries(body: str, name: str, value: str) -> bool:
    """Return whether ``body`` ends with the marker ``name=value``."""
    return trailing(body, name) == value


def values(body: str, name: str) -> list[str]:
    """Return the value of every ``name`` marker in ``body``, in order (only for bodies Spark wrote whole)."""
    return [value for found, value in _TAG.findall(body) if found == name]


def strip(text: str) -> str:
    """Return ``text`` without any ``<!-- spark:... -->`` marker, well-formed or not (a dry run's preview)."""
    return _ANY.sub("", text)
