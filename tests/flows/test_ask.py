"""``run_ask`` in process: an answer is posted once whatever re-runs it, and the hour's budgets hold.

Which comment queues which job, and the thread rules through the webhooks, are tests/e2e/test_ask.py's.
"""

from __future__ import annotations

import json
from typing import Any

from bot import keys
from bot.refs import CommandRef
from tests.flows.conftest import Flow, StartFlow
from workers.commands.ask import run_ask
from workers.memory import last_seen

PATH = "src/calc.py"
HEAD = "def average(values):\n    return sum(values) / (len(values) - 1)\n"
ANSWER = f"It divides by one too few:\n\n```quote {PATH}\n    return sum(values) / (len(values) - 1)\n```\n"


def story(config: str = "") -> dict[str, Any]:
    """Return a scenario: one open pull request, the model answering every question."""
    files = {PATH: "def add(a, b):\n    return a + b\n"}
    if config:
        files[".github/spark.yml"] = config
    return {
        "name": "ask-flow",
        "repository": {"owner": "acme", "name": "calculator", "files": files},
        "pull_request": {"title": "Average", "author": "alice", "head_branch": "avg", "files": {PATH: HEAD}},
        "collaborators": {"alice": "write"},
        "events": [{"wait": 0}],
        "model": {"replies": [{"name": "ask", "command": "ask", "reply": ANSWER, "repeat": True}]},
    }


def ask(flow: Flow, command: CommandRef) -> str:
    """Run the ask job's flow for ``command`` as the worker does (never superseding another question)."""
    return flow._ran(run_ask(flow.context("ask", claim=False), command))


def app_comments(flow: Flow) -> list[dict[str, Any]]:
    """Return the App's conversation comments."""
    comments = flow.github.issue_comments(flow.repo, flow.number)
    return [c for c in comments if c["user"]["login"] == flow.github.bot_login]


def test_a_re_run_never_posts_the_answer_twice(flows: StartFlow) -> None:
    flow = flows(story())
    command = flow.comment("/spark ask why minus one?", by="dave")
    assert ask(flow, command) == "answered"
    [answer] = app_comments(flow)
    recorded = flow.redis.get(keys.ASK_ANSWERED.format(command.comment_id))
    assert recorded is not None and int(recorded) == answer["id"]
    # An RQ retry or a redelivered job: the recorded answer stops it before anything is posted or asked.
    asked = len(flow.model.requests)
    assert ask(flow, command) == "already answered"
    assert len(flow.model.requests) == asked and len(app_comments(flow)) == 1
    # The worker died after posting, before recording: the re-run finds its marked reply and edits it.
    flow.redis.delete(keys.ASK_ANSWERED.format(command.comment_id))
    assert ask(flow, command) == "answered"
    assert [c["id"] for c in app_comments(flow)] == [answer["id"]]


def test_budgets_per_user_and_per_pull_request_with_one_polite_reply_each(flows: StartFlow) -> None:
    flow = flows(story("ask:\n  user_budget: 2\n  pr_budget: 3\n"))
    dave = [ask(flow, flow.comment(f"/spark ask question {n}", by="dave")) for n in range(4)]
    assert dave == ["answered", "answered", "over budget", "over budget"]
    assert [c["body"].startswith("Sorry @dave") for c in app_comments(flow)] == [False, False, True]
    assert "`ask.user_budget`" in app_comments(flow)[-1]["body"]
    carol = [ask(flow, flow.comment(f"/spark ask other {n}", by="carol")) for n in range(3)]
    assert carol == ["answered", "over budget", "over budget"]
    polite = [c["body"] for c in app_comments(flow) if c["body"].startswith("Sorry @carol")]
    assert len(polite) == 1 and "`ask.pr_budget`" in polite[0]
    # A re-run of a counted question counts once: still within the hour's budget.
    first = flow.comment("/spark ask again", by="erin")
    flow.redis.delete(keys.ASK_BUDGET_PR.format(flow.ref().key))
    assert ask(flow, first) == "answered"
    flow.redis.delete(keys.ASK_ANSWERED.format(first.comment_id))
    assert ask(flow, first) == "answered"
    user = keys.ASK_BUDGET_USER.format(flow.ref().installation_id, "erin")
    assert flow.redis.hlen(user) == 1 and 0 < int(flow.redis.ttl(user)) <= 3600


def test_a_question_on_a_head_spark_has_seen_reads_files_and_config_beside_the_pull_request(
    flows: StartFlow,
) -> None:
    story_ = story("ask:\n  user_budget: 10\n")
    story_["github"] = {"latency_ms": 100}  # rounds far apart, so overlap in the log means one round
    flow = flows(story_)
    assert ask(flow, flow.comment("/spark ask why minus one?", by="dave")) == "answered"
    seen = last_seen.recall(flow.redis, flow.ref().key)
    assert seen is not None and seen.head_sha == flow.head() and seen.paths == (PATH,)
    mark = len(flow.github.request_log)
    assert ask(flow, flow.comment("/spark ask and for one value?", by="dave")) == "answered"
    log = flow.github.request_log[mark:]
    # The pull request and its diff (one path, two media types).
    pulls = [r for r in log if r.method == "GET" and r.path.endswith("/pulls/1")]
    first_back = min(r.started + r.duration for r in pulls)
    reads = [r for r in log if "/contents/" in r.path]
    # Once each: the file at the head and the config at the base, both sent before the pull request came back.
    assert sorted(r.path.split("/contents/")[1].split("?")[0] for r in reads) == [".github/spark.yml", PATH]
    assert len(pulls) == 2 and all(r.started < first_back for r in reads)


def test_a_stale_guess_is_dropped_and_the_answer_shows_the_head(flows: StartFlow) -> None:
    flow = flows(story())
    branch = flow.github.pull(flow.repo, flow.number)["head"]["ref"]
    old = flow.github.push(flow.repo, branch, {PATH: "STALE_MARKER = 1\n"})
    flow.github.push(flow.repo, branch, {PATH: HEAD})
    # Spark last saw the older commit (and a base the pull request no longer has).
    key = flow.ref().key
    flow.redis.set(
        keys.LAST_SEEN.format(key),
        json.dumps({"head": old, "base_repo": flow.repo, "base_ref": "gone", "paths": [PATH]}),
        ex=60,
    )
    assert ask(flow, flow.comment("/spark ask why minus one?", by="dave")) == "answered"
    prompt = "\n".join(m["content"] for m in flow.model.requests[-1].messages)
    assert "STALE_MARKER" not in prompt and "return sum(values) / (len(values) - 1)" in prompt
    [answer] = app_comments(flow)
    assert f"/blob/{flow.head()}/{PATH}#L2" in answer["body"]
    seen = last_seen.recall(flow.redis, key)
    assert seen is not None and seen.head_sha == flow.head() and seen.base_ref == "main"


def test_a_follow_up_question_is_shown_the_earlier_question_and_answer(flows: StartFlow) -> None:
    flow = flows(story())
    assert ask(flow, flow.comment("/spark ask why minus one?", by="dave")) == "answered"
    first = "\n".join(m["content"] for m in flow.model.requests[-1].messages)
    assert "Earlier on this pull request" not in first
    assert ask(flow, flow.comment("/spark ask and what would you change?", by="erin")) == "answered"
    prompt = "\n".join(m["content"] for m in flow.model.requests[-1].messages)
    _, found, asked = prompt.partition("Earlier on this pull request")
    assert found and "why minus one?" in asked and "It divides by one too few" in asked
    assert "dave asked Spark" in asked and "and what would you change?" in asked


def test_a_file_named_by_its_bare_name_is_read_at_its_path(flows: StartFlow) -> None:
    flow = flows(story())
    assert (
        ask(flow, flow.comment("/spark ask what does calc.py return for one value?", by="dave")) == "answered"
    )
    [answer] = app_comments(flow)
    assert "could not read" not in answer["body"]
    reads = [r.path for r in flow.github.request_log if "/contents/" in r.path]
    assert any(f"/contents/{PATH}?" in p for p in reads) and not any("/contents/calc.py" in p for p in reads)
