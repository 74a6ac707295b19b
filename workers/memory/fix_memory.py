"""What the last ``/spark fix`` on a pull request read: enough to ask the model for the next one at once.

A fix reads the pull request (its title, body, head and base), its diff, ``.github/spark.yml`` and the files
it edits. Their texts go to the machine's local store (``bot.index.store``, shared with the repository index,
so a file the index holds is stored once) by git blob SHA; Redis keeps a small document per pull request
(``spark:fix-memory:<pr>``, a week) that names them, with who ran a fix here that passed the permission
check. A worker on another machine finds no texts and starts as it always did. Nothing here is trusted:
the next fix builds its requests again from what GitHub answers and uses an answer asked on this memory only
where the two are the same (``workers.commands.fix.ahead``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import redis

from bot import keys
from bot.core.config import RepoConfig, build_config
from bot.index.build import blob_sha
from bot.index.store import TEXTS, LocalStore

MEMORY = keys.FIX_MEMORY
# The commenters a pull request's memory keeps (the most recent first).
MAX_AUTHORS = 20


@dataclass(frozen=True, slots=True)
class Remembered:
    """A pull request as a fix last read it: its text, head, base, diff, config, files and who may fix."""

    title: str
    body: str
    head_sha: str
    base_sha: str
    diff: str
    config: RepoConfig
    # The files it read: path -> blob SHA (their texts are in the store).
    files: Mapping[str, str]
    # Who ran a fix here that passed the permission check (the last few, most recent first).
    authors: tuple[str, ...] = ()


def text_sha(text: str) -> str | None:
    """Return the blob SHA of ``text`` as GitHub holds it, or None when it is not plain UTF-8 (a file read
    with undecodable bytes is not kept: the store keeps UTF-8)."""
    try:
        return blob_sha(text.encode("utf-8"))
    except UnicodeEncodeError:
        return None


def keep(
    conn: redis.Redis,
    store: LocalStore,
    pr_key: str,
    *,
    title: str,
    body: str,
    head_sha: str,
    base_sha: str,
    diff: str,
    config_data: Mapping[str, Any],
    files: Mapping[str, str],
    author: str | None,
) -> None:
    """Keep what a fix by ``author`` (who passed the permission check; None: no person asked) read: texts
    in the store by blob SHA, the document naming them in Redis (a week). Files whose text is not plain
    UTF-8 are left out."""
    before = recall_document(conn, pr_key)
    earlier = authors(before) if before else ()
    kept = [a for a in [author, *(a for a in earlier if a != author)] if a][:MAX_AUTHORS]
    texts: list[tuple[str, str]] = []
    shas: dict[str, str] = {}
    for path, text in files.items():
        sha = text_sha(text)
        if sha is not None:
            shas[path] = sha
            texts.append((sha, text))
    words: dict[str, str] = {}
    for name, text in (("title", title), ("body", body), ("diff", diff)):
        sha = text_sha(text)
        if sha is None:
            return  # nothing to start from next time
        words[name] = sha
        texts.append((sha, text))
    held = store.has(TEXTS, [sha for sha, _ in texts])
    store.put_texts([(sha, text) for sha, text in texts if sha not in held])
    document = {
        **words,
        "head": head_sha,
        "base": base_sha,
        "config": dict(config_data),
        "files": shas,
        "authors": kept,
    }
    conn.set(MEMORY.format(pr_key), json.dumps(document, sort_keys=True), ex=MEMORY.seconds)


def recall_document(conn: redis.Redis, pr_key: str) -> dict[str, Any] | None:
    """Return the pull request's memory document as kept, or None."""
    return parse_document(conn.get(MEMORY.format(pr_key)))


def parse_document(raw: object) -> dict[str, Any] | None:
    """Return the memory document a stored value holds, or None."""
    if not isinstance(raw, bytes | str):
        return None
    try:
        found = json.loads(raw)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def authors(document: Mapping[str, Any]) -> tuple[str, ...]:
    """Return who ran a fix that passed the permission check, as a memory document names them."""
    names = document.get("authors", ())
    return tuple(str(a) for a in names) if isinstance(names, list) else ()


def remembered(store: LocalStore, document: Mapping[str, Any]) -> Remembered | None:
    """Return what the last fix read, as ``document`` names it, its texts read from ``store`` (None when one
    is not on this machine, or the document is not one)."""
    try:
        words = {name: str(document[name]) for name in ("title", "body", "diff")}
        found = store.texts(words.values())
        if not set(words.values()) <= found.keys():
            return None
        data = document["config"]
        return Remembered(
            title=found[words["title"]],
            body=found[words["body"]],
            head_sha=str(document["head"]),
            base_sha=str(document["base"]),
            diff=found[words["diff"]],
            config=build_config(data),
            files={str(path): str(sha) for path, sha in document["files"].items()},
            authors=authors(document),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
