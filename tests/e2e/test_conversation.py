"""The conversation on a pull request, end to end: follow-up fixes that steer the last one, carried words of a
superseded fix, ``/spark undo`` and ``/spark describe`` from the webhook, their re-runs, the session's bound.

The flows' own rules (a moved head, who may describe, undoing applied suggestions) are checked in process in
tests/flows/test_conversation.py."""

from __future__ import annotations

import time
from typing import Any

import redis
from rq import Queue
from rq.job import Job

from bot import keys
from bot.core.session import MAX_ENTRIES
from sandbox.stack import Stack, collect_outcome, fire, wait_for_jobs
from tests.e2e.conftest import StartStack
from tests.stories import (
    AUTHOR_BODY,
    BUG,
    FIX_ANSWER,
    FIX_SCRIPT,
    FIXED,
    HEAD,
    PATH,
    SUMMARY_1,
    answer,
    bot_comments,
    comment,
    describe_script,
    described,
    head_file,
    run_all,
    user_comment_ids,
    wait_until,
)
from tests.stories import LONG_FIX_ANSWER as LONG_ANSWER
from tests.stories import SLOW_FIX as SLOW
from tests.stories import fix_story as story
from tests.stories import streaming as _streaming
from workers.memory import session as sessions

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


def test_a_fix_after_an_answer_is_shown_the_answer(start: StartStack, e2e_redis_url: str) -> None:
    ask_answer = "It divides by one value too few.\n\n/spark fix average divides by the wrong count\n"
    events = [
        comment("/spark ask why is the mean too large?", by="bob"),
        comment("/spark fix do what you said"),
    ]
    # The ask's rules mention `/spark fix`: its script comes first, so the fix's does not answer it.
    scripts = [{"name": "ask", "command": "ask", "reply": ask_answer}, FIX_SCRIPT]
    stack = start(story(events, scripts, collaborators={"alice": "write", "bob": "read"}))
    run_all(stack)
    assert stack.model is not None
    prompt = str(stack.model.requests[-1].messages)
    assert "bob asked Spark (`/spark ask`)" in prompt and "why is the mean too large?" in prompt
    assert "It divides by one value too few." in prompt
    assert [(e["command"], e["outcome"]) for e in session_of(e2e_redis_url)] == [
        ("ask", "answered"),
        ("fix", "committed"),
    ]


# --- /spark undo -----------------------------------------------------------------------------------------

UNDO_FIX = [comment("/spark fix average divides by the wrong count"), comment("/spark undo")]


def rerun(stack: Stack, job: dict[str, Any]) -> str:
    """Run a finished job again with the same arguments (as when its worker died), and return its result."""
    done = Job.fetch(job["id"], connection=stack.redis)
    again = Queue(done.origin, connection=stack.redis).enqueue(done.func_name, kwargs=done.kwargs)
    deadline = time.monotonic() + 30
    while again.get_status(refresh=True) not in ("finished", "failed"):
        assert time.monotonic() < deadline, "the re-run did not end"
        time.sleep(0.01)
    assert again.get_status() == "finished"
    return str(again.return_value())


def test_undo_reverts_spark_s_last_fix_once(start: StartStack, e2e_redis_url: str) -> None:
    stack = start(story(UNDO_FIX, [FIX_SCRIPT]))
    fix_step = fire(stack, stack.scenario.events[0])
    undo_step = fire(stack, stack.scenario.events[1])
    outcome = collect_outcome(stack)
    fix_commit, undo_commit = outcome["new_commits"]
    assert undo_commit["verified"] and undo_commit["author"] == stack.github.bot_login
    assert head_file(stack) == HEAD  # the files are as they were before the fix
    assert f"Spark-Reverts: {fix_commit['sha']}" in undo_commit["message"]
    [_, undo_id] = user_comment_ids(stack)
    assert f"issuecomment-{undo_id}" in undo_commit["message"]
    _, reply = bot_comments(outcome)
    assert reply.startswith(f"Undid my commit {fix_commit['sha'][:7]} (average divides by the wrong count)")
    assert undo_commit["sha"] in reply
    entries = session_of(e2e_redis_url)
    assert [(e["command"], e["outcome"]) for e in entries] == [("fix", "undone"), ("undo", "committed")]
    # The review of the undo's push is skipped like a fix's (Spark's own commit): no model call for it.
    assert stack.model is not None and len(stack.model.requests) == 1
    # A re-run of either job (its worker died after finishing) neither commits nor posts again.
    [undo_job] = [j for j in undo_step.jobs if j["func"] == "workers.jobs.command"] or undo_step.jobs[:1]
    assert rerun(stack, undo_job) == "already done"
    [fix_job] = fix_step.jobs[:1]
    assert rerun(stack, fix_job) == "already done"
    again = collect_outcome(stack)
    assert len(again["new_commits"]) == 2 and bot_comments(again) == bot_comments(outcome)


def test_undo_needs_the_permission_fix_needs(start: StartStack) -> None:
    events = [UNDO_FIX[0], comment("/spark undo", by="bob"), comment("/spark help", by="bob")]
    stack = start(story(events, [FIX_SCRIPT], collaborators={"alice": "write", "bob": "read"}))
    outcome = run_all(stack)
    assert len(outcome["new_commits"]) == 1 and FIXED in head_file(stack)
    _, reply, help_reply = bot_comments(outcome)
    assert reply.startswith("Sorry @bob, `/spark undo` needs write permission") and "you have read" in reply
    # /spark help lists the conversation's commands.
    assert "- `/spark undo`: revert Spark's last commit on the branch" in help_reply
    assert "- `/spark describe`: write or update a summary" in help_reply


def test_a_fix_after_an_undo_is_shown_both(start: StartStack) -> None:
    events = [*UNDO_FIX, comment("/spark fix the average, but keep the old divisor for one value")]
    stack = start(story(events, [FIX_SCRIPT, {**FIX_SCRIPT, "name": "again"}]))
    run_all(stack)
    assert stack.model is not None
    prompt = str(stack.model.requests[-1].messages)
    assert "later undone" in prompt and "undid that fix with `/spark undo`" in prompt


# --- /spark describe -------------------------------------------------------------------------------------

SUMMARY_2 = "Adds an `average` helper (second run).\n\n**Changes**\n- `src/calc.py`: `average`."


def pr_body(stack: Stack) -> str:
    return str(stack.github.pull("acme/calculator", 1)["body"] or "")


def test_describe_writes_a_marked_summary_and_a_second_run_replaces_only_it(start: StartStack) -> None:
    events = [comment("/spark describe"), comment("/spark describe")]
    scripts = [describe_script(name, text) for name, text in [("1", SUMMARY_1), ("re-run", SUMMARY_2)]]
    scripts.append(describe_script("2", SUMMARY_2))
    stack = start(described(events, scripts, collaborators={"alice": "read", "maya": "maintain"}))
    first = fire(stack, stack.scenario.events[0])
    body = pr_body(stack)
    # The author's text, byte for byte, then Spark's section between its hidden markers.
    assert body.startswith(AUTHOR_BODY)
    section = body[len(AUTHOR_BODY) :]
    assert section.startswith("\n<!-- spark:describe=start -->") and section.endswith(
        "<!-- spark:describe=end -->"
    )
    assert SUMMARY_1 in section
    # A re-run of the job (its worker died after finishing) replaces the section and edits its one reply.
    assert rerun(stack, first.jobs[0]) == "described"
    rerun_body = pr_body(stack)
    assert rerun_body.startswith(AUTHOR_BODY) and rerun_body.count("<!-- spark:describe=start -->") == 1
    assert SUMMARY_2 in rerun_body and len(bot_comments(collect_outcome(stack))) == 1
    assert stack.model is not None
    prompt = str(stack.model.requests[0].messages)
    assert "average(values)" in prompt and "+    return sum(values) / (len(values) - 1)" in prompt
    fire(stack, stack.scenario.events[1])
    body = pr_body(stack)
    assert body.startswith(AUTHOR_BODY) and SUMMARY_2 in body and SUMMARY_1 not in body
    assert body.count("<!-- spark:describe=start -->") == 1
    # The model is shown the author's words only, never Spark's earlier summary.
    assert "new `average`" not in str(stack.model.requests[-1].messages)
    replies = bot_comments(collect_outcome(stack))
    assert len(replies) == 2 and all(r.startswith("Updated the summary") for r in replies)


def test_describe_on_open_only_where_the_repository_asks_for_it(start: StartStack) -> None:
    review = {"name": "review", "path": PATH, "reply": "NO_FINDINGS", "repeat": True}
    on = start(
        described(
            [{"open": {}}],
            [describe_script("open", SUMMARY_1), review],
            config="describe:\n  on_open: true\n",
        )
    )
    run_all(on)
    assert pr_body(on).startswith(AUTHOR_BODY) and SUMMARY_1 in pr_body(on)
    off = start(described([{"open": {}}], [review]))
    run_all(off)
    assert pr_body(off) == AUTHOR_BODY
    assert off.model is not None and all(r.script == "review" for r in off.model.requests)
