"""Branch protection, rulesets and fork push rules of the local GitHub, through the real PyGithub client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from github import Github, GithubException, InputGitAuthor, InputGitTreeElement

from sandbox.github import GitHubSandbox
from sandbox.github.auth import generate_private_key_pem
from sandbox.github.rules import BranchRules
from tests.stories import commit_on_branch

KEY = generate_private_key_pem()
FILES = {"app.py": "print('hi')\n"}


@pytest.fixture()
def gh() -> Iterator[GitHubSandbox]:
    """acme/app installed; PR #1 from the same-repo branch ``feature``."""
    with GitHubSandbox(private_key_pem=KEY) as sandbox:
        installation = sandbox.create_installation("acme")
        sandbox.create_repo("acme/app", FILES, installation)
        sandbox.open_pull_request("acme/app", "feature", {"app.py": "print('hello')\n"})
        yield sandbox


@pytest.fixture()
def client(gh: GitHubSandbox) -> Github:
    """PyGithub authenticated as the installation."""
    return gh.client(next(iter(gh.state.installations)))


def refused_push(client: Github, gh: GitHubSandbox, repo: str = "acme/app") -> dict[str, object]:
    """Try createCommitOnBranch on ``feature``; return GitHub's one error (the branch must not move)."""
    head = gh.head_sha("acme/app", 1)
    with pytest.raises(GithubException) as caught:
        commit_on_branch(client, repo, "feature", head, {"app.py": "print('fixed')\n"})
    assert gh.head_sha("acme/app", 1) == head
    [error] = caught.value.data["errors"]
    assert isinstance(error, dict)
    return error


# https://docs.github.com/en/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#require-status-checks-before-merging
def test_protection_with_required_status_checks_refuses_the_apps_commit(
    gh: GitHubSandbox, client: Github
) -> None:
    gh.protect_branch("acme/app", "feature", BranchRules(required_status_checks=("build",)))
    error = refused_push(client, gh)
    assert error["type"] == "BRANCH_PROTECTION_RULE_VIOLATION"
    assert error["message"] == (
        "Protected branch update failed for refs/heads/feature.\n\n"
        '- Required status check "build" is expected.'
    )


# https://docs.github.com/en/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#restrict-who-can-push-to-matching-branches
def test_restricted_pushers_refuse_the_app_unless_it_is_named(gh: GitHubSandbox, client: Github) -> None:
    gh.protect_branch("acme/app", "feature", BranchRules(allowed_pushers=("alice",)))
    error = refused_push(client, gh)
    assert error["type"] == "BRANCH_PROTECTION_RULE_VIOLATION"
    assert "You're not authorized to push to this branch." in str(error["message"])
    gh.github.rules.rules.clear()
    gh.protect_branch("acme/app", "feature", BranchRules(allowed_pushers=("alice", gh.bot_login)))
    head = gh.head_sha("acme/app", 1)
    commit_on_branch(client, "acme/app", "feature", head, {"app.py": "print('fixed')\n"})
    assert gh.file_at("acme/app", "feature", "app.py") == "print('fixed')\n"


# https://docs.github.com/en/repositories/configuring-branches-and-merges-in-your-repository/managing-rulesets/available-rules-for-rulesets#require-a-pull-request-before-merging
def test_a_ruleset_refuses_with_repository_rule_violations(gh: GitHubSandbox, client: Github) -> None:
    rules = BranchRules(source="ruleset", require_pull_request=True, required_status_checks=("a", "b"))
    gh.protect_branch("acme/app", "feature", rules)
    error = refused_push(client, gh)
    assert error["type"] == "UNPROCESSABLE"
    message = str(error["message"])
    assert message.startswith("Repository rule violations found for refs/heads/feature.")
    assert "- Changes must be made through a pull request." in message
    assert "- 2 of 2 required status checks are expected." in message


# https://docs.github.com/en/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#require-signed-commits
# https://docs.github.com/en/authentication/managing-commit-signature-verification/about-commit-signature-verification#signature-verification-for-bots
def test_required_signatures_pass_the_apps_signed_commits_and_refuse_unsigned_ones(
    gh: GitHubSandbox, client: Github
) -> None:
    gh.protect_branch("acme/app", "feature", BranchRules(required_signatures=True))
    head = gh.head_sha("acme/app", 1)
    data = commit_on_branch(client, "acme/app", "feature", head, {"app.py": "print('signed')\n"})
    assert data["commit"]["signature"]["isValid"] is True
    # A git-data commit with a custom author is not signed by GitHub: the ref update is refused.
    repo = client.get_repo("acme/app")
    parent = repo.get_git_commit(gh.head_sha("acme/app", 1))
    blob = repo.create_git_blob("print('unsigned')\n", "utf-8")
    tree = repo.create_git_tree([InputGitTreeElement("app.py", "100644", "blob", sha=blob.sha)], parent.tree)
    unsigned = repo.create_git_commit("unsigned", tree, [parent], author=InputGitAuthor("x", "x@example.com"))
    with pytest.raises(GithubException) as caught:
        repo.get_git_ref("heads/feature").edit(unsigned.sha)
    assert caught.value.status == 422
    assert "Commits must have verified signatures." in str(caught.value.data["message"])
    assert gh.file_at("acme/app", "feature", "app.py") == "print('signed')\n"


# https://docs.github.com/en/pull-requests/collaborating-with-pull-requests/working-with-forks/allowing-changes-to-a-pull-request-branch-created-from-a-fork
def test_a_fork_open_to_maintainers_still_obeys_its_own_branch_rules(
    gh: GitHubSandbox, client: Github
) -> None:
    number = gh.open_pull_request(
        "acme/app", "edit-me", {"b.txt": "1\n"}, fork_owner="alice", maintainer_can_modify=True
    )
    gh.protect_branch("alice/app", "edit-me", BranchRules(require_pull_request=True))
    head = gh.head_sha("acme/app", number)
    with pytest.raises(GithubException) as caught:
        commit_on_branch(client, "alice/app", "edit-me", head, {"b.txt": "2\n"})
    [error] = caught.value.data["errors"]
    assert error["type"] == "BRANCH_PROTECTION_RULE_VIOLATION"
    assert gh.file_at("alice/app", "edit-me", "b.txt") == "1\n"
