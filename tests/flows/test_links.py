"""On GitHub Enterprise Server every link Spark writes is on the configured ``GITHUB_URL``, never github.com.

The local GitHub serves its web pages (``html_url``) at its own address, which the flows tier configures as
``GITHUB_URL``: a review with a finding, an answer with permalinks, fixes from the conversation and from a
thread (their ``Spark-Requested-In:`` trailers) and an undo run, and everything then on the pull request is
searched for a link to github.com.
"""

from __future__ import annotations

import re
from typing import Any

from bot.refs import CommandRef
from tests.flows.conftest import Flow, StartFlow
from workers.commands.ask import run_ask

PATH = "src/calc.py"
BASE = 'def add(a, b):\n    """Return a + b."""\n    return a + b\n'
HEAD = BASE + "\n\ndef average(values):\n    return sum(values) / (len(values) - 1)\n"
FIX = (
    f"{PATH}\n<<<<<<< SEARCH\n    return sum(values) / (len(values) - 1)\n=======\n"
    "    return sum(values) / len(values)\n>>>>>>> REPLACE\n"
)
RENAME = f"{PATH}\n<<<<<<< SEARCH\ndef add(a, b):\n=======\ndef plus(a, b):\n>>>>>>> REPLACE\n"
FINDING = "### FINDING: high: divides by one too few\nThe mean divides by the count.\n" + FIX.removeprefix(
    f"{PATH}\n"
)
ANSWER = f"It divides by one too few:\n\n```quote {PATH}\n    return sum(values) / (len(values) - 1)\n```\n"
# A link to github.com or one of its hosts (not a noreply e-mail address, which is no link).
GITHUB_COM_LINK = re.compile(r"(?i)(?:https?:)?//(?:[\w-]+\.)*github\.com\b")


def story() -> dict[str, Any]:
    """Return a scenario: one pull request, the model reviewing, answering and fixing."""
    return {
        "name": "enterprise-links",
        "repository": {"owner": "acme", "name": "calculator", "files": {PATH: BASE}},
        "pull_request": {"title": "Average", "author": "alice", "head_branch": "avg", "files": {PATH: HEAD}},
        "collaborators": {"alice": "write"},
        "events": [{"wait": 0}],
        "model": {
            "replies": [
                # Each answered once, in turn (the question's prompt names /spark fix too): the question,
                # the conversation's fix, the thread's.
                {"name": "ask", "command": "ask", "reply": ANSWER},
                {"name": "fix", "command": "fix", "reply": FIX},
                {"name": "rename", "command": "fix", "reply": RENAME, "repeat": True},
                {"name": "review", "path": PATH, "reply": FINDING, "repeat": True},
            ]
        },
    }


def everything_posted(flow: Flow) -> list[str]:
    """Return every text Spark wrote on the pull request: comments, reviews, check runs, commit messages."""
    repo, number = flow.repo, flow.number
    texts = [c["body"] for c in flow.github.issue_comments(repo, number)]
    texts += [c["body"] for c in flow.github.review_comments(repo, number)]
    texts += [r.get("body") or "" for r in flow.github.reviews(repo, number)]
    for run in flow.github.check_runs(repo):
        texts += [str(run.get("details_url") or ""), str(run.get("output") or "")]
    texts += [c["message"] for c in flow.github.commits(repo, "avg")]
    return texts


def ask(flow: Flow, command: CommandRef) -> str:
    return flow._ran(run_ask(flow.context("ask", claim=False), command))


def test_no_link_to_github_com_when_github_is_an_enterprise_server(flows: StartFlow) -> None:
    flow = flows(story())
    web = flow.settings.github_url
    assert "github.com" not in web
    assert flow.review("opened") == "posted"
    assert ask(flow, flow.comment(f"/spark ask why minus one in {PATH}?")) == "answered"
    fixed = flow.comment("/spark fix the average")
    assert flow.fix(fixed) == "committed"
    thread = flow.review_comment(PATH, 1, "/spark fix rename add to plus")
    assert flow.fix(thread) == "committed"
    assert flow.undo(flow.comment("/spark undo")) in ("committed", "undone")

    posted = everything_posted(flow)
    linked = [text for text in posted if GITHUB_COM_LINK.search(text)]
    assert linked == [], "links to github.com:\n" + "\n---\n".join(linked)
    joined = "\n".join(posted)
    # The links are there, on the configured host: permalinks and both commits' trailers.
    assert f"{web}/{flow.repo}/blob/" in joined
    pull = f"{web}/{flow.repo}/pull/{flow.number}"
    assert f"Spark-Requested-In: {pull}#issuecomment-{fixed.comment_id}" in joined
    assert f"Spark-Requested-In: {pull}#discussion_r{thread.comment_id}" in joined
