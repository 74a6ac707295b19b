"""Indexing through the local GitHub with the real clients: the archive as GitHub serves it, a cold build,
an incremental update after a push, and each commit of a real history equal to a build from scratch."""

from __future__ import annotations

import gzip
import io
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import requests

from bot import keys
from bot.adapters.github import Installation
from bot.adapters.github_app import GitHubApp
from bot.index.build import Indexer, blob_sha, load_listing
from bot.index.store import LocalStore
from bot.index.warm import ensure, machine, warm
from sandbox.github import GitHubSandbox, Submodule, Symlink
from sandbox.github.auth import generate_private_key_pem

REPO = "octo/lib"
FILES: dict[str, str | bytes] = {
    ".gitattributes": "gen/** linguist-generated\n",
    "pkg/headers.py": "def parse_header(line):\n    return line.split(':')\n",
    "pkg/reader.py": "from pkg.headers import parse_header\n\n\ndef read(x):\n    return parse_header(x)\n",
    "gen/api.py": "def generated():\n    pass\n",
    "README.md": "# lib\n",
    "logo.png": b"\x89PNG\r\n\x1a\n\0\0",
}
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class World:
    sandbox: GitHubSandbox
    gh: Installation
    store: LocalStore


@pytest.fixture(scope="module")
def app_key() -> str:
    return generate_private_key_pem()


@pytest.fixture()
def world(app_key: str, tmp_path: Path) -> Iterator[World]:
    with GitHubSandbox(private_key_pem=app_key) as sandbox:
        installation_id = sandbox.create_installation("octo")
        files = {
            **FILES,
            "link.py": Symlink("pkg/headers.py"),
            "vendor/dep": Submodule("https://x/dep.git", "b" * 40),
        }
        sandbox.create_repo(REPO, files, installation_id=installation_id, private=True)
        app = GitHubApp(sandbox.app_id, sandbox.private_key_pem, base_url=sandbox.url)
        yield World(
            sandbox, app.installation(installation_id), LocalStore(tmp_path / "s.sqlite3", 50_000_000)
        )
        app.close()


def test_the_tarball_route_redirects_to_an_archive_laid_out_as_githubs(world: World) -> None:
    head = world.sandbox.commits(REPO, "main")[0]["sha"]
    token = world.sandbox.client(world.gh.installation_id).requester.auth.token  # type: ignore[union-attr]
    answer = requests.get(
        f"{world.sandbox.url}/repos/{REPO}/tarball/main",
        headers={"Authorization": f"token {token}"},
        allow_redirects=False,
        timeout=10,
    )
    assert answer.status_code == 302
    assert "x-ratelimit-remaining" in answer.headers
    location = answer.headers["Location"]
    assert "/legacy.tar.gz/main?token=" in location
    # A private repository's link works without credentials (its token is in the link), and only with it.
    assert requests.get(location.split("?")[0], timeout=10).status_code == 404
    data = requests.get(location, timeout=10).content
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        assert tar.pax_headers["comment"] == head
        members = {m.name: m for m in tar.getmembers()}
    prefix = f"octo-lib-{head[:7]}/"
    assert all(name.startswith(prefix) or name == prefix.rstrip("/") for name in members)
    assert members[prefix + "pkg/headers.py"].mode == 0o664
    assert members[prefix + "link.py"].issym() and members[prefix + "link.py"].linkname == "pkg/headers.py"
    assert members[prefix + "vendor/dep"].isdir()


def test_a_cold_build_lists_every_file_indexed_or_with_its_reason(
    world: World, redis_conn: redis.Redis
) -> None:
    head = world.sandbox.commits(REPO, "main")[0]["sha"]
    ready = ensure(world.gh, world.store, redis_conn, REPO, head, wait=1.0)
    assert ready.how == "built"
    assert ready.index is not None
    listing = ready.index.listing
    assert listing.files == {
        "pkg/headers.py": blob_sha(str(FILES["pkg/headers.py"]).encode()),
        "pkg/reader.py": blob_sha(str(FILES["pkg/reader.py"]).encode()),
    }
    assert listing.skipped == {
        ".gitattributes": "no grammar for its language",
        "README.md": "no grammar for its language",
        "gen/api.py": "linguist-generated or -vendored (.gitattributes)",
        "logo.png": "binary file",
        "link.py": "symbolic link",
        "vendor/dep": "submodule",
    }
    assert ready.index.paths_naming(["parse_header"]) == {"parse_header": ["pkg/headers.py", "pkg/reader.py"]}
    assert ready.index.paths_naming(["parse_header"], defines=True) == {"parse_header": ["pkg/headers.py"]}
    # Asked again: read from the store, no request.
    before = len(world.sandbox.request_log)
    assert ensure(world.gh, world.store, redis_conn, REPO, head, wait=1.0).how == "stored"
    assert len(world.sandbox.request_log) == before
    assert redis_conn.ttl(keys.INDEXED.format(machine(), REPO)) > 0


def test_a_push_is_indexed_from_the_compare_and_the_blobs_it_names(
    world: World, redis_conn: redis.Redis
) -> None:
    head = world.sandbox.commits(REPO, "main")[0]["sha"]
    ensure(world.gh, world.store, redis_conn, REPO, head, wait=1.0)
    pushed = world.sandbox.push(
        REPO,
        "main",
        {
            "pkg/headers.py": "def parse_header(line, sep=':'):\n    return line.split(sep)\n",
            "pkg/reader.py": None,
            "pkg/writer.py": "from pkg.headers import parse_header as ph\n",
        },
    )
    start = len(world.sandbox.request_log)
    ready = ensure(world.gh, world.store, redis_conn, REPO, pushed, wait=1.0)
    paths = [r.path.split("?")[0] for r in world.sandbox.request_log[start:]]
    assert ready.how == "updated"
    assert not any("tarball" in p for p in paths)
    assert sum("/git/blobs/" in p for p in paths) == 2  # the two new blobs, not the unchanged ones
    assert ready.index is not None
    assert sorted(ready.index.listing.files) == ["pkg/headers.py", "pkg/writer.py"]
    assert ready.index.paths_naming(["parse_header"]) == {"parse_header": ["pkg/headers.py", "pkg/writer.py"]}


def test_a_push_takes_the_blobs_whose_text_the_job_read_and_reads_only_the_others(
    world: World, redis_conn: redis.Redis
) -> None:
    head = world.sandbox.commits(REPO, "main")[0]["sha"]
    ensure(world.gh, world.store, redis_conn, REPO, head, wait=1.0)
    headers = "def parse_header(line, sep=':'):\n    return line.split(sep)\n"
    writer = "from pkg.headers import parse_header as ph\n"
    pushed = world.sandbox.push(REPO, "main", {"pkg/headers.py": headers, "pkg/writer.py": writer})
    start = len(world.sandbox.request_log)
    # The job read pkg/headers.py at the head (and an older text of writer.py, which is not its blob).
    held = [headers, "from pkg.headers import parse_header\n"]
    ready = ensure(world.gh, world.store, redis_conn, REPO, pushed, wait=1.0, held=lambda: held)
    blobs = [r.path for r in world.sandbox.request_log[start:] if "/git/blobs/" in r.path]
    assert ready.how == "updated"
    assert blobs == [f"/repos/{REPO}/git/blobs/{blob_sha(writer.encode())}"]
    assert ready.index is not None
    named = ready.index.paths_naming(["parse_header"])
    assert named == {"parse_header": ["pkg/headers.py", "pkg/reader.py", "pkg/writer.py"]}
    assert ready.index.texts(["pkg/headers.py"]) == {"pkg/headers.py": headers}


def test_a_build_lock_held_elsewhere_is_waited_for_within_the_bound(
    world: World, redis_conn: redis.Redis
) -> None:
    head = world.sandbox.commits(REPO, "main")[0]["sha"]
    redis_conn.set(keys.INDEX_BUILD.format(machine(), f"{REPO}@{head}"), "other", ex=60)
    ready = ensure(world.gh, world.store, redis_conn, REPO, head, wait=0.2)
    assert (ready.index, ready.how) == (None, "busy")


def _history(limit: int) -> list[str]:
    """Return the last ``limit`` commits of this repository that touched bot/core, oldest first."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "log", f"-n{limit}", "--format=%H", "--first-parent", "--", "bot/core"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return []
    return out[::-1]


def _files_at(commit: str) -> dict[str, bytes]:
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "-r", commit, "bot/core"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    entries = [(line.split("\t", 1)[1], line.split()[2]) for line in listed]
    batch = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "--batch"],
        input="".join(f"{sha}\n" for _, sha in entries).encode(),
        capture_output=True,
        check=True,
    ).stdout
    files: dict[str, bytes] = {}
    for path, _ in entries:
        header, _, batch = batch.partition(b"\n")
        size = int(header.split()[2])
        files[path], batch = batch[:size], batch[size + 1 :]
    return files


def test_replaying_a_real_history_push_by_push_equals_building_each_commit_from_scratch(
    world: World, redis_conn: redis.Redis, tmp_path: Path
) -> None:
    history = _history(8)
    if len(history) < 2:
        pytest.skip("this checkout has no git history")
    repo = "octo/history"
    world.sandbox.create_repo(repo, _files_at(history[0]), installation_id=world.gh.installation_id)
    scratch = Indexer(LocalStore(tmp_path / "scratch.sqlite3", 50_000_000))
    previous = _files_at(history[0])
    first = world.sandbox.commits(repo, "main")[0]["sha"]
    assert ensure(world.gh, world.store, redis_conn, repo, first, wait=1.0).how == "built"
    updated = 0
    for commit in history[1:]:
        files = _files_at(commit)
        changes: dict[str, bytes | None] = {p: d for p, d in files.items() if previous.get(p) != d}
        changes.update({p: None for p in previous if p not in files})
        if not changes:
            continue
        sha = world.sandbox.push(repo, "main", changes)
        ready = ensure(world.gh, world.store, redis_conn, repo, sha, wait=1.0)
        assert ready.index is not None, ready.detail
        updated += ready.how == "updated"
        fresh = scratch.build(repo, sha, world.gh.archive(repo, sha))
        assert ready.index.listing == fresh
        assert ready.index.symbols(fresh.files) == {
            p: s for p, s in scratch_symbols(scratch, fresh.files).items()
        }
        previous = files
    assert updated >= 1
    assert load_listing(world.store, repo, first) is not None


def scratch_symbols(indexer: Indexer, files: dict[str, str]) -> dict[str, object]:
    from bot.core.symbols import decode
    from bot.index.store import SYMBOLS

    found = indexer.store.get_many(SYMBOLS, files.values())
    return {p: decode(found[sha]) for p, sha in files.items()}


def test_warming_indexes_the_default_branch_named_by_the_archive(
    world: World, redis_conn: redis.Redis
) -> None:
    head = world.sandbox.commits(REPO, "main")[0]["sha"]
    assert warm(world.gh, world.store, redis_conn, REPO) == head
    assert load_listing(world.store, REPO, head) is not None
    assert redis_conn.get(keys.INDEXED.format(machine(), REPO)) == head.encode()
    # The first review of that head finds it stored.
    assert ensure(world.gh, world.store, redis_conn, REPO, head, wait=1.0).how == "stored"
