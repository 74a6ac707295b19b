"""GitHub's GraphQL calls Spark makes: the signed commit push (``createCommitOnBranch``) and review threads.

Each function takes the installation's ``graphql`` call (``Transport.graphql``: limits, error mapping,
metrics) and turns GitHub's typed ``errors`` into the port's values: a moved branch, a refused push, or a
``GitHubError`` with the HTTP status the error type stands for.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any

from bot.adapters.github_port import BranchMoved, Committed, GitHubError, PushRefused, ReviewThread
from bot.core.render import outbound

Graphql = Callable[[str, dict[str, Any]], dict[str, Any]]


def commit_on_branch(
    graphql: Graphql,
    repo: str,
    branch: str,
    *,
    expected_head: str,
    headline: str,
    body: str = "",
    additions: dict[str, bytes] | None = None,
    deletions: Sequence[str] = (),
) -> Committed | BranchMoved | PushRefused:
    """Commit file changes with ``createCommitOnBranch`` (GitHub signs it) unless the branch moved.

    GitHub answers a refused mutation with HTTP 200 and typed ``errors``: a moved branch is
    ``BranchMoved``, a protection rule, ruleset or missing permission is ``PushRefused``; anything else
    raises ``GitHubError`` with the status the type stands for (only a 5xx-like one is worth retrying).
    """
    changes: dict[str, Any] = {
        "additions": [
            {"path": path, "contents": base64.b64encode(data).decode()}
            for path, data in (additions or {}).items()
        ],
        "deletions": [{"path": path} for path in deletions],
    }
    message: dict[str, str] = {"headline": outbound(headline)}
    if body:
        message["body"] = outbound(body)
    variables = {
        "input": {
            "branch": {"repositoryNameWithOwner": repo, "branchName": branch},
            "message": message,
            "fileChanges": changes,
            "expectedHeadOid": expected_head,
        }
    }
    result = graphql(_COMMIT_MUTATION, variables)
    errors = result.get("errors") or []
    if errors:
        text = "; ".join(str(e.get("message", e)) for e in errors)
        if any(_is_stale(e) for e in errors):
            return BranchMoved(expected_head=expected_head, message=text)
        refused = _push_refusal(errors)
        if refused is not None:
            return refused
        raise GitHubError(_graphql_status(errors), f"createCommitOnBranch failed: {text}")
    commit = result["data"]["createCommitOnBranch"]["commit"]
    return Committed(oid=str(commit["oid"]), url=str(commit.get("url") or ""))


def review_threads(graphql: Graphql, repo: str, number: int) -> list[ReviewThread]:
    """Return every review thread of the pull request with its first comment."""
    owner, name = repo.split("/", 1)
    threads: list[ReviewThread] = []
    cursor: str | None = None
    while True:
        result = graphql(_THREADS_QUERY, {"owner": owner, "name": name, "number": number, "cursor": cursor})
        if result.get("errors"):
            raise GitHubError(0, "reviewThreads failed: " + str(result["errors"][0].get("message")))
        page = result["data"]["repository"]["pullRequest"]["reviewThreads"]
        threads.extend(_thread(node) for node in page["nodes"])
        if not page["pageInfo"]["hasNextPage"]:
            return threads
        cursor = page["pageInfo"]["endCursor"]


def resolve_thread(graphql: Graphql, thread_id: str) -> bool:
    """Resolve a review thread; return whether GitHub now reports it resolved."""
    result = graphql(_RESOLVE_MUTATION, {"id": thread_id})
    if result.get("errors"):
        raise GitHubError(0, "resolveReviewThread failed: " + str(result["errors"][0].get("message")))
    return bool(result["data"]["resolveReviewThread"]["thread"]["isResolved"])


_COMMIT_MUTATION = """
mutation($input: CreateCommitOnBranchInput!) {
  createCommitOnBranch(input: $input) { commit { oid url } }
}
"""

_THREADS_QUERY = """
query($owner: String!, $name: String!, $number: Int!, $cursor: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $cursor) {
        pageInfo { hasNextPage endCursor }
        nodes {
          id isResolved isOutdated path line startLine
          comments(first: 1) { nodes { databaseId body author { __typename login } } }
        }
      }
    }
  }
}
"""

_RESOLVE_MUTATION = """
mutation($id: ID!) { resolveReviewThread(input: {threadId: $id}) { thread { id isResolved } } }
"""


def _is_stale(error: dict[str, Any]) -> bool:
    # GitHub answers a moved branch with type STALE_DATA and "Expected branch to point to ...".
    return (
        error.get("type") == "STALE_DATA"
        or "expected branch to point to" in str(error.get("message")).lower()
    )


# GraphQL error types and the HTTP status each stands for; an untyped error is GitHub failing (retryable).
_GRAPHQL_STATUS = {
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "UNPROCESSABLE": 422,
    "BRANCH_PROTECTION_RULE_VIOLATION": 422,
    "STALE_DATA": 409,
    "RATE_LIMITED": 429,
    "SERVICE_UNAVAILABLE": 503,
    "INTERNAL": 502,
    "TIMEOUT": 504,
}


def _graphql_status(errors: Sequence[dict[str, Any]]) -> int:
    types = [str(e.get("type") or "") for e in errors]
    return max((_GRAPHQL_STATUS.get(t, 502) if t else 502) for t in types)


def _push_refusal(errors: Sequence[dict[str, Any]]) -> PushRefused | None:
    """Return the refusal a push's errors carry: a protection rule, a ruleset, or no permission."""
    for error in errors:
        kind, message = str(error.get("type") or ""), str(error.get("message") or "")
        # GitHub lists each broken rule on its own "- " line, as `git push` prints after GH013.
        rules = tuple(line[2:].strip() for line in message.splitlines() if line.startswith("- "))
        if kind == "BRANCH_PROTECTION_RULE_VIOLATION" or "protected branch" in message.lower():
            return PushRefused("branch protection", rules or (message.strip().split("\n", 1)[0],), message)
        if "rule violations" in message.lower():
            return PushRefused("ruleset", rules or (message.strip().split("\n", 1)[0],), message)
        if kind == "FORBIDDEN":
            return PushRefused("permissions", (message,), message)
    return None


def _thread(node: dict[str, Any]) -> ReviewThread:
    comments = (node.get("comments") or {}).get("nodes") or [{}]
    first = comments[0] if comments else {}
    return ReviewThread(
        id=str(node["id"]),
        is_resolved=bool(node.get("isResolved")),
        is_outdated=bool(node.get("isOutdated")),
        path=str(node.get("path") or ""),
        line=node.get("line"),
        start_line=node.get("startLine"),
        first_comment_id=first.get("databaseId"),
        first_comment_body=str(first.get("body") or ""),
        first_comment_author=_login(first.get("author") or {}),
    )


def _login(actor: dict[str, Any]) -> str:
    """Return an actor's login as REST spells it: GraphQL's bot ``x`` is REST's ``x[bot]``."""
    login = str(actor.get("login") or "")
    return f"{login}[bot]" if actor.get("__typename") == "Bot" and login else login
