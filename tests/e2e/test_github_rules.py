"""GitHub's rules met end to end: refused pushes, rate limits, lost answers and body limits (issue 16).

Each test runs the real worker against the local GitHub set as strict as GitHub, and checks what a user sees.
"""

from __future__ import annotations

from typing import Any

import yaml

from tests.e2e.conftest import StartStack
from tests.e2e.test_fix_flow import (
    BUG,
    FIX,
    FIX_SCRIPT,
    FIXED,
    HEAD,
    bot_comments,
    head_file,
    reactions_by_app,
    run_all,
    story,
    user_comment_ids,
)


def with_github(document: str, **github: Any) -> str:
    """Return the story with a ``github`` section (branch rules, faults) added."""
    data = yaml.safe_load(document)
    data["github"] = github
    return yaml.safe_dump(data, sort_keys=False)


def graphql_posts(stack: Any) -> int:
    """Return how many GraphQL requests the worker sent."""
    return sum(1 for r in stack.github.request_log if r.method == "POST" and r.path == "/graphql")


# --- bug 3: createCommitOnBranch refusals keep their meaning ------------------------------------------------


def test_a_protected_branch_gets_suggestions_and_a_reply_naming_the_rule(start: StartStack) -> None:
    rules = [{"branch": "average", "required_status_checks": ["build"]}]
    stack = start(with_github(story(FIX, [FIX_SCRIPT]), branch_rules=rules))
    outcome = run_all(stack)
    assert outcome["new_commits"] == [] and head_file(stack) == HEAD
    # Refused once, never retried: a rule answers the same every time.
    assert graphql_posts(stack) == 1
    [review] = outcome["reviews"]
    [suggestion] = review["comments"]
    assert "```suggestion" in suggestion["body"] and FIXED.strip() in suggestion["body"]
    assert HEAD.splitlines()[suggestion["line"] - 1] == BUG.rstrip("\n")
    assert "branch protection" in review["body"] and 'Required status check "build"' in review["body"]
    [reply] = bot_comments(outcome)
    assert "branch protection refused the commit" in reply
    assert 'Required status check "build" is expected.' in reply
    assert "GitHub refused a call" not in reply
    [comment_id] = user_comment_ids(stack)
    assert reactions_by_app(stack, comment_id) == ["eyes", "rocket"]


def test_a_ruleset_refusal_names_each_broken_rule(start: StartStack) -> None:
    rules = [
        {
            "branch": "average",
            "source": "ruleset",
            "require_pull_request": True,
            "allowed_pushers": ["alice"],
        }
    ]
    stack = start(with_github(story(FIX, [FIX_SCRIPT]), branch_rules=rules))
    outcome = run_all(stack)
    assert outcome["new_commits"] == [] and graphql_posts(stack) == 1
    [reply] = bot_comments(outcome)
    assert "ruleset refused the commit" in reply
    assert "Cannot update this protected ref." in reply
    assert "Changes must be made through a pull request." in reply
    assert len(outcome["reviews"]) == 1
