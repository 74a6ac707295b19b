"""What the last ``/spark fix`` on a pull request read: enough to start the next one before GitHub answers.

A fix reads the pull request (its title, body, head and base), its diff, ``.github/spark.yml`` and the files
it edits. Their texts go to the machine's local store (``bot.index.store``, shared with the repository
index) by git blob SHA, as the diff and a small document naming them do; Redis keeps only that document's
SHA per pull request (``spark:fix-memory:<pr>``). A worker on another machine finds no texts and simply
starts as it always did. Nothing here is trusted: the next fix confirms every piece against what GitHub
answers before it commits anything (``workers.commands.fix.ahead``).
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
from bot.index.store import LocalStore

MEMORY = keys.FIX_MEMORY


@dataclass(frozen=True, slots=True)
class Remembered:
    """A pull request as a fix last read it: its text, diff, config and the files (text, encoding) by path."""

    title: str
    body: str
    head_sha: str
    diff: str
    config: RepoConfig
    config_data: Mapping[str, Any]
    files: Mapping[str, tuple[str, str]]
    # Who ran a fix here that passed the permission check (the last few): only their fixes start early, so
    # nobody without permission makes Spark spend a model call.
    authors: tuple[str, ...] = ()


# The authors a pull request's memory keeps.
MAX_AUTHORS = 20


def _sha(text: str) -> str:
    return blob_sha(text.encode("utf-8", "surrogateescape"))


def keep(
    conn: redis.Redis,
    store: LocalStore,
    pr_key: str,
    *,
    title: str,
    body: str,
    head_sha: str,
    diff: str,
    config_data: Mapping[str, Any],
    files: Mapping[str, tuple[str, str]],
    author: str,
) -> None:
    """Keep what a fix by ``author`` (permitted to fix) read: the texts in the store, their document's SHA in
    Redis (a week)."""
    before = recall(conn, store, pr_key)
    authors = [author, *(a for a in (before.authors if before else ()) if a != author)][:MAX_AUTHORS]
    shas = {path: _sha(text) for path, (text, _) in files.items()}
    document = json.dumps(
        {
            "title": title,
            "body": body,
            "head": head_sha,
            "diff": _sha(diff),
            "config": dict(config_data),
            "files": {path: [shas[path], encoding] for path, (_, encoding) in files.items()},
            "authors": authors,
        },
        sort_keys=True,
    )
    texts = [(shas[path], text) for path, (text, _) in files.items()]
    store.put_texts([*texts, (_sha(diff), diff), (_sha(document), document)])
    conn.set(MEMORY.format(pr_key), _sha(document), ex=MEMORY.seconds)


def recall(conn: redis.Redis, store: LocalStore, pr_key: str) -> Remembered | None:
    """Return what the last fix read, or None (never kept, expired, or its texts are not on this machine)."""
    raw = conn.get(MEMORY.format(pr_key))
    if not isinstance(raw, bytes | str):
        return None
    sha = raw.decode() if isinstance(raw, bytes) else raw
    found = store.texts([sha])
    if sha not in found:
        return None
    try:
        document = json.loads(found[sha])
        files = {str(p): (str(v[0]), str(v[1])) for p, v in document["files"].items()}
        wanted = {document["diff"], *(s for s, _ in files.values())}
        texts = store.texts(wanted)
        if not wanted <= texts.keys():
            return None
        data = document["config"]
        return Remembered(
            title=str(document["title"]),
            body=str(document["body"]),
            head_sha=str(document["head"]),
            diff=texts[document["diff"]],
            config=build_config(data),
            config_data=data,
            files={path: (texts[s], encoding) for path, (s, encoding) in files.items()},
            authors=tuple(str(a) for a in document.get("authors", ())),
        )
    except (ValueError, KeyError, TypeError, IndexError):
        return None
