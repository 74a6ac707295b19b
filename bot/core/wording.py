"""Words in messages users read: counts with the right plural."""

from __future__ import annotations


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """Return ``"1 suggestion"`` or ``"3 suggestions"`` (``plural_form`` for irregular words)."""
    word = singular if count == 1 else (plural_form or singular + "s")
    return f"{count} {word}"
