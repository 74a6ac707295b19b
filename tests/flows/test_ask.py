"""``run_ask`` in process: an answer is posted once whatever re-runs it, and the hour's budgets hold.

Which comment queues which job, and the thread rules through the webhooks, are tests/e2e/test_ask.py's.
"""

from __future__ import annotations

from typing import Any

from bot import keys
from bot.refs import CommandRef
from tests.flows.conftest import Flow, StartFlow
from workers.flows.ask import run_ask

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
