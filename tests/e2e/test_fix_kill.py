"""A worker killed with SIGKILL in the middle of ``/spark fix``: a new worker recovers the job, and the user
sees exactly one commit and one reply.

The kill lands at three points: before the model call (as the target file is read), mid-stream, and after
the commit reached GitHub but before the reply. The local GitHub runs the kill from its request hooks, so
the point is exact, not a guess by timing.
"""

from __future__ import annotations

import threading

import pytest

from sandbox.stack import Stack, collect_outcome
from tests.e2e.conftest import StartStack
from tests.stories import (
    BUG,
    FIX,
    FIXED,
    HEAD,
    NO_REVIEW,
    PATH,
    REPO,
    bot_comments,
    head_file,
    kill_worker,
    reactions_by_app,
    recover,
    user_comment_ids,
    wait_until,
)
from tests.stories import KILL_REPLIES as REPLIES
from tests.stories import fix_story as story


def assert_exactly_once(stack: Stack) -> None:
    """One verified commit with the fix, one reply naming it, 👀 and 🚀 once each."""
    outcome = collect_outcome(stack)
    [commit] = outcome["new_commits"]
    assert commit["verified"] and head_file(stack) == HEAD.replace(BUG, FIXED)
    [reply] = bot_comments(outcome)
    assert "Pushed a fix" in reply and commit["sha"] in reply
    [comment_id] = user_comment_ids(stack)
    assert sorted(reactions_by_app(stack, comment_id)) == ["eyes", "rocket"]


@pytest.mark.parametrize(
    ("point", "method", "path"),
    [
        ("before the model call", "GET", rf"^/repos/{REPO}/contents/{PATH}$"),
        ("after the commit, before the reply", "POST", r"^/graphql$"),
    ],
)
def test_killed_at_a_github_call_recovers_exactly_once(
    start: StartStack, point: str, method: str, path: str
) -> None:
    stack = start(story(FIX, REPLIES, config=NO_REVIEW))
    killed = threading.Event()
    # The hook runs just before GitHub serves the request: the file read never returns to the worker,
    # while the commit mutation is still applied (its request had fully arrived).
    stack.github.github.faults.on_request(method, path, lambda: kill_worker(stack, killed))
    stack.scene.act(stack.scenario.events[0])
    recover(stack, killed)
    assert_exactly_once(stack)
    # Before the model call only the recovered run asks; after the commit only the killed one had asked
    # (the recovered run finds its commit on the branch and replies).
    assert stack.model is not None and len(stack.model.requests) == 1, point


def test_killed_mid_stream_recovers_exactly_once(start: StartStack) -> None:
    slow = {"ttft_ms": 50, "tokens_per_second": 200, "chunk_tokens": 2}
    stack = start(story(FIX, REPLIES, config=NO_REVIEW, speed=slow))
    killed = threading.Event()
    stack.scene.act(stack.scenario.events[0])
    assert stack.model is not None
    model = stack.model
    wait_until(lambda: bool(model.requests) and model.requests[0].chunks_sent > 2)
    kill_worker(stack, killed)
    recover(stack, killed)
    assert_exactly_once(stack)
    first, second = model.requests
    assert first.finished_at is not None and first.completion_tokens < second.completion_tokens


def test_killed_after_the_fork_review_before_the_reply_posts_one_review(start: StartStack) -> None:
    stack = start(
        story(
            FIX,
            REPLIES,
            config=NO_REVIEW,
            fork={"owner": "dana"},
            collaborators={"alice": "write", "dana": "read"},
        )
    )
    killed = threading.Event()
    stack.github.github.faults.on_request(
        "POST", rf"^/repos/{REPO}/pulls/1/reviews$", lambda: kill_worker(stack, killed)
    )
    stack.scene.act(stack.scenario.events[0])
    recover(stack, killed)
    outcome = collect_outcome(stack)
    assert outcome["new_commits"] == []
    [review] = outcome["reviews"]
    assert ["```suggestion" in c["body"] for c in review["comments"]] == [True]
    [reply] = bot_comments(outcome)
    assert "suggestions" in reply
    [comment_id] = user_comment_ids(stack)
    assert sorted(reactions_by_app(stack, comment_id)) == ["eyes", "rocket"]
    # The recovered run found the review by its marker instead of asking the model and posting again.
    assert stack.model is not None and len(stack.model.requests) == 1
