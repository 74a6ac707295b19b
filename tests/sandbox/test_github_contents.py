"""The contents API as GitHub serves it: size tiers, symlinks, submodules, binary files, encoded paths.

Rules from https://docs.github.com/rest/repos/contents#get-repository-content and
https://docs.github.com/rest/git/blobs#get-a-blob, read through the real PyGithub requester.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from github import Github, GithubException

from sandbox.github import GitHubSandbox, Submodule, Symlink
from sandbox.github.auth import generate_private_key_pem

KEY = generate_private_key_pem()
MB = 1024 * 1024
BIG = b"# generated\n" + b"x = 1\n" * (MB // 6 + 1000)  # a little over 1 MB
PNG = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256))
SUB_SHA = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
ODD_NAMES = ("docs/issue #1.md", "what?.txt", "50%41.txt", "with space.txt", "caf\u00e9.md")


@pytest.fixture(scope="module")
def gh() -> Iterator[GitHubSandbox]:
    """A sandbox with acme/app: a big file, symlinks, a submodule, a binary file and awkward names."""
    with GitHubSandbox(private_key_pem=KEY) as sandbox:
        installation = sandbox.create_installation("acme")
        files: dict[str, Any] = {
            "src/app.py": "print('hi')\n",
            "src/big.py": BIG,
            "link.py": Symlink("src/app.py"),
            "src/up.py": Symlink("../src/app.py"),
            "to-dir": Symlink("src"),
            "dangling": Symlink("nowhere.txt"),
            "vendor/lib": Submodule("https://github.com/acme/lib.git", SUB_SHA),
            "logo.png": PNG,
        }
        files.update({name: f"{name}\n" for name in ODD_NAMES})
        sandbox.create_repo("acme/app", files, installation)
        yield sandbox


@pytest.fixture(scope="module")
def client(gh: GitHubSandbox) -> Github:
    """PyGithub authenticated as the installation."""
    return gh.client(next(iter(gh.state.installations)))


def get(client: Github, path: str, accept: str | None = None) -> Any:
    headers = {"Accept": accept} if accept else None
    return client.requester.requestJsonAndCheck("GET", f"/repos/acme/app/{path}", headers=headers)[1]


def test_files_up_to_1_mb_carry_their_content_in_base64(client: Github) -> None:
    data = get(client, "contents/src/app.py")
    assert (data["type"], data["encoding"], data["size"]) == ("file", "base64", 12)
    assert base64.b64decode(data["content"]) == b"print('hi')\n"


def test_files_of_1_to_100_mb_come_without_content(client: Github) -> None:
    data = get(client, "contents/src/big.py")
    assert (data["type"], data["encoding"], data["content"]) == ("file", "none", "")
    assert data["size"] == len(BIG) > MB
    # The raw media type carries them, and so does the blob API (up to 100 MB).
    raw = get(client, "contents/src/big.py", "application/vnd.github.raw+json")
    assert raw["data"] == BIG.decode()
    blob = get(client, f"git/blobs/{data['sha']}")
    assert base64.b64decode(blob["content"]) == BIG


def test_files_over_100_mb_are_refused(gh: GitHubSandbox, client: Github) -> None:
    huge = b"\0" * (100 * MB + 1)
    gh.create_repo("acme/huge", {"data.bin": huge}, next(iter(gh.state.installations)))
    with pytest.raises(GithubException) as refused:
        client.requester.requestJsonAndCheck("GET", "/repos/acme/huge/contents/data.bin")
    assert refused.value.status == 403
    assert refused.value.data["errors"][0]["code"] == "too_large"
    sha = gh.state.git.files_at(gh.state.repo("acme/huge").refs["main"])["data.bin"]
    with pytest.raises(GithubException) as blob:
        client.requester.requestJsonAndCheck("GET", f"/repos/acme/huge/git/blobs/{sha}")
    assert blob.value.status == 403
    del gh.state.git.blobs[sha]  # a hundred megabytes the other tests do not need


def test_a_symlink_to_a_file_answers_with_the_files_content_and_its_target(client: Github) -> None:
    for link, target in (("link.py", "src/app.py"), ("src/up.py", "../src/app.py")):
        data = get(client, f"contents/{link}")
        assert data["type"] == "file"
        assert data["target"] == target
        assert base64.b64decode(data["content"]) == b"print('hi')\n"


def test_other_symlinks_are_described_not_followed(client: Github) -> None:
    for link, target in (("to-dir", "src"), ("dangling", "nowhere.txt")):
        data = get(client, f"contents/{link}")
        assert (data["type"], data["target"]) == ("symlink", target)
        assert "content" not in data


def test_a_submodule_is_a_submodule_but_a_file_in_its_directorys_listing(client: Github) -> None:
    data = get(client, "contents/vendor/lib")
    assert (data["type"], data["sha"], data["submodule_git_url"]) == (
        "submodule",
        SUB_SHA,
        "https://github.com/acme/lib.git",
    )
    assert "content" not in data
    [listed] = get(client, "contents/vendor")
    assert (listed["type"], listed["path"]) == ("file", "vendor/lib")
    tree = get(client, "git/trees/main?recursive=1")["tree"]
    assert {"path": "vendor/lib", "mode": "160000", "type": "commit"}.items() <= next(
        e for e in tree if e["path"] == "vendor/lib"
    ).items()
    link = next(e for e in tree if e["path"] == "link.py")
    assert (link["mode"], link["type"]) == ("120000", "blob")


def test_binary_files_round_trip_in_base64(client: Github) -> None:
    data = get(client, "contents/logo.png")
    assert base64.b64decode(data["content"]) == PNG


@pytest.mark.parametrize("name", ODD_NAMES)
def test_paths_are_read_percent_encoded(client: Github, name: str) -> None:
    data = get(client, f"contents/{quote(name)}")
    assert (data["path"], base64.b64decode(data["content"]).decode()) == (name, f"{name}\n")


@pytest.mark.parametrize("name", ODD_NAMES[:3])
def test_unencoded_hash_question_mark_and_percent_miss_the_file(client: Github, name: str) -> None:
    # `#` starts the fragment, `?` the query, and `%41` reads as `A`: the request names another path.
    with pytest.raises(GithubException) as missed:
        get(client, f"contents/{name}")
    assert missed.value.status in (400, 404)
