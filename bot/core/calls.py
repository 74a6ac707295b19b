"""How a call fits a signature: the positional arguments a definition accepts, and those a call passes.

A changed signature that takes more required arguments, or fewer, breaks the calls that pass a number it no
longer accepts. Read from the signature line the index keeps and from the calling line's text, for Python,
JavaScript and TypeScript, and Go; anything not read surely (a call spread over lines, ``*args``, an unknown
language) is unknown (None), never guessed.
"""

from __future__ import annotations

import re

Arity = tuple[int, int | None]  # (required, most) positional arguments; most None: any number

_OPEN = {"(": ")", "[": "]", "{": "}"}
_QUOTES = "\"'`"


def accepts(signature: str, language: str, *, method: bool = False) -> Arity | None:
    """Return the positional arguments a definition with ``signature`` accepts, or None when not read.

    ``method``: it is called on an object (a Python method's ``self`` or ``cls`` is not passed).
    """
    groups = _groups(signature)
    if language == "go":
        # func (r *R) name(params) results: the receiver is a group before the name.
        named = re.match(r"\s*func\s*(\([^)]*\))?\s*\w+", signature)
        if named is None:
            return None
        params = _groups(signature[named.end() :])
        return _go(params[0]) if params else None
    if not groups:
        return None
    if language == "python":
        return _python(groups[0], method)
    if language in ("javascript", "typescript", "tsx"):
        return _script(groups[0], angles=language != "javascript")
    return None


def passes(line: str, name: str) -> list[int | None]:
    """Return, per call of ``name`` on ``line``, how many positional arguments it passes (None: not known)."""
    out: list[int | None] = []
    for found in re.finditer(rf"(?<![\w$]){re.escape(name)}\s*\(", line):
        inner = _inner(line, found.end() - 1)
        if inner is None:
            out.append(None)
            continue
        parts = _split(inner, angles=False)
        if any(p.startswith(("*", "...")) for p in parts):
            out.append(None)  # spread arguments: any number
            continue
        out.append(sum(1 for p in parts if not re.match(r"^\w+\s*=(?!=)", p)))
    return out


def breaks(arity: Arity, passed: int | None) -> bool:
    """Return whether a call passing ``passed`` positional arguments no longer fits ``arity``."""
    if passed is None:
        return False
    required, most = arity
    return passed < required or (most is not None and passed > most)


def _python(params: str, method: bool) -> Arity | None:
    parts = _split(params, angles=False)
    if method and parts and parts[0].split(":")[0].strip() in ("self", "cls"):
        parts = parts[1:]
    required = most = 0
    for part in parts:
        if part == "/":
            continue  # the parameters before it are positional-only: still positional
        if part.startswith("*"):
            # ``*`` or ``**kwargs``: keyword-only ones follow; ``*args`` takes any number of positional ones.
            return required, None if part not in ("*",) and not part.startswith("**") else most
        most += 1
        if "=" not in part:
            required = most
    return required, most


def _script(params: str, *, angles: bool) -> Arity | None:
    parts = _split(params, angles=angles)
    required = most = 0
    for part in parts:
        if part.startswith("..."):
            return required, None
        head = re.split(r"[:=]", part, maxsplit=1)[0].strip()
        if head == "this":
            continue  # TypeScript's declared ``this`` is not passed
        most += 1
        # Optional: ``a?: T``, or a default (``= 1``; an arrow type's ``=>`` is not one).
        if not head.endswith("?") and not re.search(r"=(?!>)", part):
            required = most
    return required, most


def _go(params: str) -> Arity | None:
    parts = _split(params, angles=False)
    if any("..." in p for p in parts):
        count = len(parts)
        return count - 1, None
    # ``a, b int`` declares two; ``int, string`` (types alone) too: each comma-separated part is one.
    return len(parts), len(parts)


def _groups(text: str) -> list[str]:
    """Return the insides of the top-level parenthesised groups of ``text``, in order."""
    out: list[str] = []
    at = 0
    while (start := text.find("(", at)) >= 0:
        inner = _inner(text, start)
        if inner is None:
            break
        out.append(inner)
        at = start + len(inner) + 2
    return out


def _inner(text: str, start: int) -> str | None:
    """Return what is between the bracket at ``start`` and its match on the same text, or None."""
    stack: list[str] = []
    quote = ""
    for at in range(start, len(text)):
        ch = text[at]
        if quote:
            if ch == quote and text[at - 1] != "\\":
                quote = ""
            continue
        if ch in _QUOTES:
            quote = ch
        elif ch in _OPEN:
            stack.append(_OPEN[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return text[start + 1 : at]
    return None


def _split(inner: str, *, angles: bool) -> list[str]:
    """Return the top-level comma-separated parts of ``inner``, stripped, empty ones left out (``angles``:
    ``<...>`` nest too, as TypeScript's type arguments do)."""
    parts: list[str] = []
    depth = 0
    quote = ""
    current: list[str] = []
    for at, ch in enumerate(inner):
        if quote:
            if ch == quote and inner[at - 1] != "\\":
                quote = ""
        elif ch in _QUOTES:
            quote = ch
        elif ch in "([{" or (angles and ch == "<"):
            depth += 1
        elif ch in ")]}" or (angles and ch == ">" and inner[at - 1] != "=" and depth):
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    parts.append("".join(current).strip())
    return [p for p in parts if p]
