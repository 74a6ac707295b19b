"""GitHub's diff limits: the 406 for a pull request's diff, per-file patches left out, the 3,000-file listing.

From https://docs.github.com/repositories/creating-and-managing-repositories/repository-limits ("Diff
limits": a diff of at most 300 files, 20,000 lines and 1 MB; no single file's diff over 20,000 lines or
500 KB) and https://docs.github.com/rest/pulls/pulls#list-pull-requests-files (at most 3,000 files).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from github import Github, GithubException

from sandbox.github import GitHubSandbox
from sandbox.github.auth import generate_private_key_pem

KEY = generate_private_key_pem()
DIFF = {"Accept": "application/vnd.github.diff"}


@pytest.fixture(scope="module")
def gh() -> Iterator[GitHubSandbox]:
    """A sandbox with acme/app installed."""
    with GitHubSandbox(private_key_pem=KEY) as sandbox:
        sandbox.create_repo("acme/app", {"README.md": "hi\n"}, sandbox.create_installation("acme"))
        yield sandbox


@pytest.fixture(scope="module")
def client(gh: GitHubSandbox) -> Github:
    """PyGithub authenticated as the installation."""
    return gh.client(next(iter(gh.state.installations)))


def listed(client: Github, number: int) -> list[dict[str, object]]:
    files: list[dict[str, object]] = []
    page = 1
    while True:
        _, data = client.requester.requestJsonAndCheck(
            "GET", f"/repos/acme/app/pulls/{number}/files", parameters={"per_page": 100, "page": page}
        )
        files += data
        if len(data) < 100:
            return files
        page += 1


def too_large(client: Github, number: int) -> GithubException:
    with pytest.raises(GithubException) as refused:
        client.requester.requestJsonAndCheck("GET", f"/repos/acme/app/pulls/{number}", headers=DIFF)
    assert refused.value.status == 406
    return refused.value


def test_a_files_patch_is_left_out_past_20000_lines_or_500_kb(gh: GitHubSandbox, client: Github) -> None:
    files = {
        "long.txt": "".join(f"{i}\n" for i in range(20_001)),
        "wide.txt": ("x" * 999 + "\n") * 600,  # 600 KB in 600 lines
        "small.txt": "ok\n",
    }
    number = gh.open_pull_request("acme/app", "limits", files, author="dev")
    by_name = {f["filename"]: f for f in listed(client, number)}
    assert "patch" not in by_name["long.txt"] and "patch" not in by_name["wide.txt"]
    assert by_name["small.txt"]["patch"] == "@@ -0,0 +1 @@\n+ok"
    assert by_name["long.txt"]["additions"] == 20_001
    assert too_large(client, number).data["errors"][0]["code"] == "too_large"


def test_a_diff_over_1_mb_or_300_files_is_refused_with_406(gh: GitHubSandbox, client: Github) -> None:
    wide = {f"w{i}.txt": ("y" * 499 + "\n") * 500 for i in range(5)}  # 5 x 250 KB: files fine, diff not
    number = gh.open_pull_request("acme/app", "wide", wide, author="dev")
    assert all("patch" in f for f in listed(client, number))
    too_large(client, number)
    many = gh.open_pull_request("acme/app", "many", {f"m{i}.txt": "m\n" for i in range(301)}, author="dev")
    assert "maximum number of files" in too_large(client, many).data["message"]


def test_the_file_listing_stops_at_3000_files(gh: GitHubSandbox, client: Github) -> None:
    number = gh.open_pull_request(
        "acme/app", "huge", {f"f{i:04}.txt": "f\n" for i in range(3001)}, author="dev"
    )
    assert len(listed(client, number)) == 3000
    assert client.get_repo("acme/app").get_pull(number).changed_files == 3001
