"""GitHub's rules met by the flows in process: refused pushes, lost answers, body limits (issue 16).

Each test runs ``run_fix`` or ``run_review`` against the local GitHub set as strict as GitHub, and checks what
a user sees; tests/e2e/test_github_rules.py keeps the rate limit that defers a job to a later run.
"""

from __future__ import annotations

import itertools
from typing import Any

import yaml

from tests.flows.conftest import StartFlow
from tests.stories import (
    BUG,
    FIX,
    FIX_SCRIPT,
    FIXED,
    HEAD,
    bot_comments,
    head_file,
    reactions_by_app,
    user_comment_ids,
)
from tests.stories import fix_story as story


def with_github(document: str, **github: Any) -> str:
    """Return the story with a ``github`` section (branch rules, faults) added."""
    data = yaml.safe_load(document)
    data["github"] = github
    return yaml.safe_dump(data, sort_keys=False)


def graphql_posts(flow: Any) -> int:
    """Return how many GraphQL requests the flow sent."""
    return sum(1 for r in flow.github.request_log if r.method == "POST" and r.path == "/graphql")


DOC = '    """Return the sum of a and b."""\n'
# About 80,000 characters of new lines outside the pull request's diff: they can only travel as a patch.
LONG_NOTES = "".join(f"    # note {n:05d}: {'why the sum is computed this way; ' * 2}\n" for n in range(1000))
WIDE_NAMES = {f"文档/说明-{n:04d}-{'长文件名' * 12}.md": f"第{n}页\n" for n in range(400)}
COMMENTS = r"^/repos/acme/calculator/issues/1/comments$"


def test_a_protected_branch_gets_suggestions_and_a_reply_naming_the_rule(flows: StartFlow) -> None:
    rules = [{"branch": "average", "required_status_checks": ["build"]}]
    flow = flows(with_github(story(FIX, [FIX_SCRIPT]), branch_rules=rules))
    outcome = flow.run_all()
    assert outcome["new_commits"] == [] and head_file(flow) == HEAD
    # Refused once, never retried: a rule answers the same every time.
    assert graphql_posts(flow) == 1
    [review] = outcome["reviews"]
    [suggestion] = review["comments"]
    assert "```suggestion" in suggestion["body"] and FIXED.strip() in suggestion["body"]
    assert HEAD.splitlines()[suggestion["line"] - 1] == BUG.rstrip("\n")
    assert "branch protection" in review["body"] and 'Required status check "build"' in review["body"]
    [reply] = bot_comments(outcome)
    assert "branch protection refused the commit" in reply
    assert 'Required status check "build" is expected.' in reply
    assert "GitHub refused a call" not in reply
    assert " commit " not in reply.rsplit("<sub>", 1)[-1]  # nothing was committed: no commit timing
    [comment_id] = user_comment_ids(flow)
    assert reactions_by_app(flow, comment_id) == ["eyes", "rocket"]


def test_a_ruleset_refusal_names_each_broken_rule(flows: StartFlow) -> None:
    rules = [
        {
            "branch": "average",
            "source": "ruleset",
            "require_pull_request": True,
            "allowed_pushers": ["alice"],
        }
    ]
    flow = flows(with_github(story(FIX, [FIX_SCRIPT]), branch_rules=rules))
    outcome = flow.run_all()
    assert outcome["new_commits"] == [] and graphql_posts(flow) == 1
    [reply] = bot_comments(outcome)
    assert "ruleset refused the commit" in reply
    assert "Cannot update this protected ref." in reply
    assert "Changes must be made through a pull request." in reply
    assert len(outcome["reviews"]) == 1


def test_a_patch_too_long_for_one_comment_continues_in_ordered_comments(flows: StartFlow) -> None:
    reply = f"src/calc.py\n<<<<<<< SEARCH\n{DOC}=======\n{DOC}{LONG_NOTES}>>>>>>> REPLACE\n"
    script = {"name": "long", "path": "src/calc.py", "command": "fix", "reply": reply}
    document = story(FIX, [script], fork={"owner": "dana"}, collaborators={"alice": "write", "dana": "read"})
    # An answer of about 21,800 tokens: the room for it is asked for (the limit counts every token).
    flow = flows(document, SPARK_MAX_COMPLETION_TOKENS="24576", SPARK_CONTEXT_TOKENS="32768")
    outcome = flow.run_all()
    assert outcome["new_commits"] == []
    first, *parts = bot_comments(outcome)
    assert "did not commit the fix" in first and "did not fit in this comment" in first
    assert parts and all(p.startswith("Patch of the suggested fix, continued") for p in parts)
    assert all(len(body) <= 65_536 for body in [first, *parts])
    # The reply and its continuations, in order, carry every added line of the patch.
    added = [
        line for body in [first, *parts] for line in body.splitlines() if line.startswith("+    # note ")
    ]
    assert len(added) == 1000 and added == sorted(added)


def test_a_check_run_summary_over_65535_bytes_is_cut_with_a_note_and_the_rest_in_its_text(
    flows: StartFlow,
) -> None:
    data = yaml.safe_load(story([{"open": {}}], []))
    data["repository"]["files"][".github/spark.yml"] = "review:\n  paths:\n    exclude: ['文档/**']\n"
    data["pull_request"]["files"] = dict(WIDE_NAMES)
    flow = flows(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    outcome = flow.run_all()
    [run] = outcome["check_runs"]
    assert run["conclusion"] == "success"
    summary, text = run["output"]["summary"], run["output"]["text"]
    assert len(summary.encode()) <= 65_535 and len(text.encode()) <= 65_535
    assert "The summary was cut here" in summary
    # Every file of the coverage list is in the summary or its continuation.
    for name in WIDE_NAMES:
        assert name in summary + text


def test_a_reply_whose_answer_was_lost_is_posted_once(flows: StartFlow) -> None:
    flow = flows(story(FIX, [FIX_SCRIPT]))
    flow.github.faults.lose_answer("POST", COMMENTS)
    outcome = flow.run_all()
    assert len(outcome["new_commits"]) == 1
    [reply] = bot_comments(outcome)
    assert "Pushed a fix" in reply or "/commit/" in reply


def test_a_fix_sends_its_writes_one_at_a_time(flows: StartFlow) -> None:
    """GitHub asks for content-creating requests one at a time: the thread pool must not overlap them."""
    flow = flows(with_github(story(FIX, [FIX_SCRIPT]), latency_ms=40))
    outcome = flow.run_all()
    assert len(outcome["new_commits"]) == 1
    writes = sorted(
        (r.started, r.started + r.duration)
        for r in flow.github.request_log
        if r.method in ("POST", "PATCH") and "/access_tokens" not in r.path and r.path != "/graphql"
    )
    assert len(writes) >= 3  # 👀, the reply, 🚀
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(writes))
