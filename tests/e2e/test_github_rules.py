"""GitHub's rules met end to end: refused pushes, rate limits, lost answers and body limits (issue 16).

Each test runs the real worker against the local GitHub set as strict as GitHub, and checks what a user sees.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
import yaml

from bot import keys
from bot.settings import Settings
from sandbox.stack import Stack, start_stack
from tests.e2e.conftest import StartStack, scenario_from
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
    assert " commit " not in reply.rsplit("<sub>", 1)[-1]  # nothing was committed: no commit timing
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


# --- bug 7: bodies within GitHub's limits, nothing cut silently ----------------------------------------

DOC = '    """Return the sum of a and b."""\n'
# About 80,000 characters of new lines outside the pull request's diff: they can only travel as a patch.
LONG_NOTES = "".join(f"    # note {n:05d}: {'why the sum is computed this way; ' * 2}\n" for n in range(1000))


def test_a_patch_too_long_for_one_comment_continues_in_ordered_comments(start: StartStack) -> None:
    reply = f"src/calc.py\n<<<<<<< SEARCH\n{DOC}=======\n{DOC}{LONG_NOTES}>>>>>>> REPLACE\n"
    script = {"name": "long", "path": "src/calc.py", "command": "fix", "reply": reply}
    document = story(FIX, [script], fork={"owner": "dana"}, collaborators={"alice": "write", "dana": "read"})
    stack = start(document)
    outcome = run_all(stack)
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


WIDE_NAMES = {f"文档/说明-{n:04d}-{'长文件名' * 12}.md": f"第{n}页\n" for n in range(400)}


def test_a_check_run_summary_over_65535_bytes_is_cut_with_a_note_and_the_rest_in_its_text(
    start: StartStack,
) -> None:
    data = yaml.safe_load(story([{"open": {}}], []))
    data["repository"]["files"][".github/spark.yml"] = "review:\n  paths:\n    exclude: ['文档/**']\n"
    data["pull_request"]["files"] = dict(WIDE_NAMES)
    stack = start(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    outcome = run_all(stack)
    [run] = outcome["check_runs"]
    assert run["conclusion"] == "success"
    summary, text = run["output"]["summary"], run["output"]["text"]
    assert len(summary.encode()) <= 65_535 and len(text.encode()) <= 65_535
    assert "The summary was cut here" in summary
    # Every file of the coverage list is in the summary or its continuation.
    for name in WIDE_NAMES:
        assert name in summary + text


# --- bugs 5 and 6: rate limits defer the job; a lost answer never doubles a write --------------------------

COMMENTS = r"^/repos/acme/calculator/issues/1/comments$"


@pytest.fixture()
def start_quick(tmp_path: Path, e2e_redis_url: str) -> Iterator[StartStack]:
    """Like ``start``, with GitHub's "wait at least a minute" shortened to a second for the test."""
    stacks: list[Stack] = []

    def _start(source: str) -> Stack:
        conn = redis.Redis.from_url(e2e_redis_url)
        conn.flushdb()
        conn.close()
        env = {
            "REDIS_URL": e2e_redis_url,
            "SPARK_GITHUB_SECONDARY_WAIT_SECONDS": "1.0",
            "SPARK_GITHUB_MAX_INLINE_WAIT_SECONDS": "0.2",
            "SPARK_RUN_LOG": "100",  # the test counts the job's runs
        }
        base = Settings.load(env, env_file=None)
        data_dir = tmp_path / f"stack-{len(stacks)}"
        data_dir.mkdir()
        stack = start_stack(scenario_from(source), base, data_dir)
        stacks.append(stack)
        return stack

    yield _start
    for stack in reversed(stacks):
        stack.close()


def test_a_429_without_retry_after_defers_the_fix_which_then_replies_once(start_quick: StartStack) -> None:
    stack = start_quick(story(FIX, [FIX_SCRIPT]))
    stack.github.faults.inject(429, "POST", COMMENTS, body={"message": "Too many requests"})
    outcome = run_all(stack)
    [commit] = outcome["new_commits"]
    [reply] = bot_comments(outcome)
    assert "Pushed a fix" in reply or f"/commit/{commit['sha']}" in reply
    # The job was deferred once (not failed, not slept through) and ran again after the wait.
    ran = [orjson.loads(line) for line in stack.redis.lrange(keys.JOBS_RAN.pattern, 0, -1)]
    assert [r["job"] for r in ran].count("command") == 2
    refused = next(r for r in stack.github.request_log if r.status == 429)
    posted = next(
        r
        for r in stack.github.request_log
        if r.method == "POST" and r.status == 201 and re.search(COMMENTS, r.path)
    )
    assert posted.started - refused.started >= 1.0
    assert stack.model is not None and len(stack.model.requests) == 1  # the re-run did not ask again


def test_a_reply_whose_answer_was_lost_is_posted_once(start: StartStack) -> None:
    stack = start(story(FIX, [FIX_SCRIPT]))
    stack.github.faults.lose_answer("POST", COMMENTS)
    outcome = run_all(stack)
    assert len(outcome["new_commits"]) == 1
    [reply] = bot_comments(outcome)
    assert "Pushed a fix" in reply or "/commit/" in reply


def test_a_fix_sends_its_writes_one_at_a_time(start: StartStack) -> None:
    """GitHub asks for content-creating requests one at a time: the thread pool must not overlap them."""
    stack = start(with_github(story(FIX, [FIX_SCRIPT]), latency_ms=40))
    outcome = run_all(stack)
    assert len(outcome["new_commits"]) == 1
    writes = sorted(
        (r.started, r.started + r.duration)
        for r in stack.github.request_log
        if r.method in ("POST", "PATCH") and "/access_tokens" not in r.path and r.path != "/graphql"
    )
    assert len(writes) >= 3  # 👀, the reply, 🚀
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(writes))
