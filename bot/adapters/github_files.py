"""Reading one file through GitHub's contents and blob APIs, refusing whatever is not a regular file.

Files over 1 MB come without content from the contents API; they are read through the blob API (up to 100 MB)
only when ``max_bytes`` allows them (https://docs.github.com/rest/repos/contents#get-repository-content).
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote

from bot.adapters.github_http import Transport
from bot.adapters.github_port import GitHubError, Unreadable


def file_text(http: Transport, repo: str, path: str, ref: str, *, max_bytes: int | None = None) -> str | None:
    """Return a regular file's text at ``ref``, or None when nothing exists at ``path`` there.

    Raises ``Unreadable`` for a symlink, a submodule or a directory, for a file over ``max_bytes``, and for
    one whose content GitHub did not send in full: an unreadable file is never read as empty.
    """
    try:
        _, data = http.call("GET", f"/repos/{repo}/contents/{quote(path)}", params={"ref": ref})
    except GitHubError as exc:
        if exc.status == 404:
            return None
        if exc.status == 403 and "too large" in exc.message.lower():
            raise Unreadable(path, "too large for GitHub's API (over 100 MB)") from exc
        raise
    if not isinstance(data, dict):
        raise Unreadable(path, "a directory")
    kind = data.get("type")
    # A symlink to a file comes back as that file, with `target` set (GitHub follows the link).
    target = data.get("target")
    if kind == "symlink" or target or str(data.get("path") or path) != path:
        raise Unreadable(path, f"a symbolic link to `{target or data.get('path')}`")
    if kind == "submodule" or data.get("submodule_git_url"):
        raise Unreadable(path, "a submodule (a commit of another repository)")
    if kind != "file":
        raise Unreadable(path, f"not a file (GitHub says {kind!r})")
    size = int(data.get("size") or 0)
    if max_bytes is not None and size > max_bytes:
        raise Unreadable(path, f"too large ({size:,} bytes; the limit is {max_bytes:,})")
    raw = _file_bytes(http, repo, path, data) if size else b""
    if len(raw) != size:
        raise Unreadable(path, f"a file GitHub sent only in part ({len(raw):,} of {size:,} bytes)")
    return raw.decode("utf-8", errors="surrogateescape")


def _file_bytes(http: Transport, repo: str, path: str, data: dict[str, Any]) -> bytes:
    """Return a file's bytes: inline base64 up to 1 MB, else through the blob API (up to 100 MB)."""
    if data.get("encoding") == "base64" and data.get("content"):
        return base64.b64decode(str(data["content"]))
    try:
        _, blob = http.call("GET", f"/repos/{repo}/git/blobs/{data['sha']}")
    except GitHubError as exc:
        if exc.status == 403 and "too large" in exc.message.lower():
            raise Unreadable(path, "too large for GitHub's API (over 100 MB)") from exc
        raise
    if blob.get("encoding") != "base64":
        raise Unreadable(path, f"a file in an unknown encoding ({blob.get('encoding')!r})")
    return base64.b64decode(str(blob.get("content") or ""))
