"""Responses have every field GitHub's OpenAPI description marks required (read through PyGithub)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from github import Github

from sandbox.github import GitHubSandbox
from sandbox.github.auth import generate_private_key_pem
from tests.stories import missing_required, response_schema

KEY = generate_private_key_pem()
R = "/repos/{owner}/{repo}"


@pytest.fixture(scope="module")
def spec(shared_dir: Path) -> dict[str, Any]:
    """GitHub's REST OpenAPI description (2020 edition)."""
    loaded: dict[str, Any] = json.loads((shared_dir / "github/openapi/api.github.com.json").read_text())
    return loaded


@pytest.fixture()
def gh() -> Iterator[GitHubSandbox]:
    """A PR with a conversation comment, an inline comment, a review and a check run."""
    with GitHubSandbox(private_key_pem=KEY) as sandbox:
        installation = sandbox.create_installation("acme")
        sandbox.create_repo("acme/app", {"a.py": "x = 1\n", "pkg/b.py": "y = 1\n"}, installation)
        number = sandbox.open_pull_request("acme/app", "feature", {"a.py": "x = 2\n"})
        sandbox.comment("acme/app", number, "hello")
        sandbox.review_comment("acme/app", number, "a.py", 1, "inline")
        yield sandbox


def test_rest_responses_have_githubs_required_fields(gh: GitHubSandbox, spec: dict[str, Any]) -> None:
    client: Github = gh.client(next(iter(gh.state.installations)))
    repo = client.get_repo("acme/app")
    pr = repo.get_pull(1)
    review = pr.create_review(body="looks good", event="COMMENT")
    run = repo.create_check_run(name="Spark", head_sha=pr.head.sha)
    commit = repo.get_git_commit(pr.head.sha)
    contents = repo.get_contents("a.py", ref=pr.head.sha)
    assert not isinstance(contents, list)
    integration = gh.integration()
    installation = next(iter(gh.state.installations))
    token = integration.requester.requestJsonAndCheck(
        "POST", f"/app/installations/{installation}/access_tokens"
    )
    responses: list[tuple[str, str, str, Any]] = [
        (R, "get", "200", repo.raw_data),
        (R + "/pulls/{pull_number}", "get", "200", pr.raw_data),
        (
            R + "/pulls/{pull_number}/files",
            "get",
            "200",
            [f.raw_data for f in pr.get_files()],
        ),
        (
            R + "/issues/{issue_number}/comments",
            "get",
            "200",
            [c.raw_data for c in pr.get_issue_comments()],
        ),
        (
            R + "/pulls/{pull_number}/comments",
            "get",
            "200",
            # As listed: a listed comment's raw_data would fetch the comment alone, which Spark never does.
            client.requester.requestJsonAndCheck("GET", "/repos/acme/app/pulls/1/comments")[1],
        ),
        (R + "/pulls/{pull_number}/reviews", "post", "200", review.raw_data),
        (R + "/check-runs", "post", "201", run.raw_data),
        (R + "/git/commits/{commit_sha}", "get", "200", commit.raw_data),
        (
            R + "/git/trees/{tree_sha}",
            "get",
            "200",
            repo.get_git_tree(commit.tree.sha).raw_data,
        ),
        (R + "/git/ref/{ref}", "get", "200", repo.get_git_ref("heads/feature").raw_data),
        (R + "/commits/{ref}", "get", "200", repo.get_commit(pr.head.sha).raw_data),
        (
            R + "/compare/{base}...{head}",
            "get",
            "200",
            repo.compare("main", "feature").raw_data,
        ),
        (R + "/contents/{path}", "get", "200", contents.raw_data),
        ("/app", "get", "200", integration.get_app().raw_data),
        (
            R + "/installation",
            "get",
            "200",
            integration.get_repo_installation("acme", "app").raw_data,
        ),
        ("/app/installations/{installation_id}/access_tokens", "post", "201", token),
    ]
    for path, method, status, data in responses:
        schema = response_schema(spec, path, method, status)
        schema = (schema.get("oneOf") or schema.get("anyOf") or [schema])[-1]
        assert missing_required(data, schema, spec) == [], f"{method.upper()} {path}"
