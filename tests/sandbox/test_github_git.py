"""Git data, refs, GraphQL commits and forks through the real PyGithub client."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from github import Github, GithubException, InputGitTreeElement
from graphql import parse
from graphql.language import FieldDefinitionNode, InputValueDefinitionNode, TypeDefinitionNode

from sandbox.github import GitHubSandbox
from sandbox.github.auth import generate_private_key_pem
from sandbox.github.graphql import SCHEMA_SDL
from tests.stories import commit_on_branch

KEY = generate_private_key_pem()
FILES = {"src/app.py": "print('hi')\n", "README.md": "# app\n", "src/lib/util.py": "X = 1\n"}


@pytest.fixture()
def gh() -> Iterator[GitHubSandbox]:
    """acme/app installed; PR #1 from a same-repo branch."""
    with GitHubSandbox(private_key_pem=KEY) as sandbox:
        installation = sandbox.create_installation("acme")
        sandbox.create_repo("acme/app", FILES, installation)
        sandbox.open_pull_request("acme/app", "feature", {"src/app.py": "print('hello')\n"})
        yield sandbox


@pytest.fixture()
def client(gh: GitHubSandbox) -> Github:
    """PyGithub authenticated as the installation."""
    return gh.client(next(iter(gh.state.installations)))


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_object_ids_are_git_sha1s(gh: GitHubSandbox, client: Github, tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for path, content in FILES.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(content)
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    tree = subprocess.run(
        ["git", "-C", str(tmp_path), "write-tree"], check=True, capture_output=True, text=True
    )
    repo = client.get_repo("acme/app")
    main = repo.get_git_commit(repo.get_git_ref("heads/main").object.sha)
    assert main.tree.sha == tree.stdout.strip()
    blob = repo.create_git_blob("print('hi')\n", "utf-8")
    expected = subprocess.run(
        ["git", "hash-object", "--stdin"], input="print('hi')\n", check=True, capture_output=True, text=True
    )
    assert blob.sha == expected.stdout.strip()


def test_git_data_commit_and_fast_forward_only_refs(gh: GitHubSandbox, client: Github) -> None:
    repo = client.get_repo("acme/app")
    ref = repo.get_git_ref("heads/feature")
    head = repo.get_git_commit(ref.object.sha)
    blob = repo.create_git_blob("print('fixed')\n", "utf-8")
    tree = repo.create_git_tree(
        [InputGitTreeElement("src/app.py", "100644", "blob", sha=blob.sha)], head.tree
    )
    commit = repo.create_git_commit("Fix greeting", tree, [head])
    assert commit.raw_data["verification"]["verified"] is True  # an App's commit without custom author
    ref.edit(commit.sha)
    assert gh.file_at("acme/app", "feature", "src/app.py") == "print('fixed')\n"
    assert gh.file_at("acme/app", "feature", "README.md") == "# app\n"
    # Rewinding to the parent is not a fast-forward: refused unless forced.
    with pytest.raises(GithubException) as caught:
        ref.edit(head.sha)
    assert caught.value.status == 422
    assert caught.value.data["message"] == "Update is not a fast forward"
    ref.edit(head.sha, force=True)
    assert gh.head_sha("acme/app", 1) == head.sha
    synchronize = [d for d in gh.wait_for_deliveries() if d.action == "synchronize"]
    assert len(synchronize) == 2


def test_create_commit_on_branch_is_verified_and_checks_expected_head(
    gh: GitHubSandbox, client: Github
) -> None:
    head = gh.head_sha("acme/app", 1)
    data = commit_on_branch(client, "acme/app", "feature", head, {"src/app.py": "print('fixed')\n"})
    commit = data["commit"]
    assert commit["signature"]["isValid"] is True
    assert gh.head_sha("acme/app", 1) == commit["oid"]
    newest = gh.commits("acme/app", "feature")[0]
    assert newest == {
        "sha": commit["oid"],
        "message": "Spark fix\n\nRequested-by: a comment",
        "author": gh.bot_login,
        "verified": True,
        "parents": [head],
    }
    # The same expectedHeadOid again: the branch moved, GitHub's STALE_DATA error, nothing written.
    with pytest.raises(GithubException) as caught:
        commit_on_branch(client, "acme/app", "feature", head, {"src/app.py": "clobber\n"})
    error = caught.value.data["errors"][0]
    assert error["type"] == "STALE_DATA"
    assert error["message"] == f'Expected branch to point to "{head}" but it did not. Pull and try again.'
    assert gh.file_at("acme/app", "feature", "src/app.py") == "print('fixed')\n"


def test_head_moved_mid_job_is_caught_by_expected_head(gh: GitHubSandbox, client: Github) -> None:
    pr = client.get_repo("acme/app").get_pull(1)
    started_from = pr.head.sha
    gh.move_head_on("acme/app", 1, {"src/app.py": "print('human')\n"}, "POST", r"^/graphql$")
    with pytest.raises(GithubException) as caught:
        commit_on_branch(client, "acme/app", "feature", started_from, {"src/app.py": "print('bot')\n"})
    assert caught.value.data["errors"][0]["type"] == "STALE_DATA"
    assert gh.file_at("acme/app", "feature", "src/app.py") == "print('human')\n"


def test_fork_branch_is_writable_only_with_maintainer_edits(gh: GitHubSandbox, client: Github) -> None:
    closed = gh.open_pull_request("acme/app", "fix", {"a.txt": "1\n"}, fork_owner="alice")
    opened = gh.open_pull_request(
        "acme/app", "edit-me", {"b.txt": "1\n"}, fork_owner="alice", maintainer_can_modify=True
    )
    org_fork = gh.open_pull_request(
        "acme/app",
        "org",
        {"c.txt": "1\n"},
        fork_owner="bigco",
        fork_owner_type="Organization",
        maintainer_can_modify=True,
    )
    pulls = {n: client.get_repo("acme/app").get_pull(n) for n in (closed, opened, org_fork)}
    assert pulls[closed].head.repo.full_name == "alice/app"
    assert pulls[closed].maintainer_can_modify is False
    assert pulls[org_fork].maintainer_can_modify is False  # only user-owned forks allow maintainer edits
    for number in (closed, org_fork):
        pr = pulls[number]
        with pytest.raises(GithubException) as caught:
            commit_on_branch(client, pr.head.repo.full_name, pr.head.ref, pr.head.sha, {"x.txt": "x\n"})
        assert caught.value.data["errors"][0]["type"] == "FORBIDDEN"
        fork = client.get_repo(pr.head.repo.full_name)
        with pytest.raises(GithubException) as rest:
            fork.create_git_ref(f"refs/heads/bot-{number}", pr.head.sha)
        assert rest.value.status == 403
    pr = pulls[opened]
    data = commit_on_branch(client, "alice/app", "edit-me", pr.head.sha, {"b.txt": "2\n"})
    assert data["commit"]["signature"]["isValid"] is True
    assert gh.file_at("alice/app", "edit-me", "b.txt") == "2\n"
    # The REST git-data path works on that branch too, but a new branch in the fork is still refused.
    fork = client.get_repo("alice/app")
    head = fork.get_git_commit(gh.head_sha("acme/app", opened))
    blob = fork.create_git_blob("3\n", "utf-8")
    tree = fork.create_git_tree([InputGitTreeElement("b.txt", "100644", "blob", sha=blob.sha)], head.tree)
    fork.get_git_ref("heads/edit-me").edit(fork.create_git_commit("three", tree, [head]).sha)
    assert gh.file_at("alice/app", "edit-me", "b.txt") == "3\n"
    with pytest.raises(GithubException) as refused:
        fork.create_git_ref("refs/heads/elsewhere", head.sha)
    assert refused.value.status == 403
    assert client.get_repo("acme/app").get_pull(opened).get_files()[0].filename == "b.txt"


def test_review_threads_query_and_resolve(gh: GitHubSandbox, client: Github) -> None:
    root = gh.review_comment("acme/app", 1, "src/app.py", 1, "typo here")
    gh.reply("acme/app", 1, root, "indeed")
    query = """
      query($owner: String!, $name: String!, $number: Int!) {
        repository(owner: $owner, name: $name) {
          pullRequest(number: $number) {
            headRefOid
            reviewThreads(first: 50) {
              nodes {
                id isResolved isOutdated path line
                comments(first: 10) { nodes { databaseId body author { login } } }
              }
            }
          }
        }
      }"""
    variables = {"owner": "acme", "name": "app", "number": 1}
    _, data = client.requester.graphql_query(query, variables)
    pull = data["data"]["repository"]["pullRequest"]
    assert pull["headRefOid"] == gh.head_sha("acme/app", 1)
    [thread] = pull["reviewThreads"]["nodes"]
    assert (thread["isResolved"], thread["isOutdated"], thread["path"], thread["line"]) == (
        False,
        False,
        "src/app.py",
        1,
    )
    assert [c["databaseId"] for c in thread["comments"]["nodes"]] == gh.threads("acme/app", 1)[0][
        "comment_ids"
    ]
    _, resolved = client.requester.graphql_named_mutation(
        "resolveReviewThread", {"threadId": thread["id"]}, "thread { id isResolved }"
    )
    assert resolved["thread"]["isResolved"] is True
    assert gh.threads("acme/app", 1)[0]["resolved"] is True
    gh.push("acme/app", "feature", {"src/app.py": "print('changed again')\n"})
    _, data = client.requester.graphql_query(query, variables)
    assert data["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"][0]["isOutdated"] is True


def test_a_person_resolves_and_unresolves_a_thread(gh: GitHubSandbox, client: Github) -> None:
    """ "Resolve conversation" by a person: GraphQL's `isResolved` and `resolvedBy` show it
    (https://docs.github.com/graphql/reference/objects#pullrequestreviewthread)."""
    root = gh.review_comment("acme/app", 1, "src/app.py", 1, "typo here")
    query = """
      query($owner: String!, $name: String!, $number: Int!) {
        repository(owner: $owner, name: $name) {
          pullRequest(number: $number) {
            reviewThreads(first: 5) { nodes { isResolved resolvedBy { login } } }
          }
        }
      }"""
    variables = {"owner": "acme", "name": "app", "number": 1}

    def shown() -> list[Any]:
        _, data = client.requester.graphql_query(query, variables)
        return list(data["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"])

    gh.resolve_thread(root, author="bob")
    assert shown() == [{"isResolved": True, "resolvedBy": {"login": "bob"}}]
    gh.resolve_thread(root, author="carol", resolved=False)
    assert shown() == [{"isResolved": False, "resolvedBy": None}]


def test_unknown_repository_is_graphql_not_found(client: Github) -> None:
    with pytest.raises(GithubException) as caught:
        client.requester.graphql_query('{ repository(owner: "nobody", name: "x") { id } }', {})
    assert caught.value.status == 404


def test_invalid_query_is_a_graphql_error(client: Github) -> None:
    with pytest.raises(GithubException) as caught:
        client.requester.graphql_query("{ repository(owner: 1) { nope } }", {})
    assert caught.value.data["errors"]


def _fields(document: str) -> dict[str, dict[str, str]]:
    """Map type name -> {field or input field name: its type as written} for every definition in SDL."""
    out: dict[str, dict[str, str]] = {}
    for definition in parse(document, no_location=False).definitions:
        if not isinstance(definition, TypeDefinitionNode):
            continue
        nodes = getattr(definition, "fields", None) or []
        typed: dict[str, str] = {}
        for node in nodes:
            assert isinstance(node, (FieldDefinitionNode, InputValueDefinitionNode))
            source = node.type.loc.source.body if node.type.loc else ""
            typed[node.name.value] = source[node.type.loc.start : node.type.loc.end] if node.type.loc else ""
        out[definition.name.value] = typed
    return out


def test_graphql_subset_matches_githubs_schema(shared_dir: Path) -> None:
    real = _fields((shared_dir / "github/graphql/schema.docs.graphql").read_text())
    for type_name, fields in _fields(SCHEMA_SDL).items():
        if type_name in ("Query", "Mutation"):
            for name in fields:
                root = real["Query" if type_name == "Query" else "Mutation"]
                assert name in root, f"{type_name}.{name} is not in GitHub's schema"
            continue
        assert type_name in real, f"{type_name} is not in GitHub's schema"
        for name, written in fields.items():
            assert name in real[type_name], f"{type_name}.{name} is not in GitHub's schema"
            assert written == real[type_name][name], (
                f"{type_name}.{name}: {written} != {real[type_name][name]}"
            )
