"""The local GitHub's size limits: bodies, check-run output, annotations, actions (real PyGithub client)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from github import Github, GithubException

from bot.sandbox.github import GitHubSandbox
from bot.sandbox.github.auth import generate_private_key_pem

KEY = generate_private_key_pem()
REPO = "acme/app"


@pytest.fixture()
def gh() -> Iterator[GitHubSandbox]:
    """acme/app installed; PR #1 changes app.py."""
    with GitHubSandbox(private_key_pem=KEY) as sandbox:
        installation = sandbox.create_installation("acme")
        sandbox.create_repo(REPO, {"app.py": "a = 1\n"}, installation)
        sandbox.open_pull_request(REPO, "feature", {"app.py": "a = 2\n"})
        yield sandbox


@pytest.fixture()
def client(gh: GitHubSandbox) -> Github:
    """PyGithub authenticated as the installation."""
    return gh.client(next(iter(gh.state.installations)))


def refused(call: Any, *args: Any, **kwargs: Any) -> GithubException:
    """Return the GithubException ``call`` raises (it must raise one with status 422)."""
    with pytest.raises(GithubException) as caught:
        call(*args, **kwargs)
    assert caught.value.status == 422
    return caught.value


# https://docs.github.com/en/rest/issues/comments#create-an-issue-comment (body: at most 65,536 characters)
def test_comment_bodies_take_at_most_65536_characters(gh: GitHubSandbox, client: Github) -> None:
    pull = client.get_repo(REPO).get_pull(1)
    error = refused(pull.create_issue_comment, "x" * 65_537)
    assert "Body is too long (maximum is 65536 characters)" in str(error.data)
    comment = pull.create_issue_comment("x" * 65_536)
    refused(comment.edit, "y" * 65_537)
    assert len(gh.issue_comments(REPO, 1)) == 1


# https://docs.github.com/en/rest/pulls/reviews#create-a-review-for-a-pull-request
def test_review_and_review_comment_bodies_take_at_most_65536_characters(
    gh: GitHubSandbox, client: Github
) -> None:
    pull = client.get_repo(REPO).get_pull(1)
    head = client.get_repo(REPO).get_commit(gh.head_sha(REPO, 1))
    refused(pull.create_review, head, "x" * 65_537, "COMMENT")
    inline = {"path": "app.py", "line": 1, "side": "RIGHT", "body": "y" * 65_537}
    refused(pull.create_review, head, "short", "COMMENT", [inline])
    assert gh.reviews(REPO, 1) == []
    pull.create_review(head, "x" * 65_536, "COMMENT")
    assert len(gh.reviews(REPO, 1)) == 1


# https://docs.github.com/en/rest/checks/runs#create-a-check-run (output.summary/text: 65,535 characters)
def test_check_run_output_takes_at_most_65535_characters_counted_in_bytes(
    gh: GitHubSandbox, client: Github
) -> None:
    repo = client.get_repo(REPO)
    head = gh.head_sha(REPO, 1)
    error = refused(repo.create_check_run, "Spark", head, output={"title": "t", "summary": "x" * 65_536})
    assert "Only 65535 characters are allowed; 65536 were supplied." in str(error.data)
    # 30,000 characters of three bytes each: within the character count, over GitHub's byte count.
    error = refused(repo.create_check_run, "Spark", head, output={"title": "t", "summary": "说" * 30_000})
    assert "summary exceeds a maximum bytesize of 65535" in str(error.data)
    run = repo.create_check_run("Spark", head, output={"title": "t", "summary": "x" * 65_535, "text": "ok"})
    refused(run.edit, output={"title": "t", "summary": "s", "text": "y" * 65_536})
    assert gh.check_runs(REPO)[0]["output"]["summary"] == "x" * 65_535


# https://docs.github.com/en/rest/checks/runs#update-a-check-run (annotations: at most 50 per request)
def test_at_most_50_annotations_per_request(gh: GitHubSandbox, client: Github) -> None:
    repo = client.get_repo(REPO)
    note = {"path": "app.py", "start_line": 1, "end_line": 1, "annotation_level": "notice", "message": "m"}
    output: dict[str, Any] = {"title": "t", "summary": "s", "annotations": [note] * 51}
    error = refused(repo.create_check_run, "Spark", gh.head_sha(REPO, 1), output=output)
    assert "Only 50 annotations" in str(error.data)
    output["annotations"] = [note] * 50
    repo.create_check_run("Spark", gh.head_sha(REPO, 1), output=output)


# https://docs.github.com/en/rest/checks/runs#create-a-check-run (actions: at most 3; label and identifier
# at most 20 characters, description at most 40)
@pytest.mark.parametrize(
    ("actions", "problem"),
    [
        ([{"label": "a", "description": "d", "identifier": f"i{n}"} for n in range(4)], "Only 3 actions"),
        ([{"label": "l" * 21, "description": "d", "identifier": "i"}], "label is 21 characters"),
        ([{"label": "l", "description": "d", "identifier": "i" * 21}], "identifier is 21 characters"),
        ([{"label": "l", "description": "d" * 41, "identifier": "i"}], "description is 41 characters"),
    ],
)
def test_check_run_actions_limits(
    gh: GitHubSandbox, client: Github, actions: list[dict[str, str]], problem: str
) -> None:
    repo = client.get_repo(REPO)
    error = refused(repo.create_check_run, "Spark", gh.head_sha(REPO, 1), actions=actions)
    assert problem in str(error.data)
    fine = [{"label": "l" * 20, "description": "d" * 40, "identifier": "i" * 20}] * 3
    repo.create_check_run("Spark", gh.head_sha(REPO, 1), actions=fine)
