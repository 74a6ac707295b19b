"""The local GitHub's size limits: bodies, check-run output, annotations, actions (real PyGithub client)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from github import Auth, Github, GithubException

from sandbox.github import GitHubSandbox
from sandbox.github.auth import generate_private_key_pem
from tests.stories import commit_on_branch

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


# --- rate limits -----------------------------------------------------------------------------------------


@pytest.fixture()
def raw(gh: GitHubSandbox) -> Github:
    """PyGithub with no retries at all, so each refusal is seen as GitHub sends it."""
    auth = Auth.AppAuth(gh.app_id, gh.private_key_pem).get_installation_auth(
        next(iter(gh.state.installations))
    )
    return Github(
        auth=auth, base_url=gh.url, retry=None, seconds_between_requests=0, seconds_between_writes=0
    )


def comment_refused(raw: Github) -> GithubException:
    with pytest.raises(GithubException) as caught:
        raw.get_repo(REPO).get_pull(1).create_issue_comment("over the limit")
    return caught.value


# https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit
def test_the_primary_limit_answers_403_with_remaining_zero_and_the_reset(
    gh: GitHubSandbox, raw: Github
) -> None:
    repo = raw.get_repo(REPO)
    remaining, limit = raw.rate_limiting
    gh.faults.rate_limit = limit - remaining + 1  # one call left
    repo.get_pull(1)
    with pytest.raises(GithubException) as caught:
        repo.get_pull(1)
    assert caught.value.status == 403
    assert "API rate limit exceeded for installation ID" in str(caught.value.data)
    headers = {k.lower(): v for k, v in (caught.value.headers or {}).items()}
    assert headers["x-ratelimit-remaining"] == "0" and int(headers["x-ratelimit-reset"]) > time.time()


# https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits
@pytest.mark.parametrize(("status", "retry_after"), [(403, 60), (403, None), (429, 30), (429, None)])
def test_content_creation_over_the_minute_budget_is_a_secondary_limit(
    gh: GitHubSandbox, raw: Github, status: int, retry_after: int | None
) -> None:
    gh.faults.content.per_minute, gh.faults.content.status = 2, status
    gh.faults.content.retry_after = retry_after
    pull = raw.get_repo(REPO).get_pull(1)
    pull.create_issue_comment("one")
    pull.create_issue_comment("two")
    error = comment_refused(raw)
    assert error.status == status and "secondary rate limit" in str(error.data)
    headers = {k.lower(): v for k, v in (error.headers or {}).items()}
    assert headers.get("retry-after") == (None if retry_after is None else str(retry_after))
    assert len(gh.issue_comments(REPO, 1)) == 2
    pull.get_commits()  # reads are not content creation
    # A GraphQL mutation creates content; a query does not.
    _, data = raw.requester.graphql_query("query { viewer { login } }", {})
    assert data["data"]["viewer"]["login"]
    with pytest.raises(GithubException) as mutation:
        commit_on_branch(raw, REPO, "feature", gh.head_sha(REPO, 1), {"app.py": "a = 3\n"})
    assert mutation.value.status == status


# https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits
# ("no more than 500 content-generating requests per hour")
def test_content_creation_over_the_hour_budget_is_refused_too(gh: GitHubSandbox, raw: Github) -> None:
    gh.faults.content.per_hour = 3
    pull = raw.get_repo(REPO).get_pull(1)
    for n in range(3):
        pull.create_issue_comment(f"c{n}")
    assert comment_refused(raw).status == 403
    gh.faults.content.reset()
    pull.create_issue_comment("a new window")


# Not a documented rule but a fault every client meets: a write that happened whose answer never arrived.
def test_a_lost_answer_serves_the_write_and_drops_the_connection(gh: GitHubSandbox, raw: Github) -> None:
    gh.faults.lose_answer("POST", r"/issues/1/comments$")
    with pytest.raises(requests.ConnectionError):
        raw.get_repo(REPO).get_pull(1).create_issue_comment("stored, never answered")
    assert [c["body"] for c in gh.issue_comments(REPO, 1)] == ["stored, never answered"]


# https://docs.github.com/en/graphql/overview/rate-limits-and-node-limits-for-the-graphql-api#exceeding-the-rate-limit
def test_graphql_answers_its_primary_limit_with_200_and_rate_limited(gh: GitHubSandbox, raw: Github) -> None:
    raw.get_repo(REPO)
    remaining, limit = raw.rate_limiting
    gh.faults.rate_limit = limit - remaining
    headers, data = raw.requester.requestJsonAndCheck(
        "POST", "/graphql", input={"query": "query { viewer { login } }"}
    )
    assert data["errors"][0]["type"] == "RATE_LIMITED"
    assert {k.lower(): v for k, v in headers.items()}["x-ratelimit-remaining"] == "0"
