"""GitHub's size limits on what Spark posts, and fitting text to them without losing any of it silently.

Review and comment bodies take at most 65,536 characters; a check run's ``output.summary`` and ``output.text``
at most 65,535, which GitHub counts in UTF-8 bytes ("exceeds a maximum bytesize of 65535").
Docs: https://docs.github.com/en/rest/checks/runs#create-a-check-run
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.core import render

BODY_MAX_CHARS = 65_536
CHECK_OUTPUT_MAX_BYTES = 65_535


def utf8_len(text: str) -> int:
    """Return the size of ``text`` in UTF-8 bytes (surrogate escapes count as the bytes they stand for)."""
    return len(text.encode("utf-8", "surrogateescape"))


def cut_bytes(text: str, limit: int) -> str:
    """Return the longest prefix of ``text`` (whole characters) that fits in ``limit`` UTF-8 bytes."""
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")


def fit_check_output(summary: str, text: str = "") -> tuple[str, str]:
    """Fit a check run's summary and text into GitHub's limits; what the summary cannot hold moves to text.

    A cut part says so and how much was left out, so nothing disappears without a word.
    """
    if utf8_len(summary) <= CHECK_OUTPUT_MAX_BYTES:
        return summary, _fit_text(text)
    note = "\n\n(The summary was cut here to fit GitHub's limit; it continues in the details below.)"
    head = cut_bytes(summary, CHECK_OUTPUT_MAX_BYTES - utf8_len(note))
    # Cut at a line end when there is one in the second half, so no line is split between the two.
    if head.rfind("\n") > len(head) // 2:
        head = head[: head.rfind("\n") + 1]
    rest = summary[len(head) :]
    return head + note, _fit_text(rest + ("\n\n" + text if text else ""))


def _fit_text(text: str) -> str:
    if utf8_len(text) <= CHECK_OUTPUT_MAX_BYTES:
        return text
    note = "\n\n(Cut to fit GitHub's 65,535-byte limit: {} more characters were left out.)"
    room = CHECK_OUTPUT_MAX_BYTES - utf8_len(note.format(len(text)))
    head = cut_bytes(text, room)
    return head + note.format(len(text) - len(head))


def diff_block(patch: str) -> str:
    """Return a patch as a collapsed Markdown section with a diff fence longer than any backtick run in it."""
    fence = render.fence(patch.splitlines())
    return f"<details><summary>Patch</summary>\n\n{fence}diff\n{patch.rstrip()}\n{fence}\n\n</details>"


def split_patches(
    patches: Sequence[str], room: int, limit: int = BODY_MAX_CHARS, reserve: int = 200
) -> tuple[list[str], list[str]]:
    """Place patches as collapsed blocks: those fitting ``room`` characters, then comment-sized parts.

    Returns (blocks for the first body, bodies of the follow-up parts). A patch too large for one body is
    split at line ends across parts; joined in order, the parts give back every line. ``reserve`` leaves
    room in each part for its heading.
    """
    first: list[str] = []
    parts: list[str] = []
    used = 0
    current: list[str] = []
    current_len = 0
    overflow = False
    for patch in patches:
        block = diff_block(patch)
        if not overflow and used + len(block) + 2 <= room:
            first.append(block)
            used += len(block) + 2
            continue
        overflow = True
        for piece in _pieces(patch, limit - reserve - 300):
            piece_block = diff_block(piece)
            if current and current_len + len(piece_block) + 2 > limit - reserve:
                parts.append("\n\n".join(current))
                current, current_len = [], 0
            current.append(piece_block)
            current_len += len(piece_block) + 2
    if current:
        parts.append("\n\n".join(current))
    return first, parts


def _pieces(patch: str, size: int) -> list[str]:
    """Split ``patch`` at line ends into pieces of at most ``size`` characters (a longer line is cut)."""
    pieces: list[str] = []
    current = ""
    for line in patch.splitlines(keepends=True):
        while len(line) > size:
            if current:
                pieces.append(current)
                current = ""
            pieces.append(line[:size])
            line = line[size:]
        if len(current) + len(line) > size:
            pieces.append(current)
            current = ""
        current += line
    if current:
        pieces.append(current)
    return pieces
