"""A pull request's index for the flows: ready within the bound or said missing; a change's and a question's
context from other files."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
import redis

from bot.adapters.github_app import GitHubApp
from bot.core.diff import format_patch, parse_diff
from bot.index.context import open_index, ready_index, warm_repositories
from bot.index.warm import Ready
from bot.settings import Settings
from sandbox.github import GitHubSandbox
from sandbox.github.auth import generate_private_key_pem

REPO = "octo/lib"
HEADERS = "def parse_header(line):\n    return line.split(':')\n"
FILES = {
    "pkg/headers.py": HEADERS,
    "pkg/reader.py": "from pkg.headers import parse_header\n\n\ndef read(x):\n    return parse_header(x)\n",
}


@pytest.fixture()
def sandbox() -> Iterator[GitHubSandbox]:
    with GitHubSandbox(private_key_pem=generate_private_key_pem()) as sandbox:
        yield sandbox


def test_a_changed_signature_brings_its_caller_and_a_question_its_uses(
    sandbox: GitHubSandbox, redis_conn: redis.Redis, tmp_path: Path
) -> None:
    installation = sandbox.create_installation("octo")
    sandbox.create_repo(REPO, FILES, installation_id=installation)
    base = sandbox.commits(REPO, "main")[0]["sha"]
    changed = "def parse_header(line, sep):\n    return line.split(sep)\n"
    head = sandbox.push(REPO, "main", {"pkg/headers.py": changed})
    app = GitHubApp(sandbox.app_id, sandbox.private_key_pem, base_url=sandbox.url)
    settings = Settings.load({"SPARK_DATA_DIR": str(tmp_path), "SPARK_INDEX_WAIT_SECONDS": "20"}, None)
    gh = app.installation(installation)
    open_index(gh, settings, redis_conn, REPO, base).result()
    index = ready_index(open_index(gh, settings, redis_conn, REPO, head), settings, REPO, base)
    assert index.head is not None and index.base is not None
    files = list(parse_diff(format_patch("pkg/headers.py", HEADERS, changed)).files)
    context = index.for_change(files, 2000)
    assert "def read(x):\n    return parse_header(x)" in context.text
    asked = index.for_question("Who calls `parse_header`? And where is Reader?", 2000)
    assert "pkg/reader.py" in asked.shown and "pkg/headers.py" in asked.shown
    assert index.texts(["pkg/reader.py"]) == {"pkg/reader.py": FILES["pkg/reader.py"]}
    # A fix of the reader sees the definition it calls, without a diff of its own.
    fix = index.for_fix("pkg/reader.py", None, "handle a missing separator", 2000)
    assert "def parse_header(line, sep):" in fix.text and "pkg/reader.py" not in fix.shown
    app.close()


def test_an_index_not_ready_within_the_bound_is_said_missing(tmp_path: Path) -> None:
    settings = Settings.load({"SPARK_DATA_DIR": str(tmp_path), "SPARK_INDEX_WAIT_SECONDS": "0.05"}, None)
    slow: Future[Ready] = Future()
    started = time.monotonic()
    index = ready_index(slow, settings, REPO)
    assert time.monotonic() - started < 1
    assert index.head is None
    assert index.note == "the repository index is still being built; no context from other files"
    assert index.for_change([], 2000).empty
    failed: Future[Ready] = Future()
    failed.set_result(Ready(None, "failed", "GitHubError: 404"))
    assert ready_index(failed, settings, REPO).note == (
        "the repository index is unavailable (GitHubError: 404); no context from other files"
    )


def test_repositories_an_installation_adds_are_warmed_in_the_background(
    sandbox: GitHubSandbox, redis_conn: redis.Redis, tmp_path: Path
) -> None:
    installation = sandbox.create_installation("octo")
    sandbox.create_repo(REPO, FILES, installation_id=installation)
    head = sandbox.commits(REPO, "main")[0]["sha"]
    app = GitHubApp(sandbox.app_id, sandbox.private_key_pem, base_url=sandbox.url)
    settings = Settings.load({"SPARK_DATA_DIR": str(tmp_path)}, None)
    [warming] = warm_repositories(app.installation(installation), settings, redis_conn, [REPO])
    assert warming.result(timeout=30) == head
    ready = ready_index(
        open_index(app.installation(installation), settings, redis_conn, REPO, head), settings, REPO
    )
    assert ready.head is not None and sorted(ready.head.listing.files) == sorted(FILES)
    app.close()
