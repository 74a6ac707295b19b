"""The conversation on a pull request, end to end: follow-up fixes that steer the last one, carried words of a
superseded fix, ``/spark undo`` and ``/spark describe``, with their permission rules and exactly-once."""

from __future__ import annotations

import redis

from bot import keys
from bot.core.session import MAX_ENTRIES
from sandbox.stack import collect_outcome, wait_for_jobs
from tests.e2e.conftest import StartStack
from tests.e2e.test_fix_flow import (
    BUG,
    FIX_ANSWER,
    FIX_SCRIPT,
    FIXED,
    LONG_ANSWER,
    PATH,
    SLOW,
    _streaming,
    answer,
    bot_comments,
    comment,
    head_file,
    run_all,
    story,
    user_comment_ids,
    wait_until,
)
from workers import session as sessions

RENAMED = "    return sum(values) / max(len(values), 1)\n"
FOLLOW_UP = {"name": "follow-up", "path": PATH, "command": "fix", "reply": answer(FIXED, RENAMED)}


def session_of(url: str) -> list[dict[str, object]]:
    """Return the entries of the one pull request's session the stack's Redis holds."""
    conn = redis.Redis.from_url(url)
    try:
        [key] = [k.decode() for k in conn.scan_iter(match=keys.SESSION.glob)]
        pr_key = key.removeprefix(keys.SESSION.prefix)
        return [e.as_dict() for e in sessions.load(conn, pr_key).entries]
    finally:
        conn.close()


def test_a_follow_up_fix_is_shown_the_last_fix(start: StartStack, e2e_redis_url: str) -> None:
    events = [
        comment("/spark fix average divides by the wrong count"),
        comment("/spark fix no, never divide by zero"),
    ]
    stack = start(story(events, [FIX_SCRIPT, FOLLOW_UP]))
    outcome = run_all(stack)
    first, second = outcome["new_commits"]
    assert RENAMED in head_file(stack)
    assert stack.model is not None
    first_prompt, follow_prompt = (str(r.messages) for r in stack.model.requests)
    assert "Earlier on this pull request" not in first_prompt
    # The follow-up's prompt holds the first fix: its words, its diff and its commit.
    assert "Earlier on this pull request" in follow_prompt
    assert "average divides by the wrong count" in follow_prompt
    assert "+    return sum(values) / len(values)" in follow_prompt
    assert first["sha"][:7] in follow_prompt
    entries = session_of(e2e_redis_url)
    assert [(e["command"], e["outcome"]) for e in entries] == [("fix", "committed"), ("fix", "committed")]
    assert entries[0]["sha"] == first["sha"] and entries[1]["sha"] == second["sha"]
    assert entries[0]["files"] == [PATH]


def test_a_follow_up_sent_while_the_fix_runs_supersedes_it_and_carries_its_words(start: StartStack) -> None:
    replies = [
        {"name": "slow", "path": PATH, "command": "fix", "reply": LONG_ANSWER},
        {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER},
    ]
    events = [
        comment("/spark fix average divides by the wrong count"),
        comment("/spark fix and keep the docstring as it is"),
    ]
    stack = start(story(events, replies, speed=SLOW))
    first_event, second_event = stack.scenario.events
    stack.scene.act(first_event)
    wait_until(_streaming(stack, 1))
    stack.scene.act(second_event)
    wait_for_jobs(stack, timeout=60)
    assert stack.model is not None
    _, second = stack.model.requests
    prompt = str(second.messages)
    # The superseded request's words are in the newer fix's prompt, quoted as what it replaced.
    assert "average divides by the wrong count" in prompt and "replaced" in prompt
    [commit] = collect_outcome(stack)["new_commits"]
    assert FIXED in head_file(stack) and BUG not in head_file(stack)
    assert f"issuecomment-{user_comment_ids(stack)[1]}" in commit["message"]


def test_the_session_keeps_its_bound_and_expires(start: StartStack, e2e_redis_url: str) -> None:
    many = MAX_ENTRIES + 2
    events = [comment(f"/spark fix step {n}") for n in range(many)]
    replies = [{"name": "nothing", "path": PATH, "command": "fix", "reply": "NO_CHANGES", "repeat": True}]
    stack = start(story(events, replies))
    run_all(stack)
    entries = session_of(e2e_redis_url)
    assert len(entries) == MAX_ENTRIES
    assert entries[-1]["text"] == f"step {many - 1}" and entries[0]["text"] == f"step {many - MAX_ENTRIES}"
    assert {e["outcome"] for e in entries} == {"failed"}
    conn = redis.Redis.from_url(e2e_redis_url)
    [key] = list(conn.scan_iter(match=keys.SESSION.glob))
    assert 0 < int(conn.ttl(key)) <= keys.SESSION.seconds
    conn.close()
    assert len(bot_comments(collect_outcome(stack))) == many
