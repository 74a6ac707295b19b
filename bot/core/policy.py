"""Who may change what, and where Spark may push: pure decisions the flows and adapters ask."""

from __future__ import annotations

import re


def check_target_path(path: str) -> str | None:
    """Return why an edit of ``path`` is refused (outside the repository, a workflow), else ``None``."""
    if not path or not path.strip():
        return "the path is empty"
    if "\x00" in path or any(ord(c) < 32 for c in path):
        return "the path contains control characters"
    if "\\" in path:
        return "the path contains a backslash"
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path) or path.startswith("~"):
        return f"{path!r} is absolute, not a path inside the repository"
    segments = path.split("/")
    if any(seg in ("", ".", "..") for seg in segments):
        return f"{path!r} has empty, '.' or '..' segments, so it may point outside the repository"
    lowered = [seg.lower() for seg in segments]
    if lowered[0] == ".git":
        return f"{path!r} is inside .git"
    if lowered[:2] == [".github", "workflows"]:
        return f"{path!r} is a GitHub Actions workflow; Spark never edits workflows"
    return None
