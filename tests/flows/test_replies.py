"""What a user reads in Spark's replies: timings that say what happened, counts with the right plural."""

from __future__ import annotations

from tests.flows.conftest import StartFlow


def test_a_fork_reply_times_the_suggestions_not_a_commit(flows: StartFlow) -> None:
    """fork-pr: the fork cannot be pushed to, so the fix arrives as a suggestion and nothing is committed."""
    flow = flows("fork-pr")
    flow.run_all()
    replies = [
        c["body"]
        for c in flow.github.issue_comments(flow.scene.repo, flow.scene.pr_number)
        if c["user"]["login"] == flow.github.bot_login
    ]
    assert replies, "the fix was answered"
    timing_lines = [line for reply in replies for line in reply.splitlines() if "total " in line]
    assert timing_lines
    assert all("commit " not in line for line in timing_lines), timing_lines
    assert any("suggestions " in line for line in timing_lines), timing_lines
    assert all("suggestion(s)" not in reply for reply in replies)
