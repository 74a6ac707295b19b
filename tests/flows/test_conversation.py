"""``/spark undo`` and ``/spark describe`` in process: their rules, on the local GitHub and model, no worker.

The end-to-end tier (tests/e2e/test_conversation.py) keeps each command's path from the webhook, the
supersede between two jobs, and the session's bound; these check the flows' own logic.
"""

from __future__ import annotations

from typing import Any

from bot.core.describe import END, START
from sandbox.scenario import Event
from tests.flows.conftest import Flow, StartFlow
from tests.stories import (
    AUTHOR_BODY,
    BARE_EXCEPT,
    FIX_SCRIPT,
    FIXED,
    HEAD,
    LOADER,
    LOADER_BASE,
    LOADER_FIXED,
    REPO,
    SUMMARY_1,
    bot_comments,
    checks,
    describe_script,
    described,
    head_file,
    review_story,
)
from tests.stories import fix_story as story
from workers.memory import last_seen
from workers.memory import session as sessions

NO_REVIEW = "review:\n  auto: false\n"


def calculator(flows: StartFlow, scripts: list[dict[str, Any]], **options: Any) -> Flow:
    """Return the calculator's pull request (tests/e2e/test_fix_flow.py) with the given scripted replies."""
    return flows(story([{"wait": 0}], scripts, config=NO_REVIEW, **options))


def last_seen_head(flow: Flow) -> str:
    """Return the head Spark last saw of the pull request."""
    seen = last_seen.recall(flow.redis, flow.ref().key)
    return seen.head_sha if seen is not None else ""


def test_undo_restores_the_files_of_the_fix_s_parent(flows: StartFlow) -> None:
    flow = calculator(flows, [FIX_SCRIPT])
    assert flow.undo(flow.comment("/spark undo")) == "nothing"
    [reply] = bot_comments(flow.outcome())
    assert reply.startswith("There is no commit of mine to undo on this pull request.")
    assert flow.fix(flow.comment("/spark fix average divides by the wrong count")) == "committed"
    fixed = flow.head()
    # No review reads Spark's own commits: the flows keep the head they made, for the next question.
    assert last_seen_head(flow) == fixed
    assert flow.undo(flow.comment("/spark undo")) == "undone"
    assert head_file(flow) == HEAD
    assert last_seen_head(flow) == flow.head() != fixed
    [commit] = [c for c in flow.github.commits(REPO, "average") if fixed in c["parents"]]
    assert commit["verified"] and f"Spark-Reverts: {fixed}" in commit["message"]
    assert "with /spark undo on" in commit["message"]
    # A second undo has nothing of Spark's left to revert (its last commit is the undo itself).
    assert flow.undo(flow.comment("/spark undo")) == "nothing"
    assert "was itself an undo" in bot_comments(flow.outcome())[-1]


def test_undo_by_someone_who_may_not_fix_is_refused_and_reverts_nothing(flows: StartFlow) -> None:
    flow = calculator(flows, [FIX_SCRIPT], collaborators={"alice": "write", "trudy": "triage"})
    flow.fix(flow.comment("/spark fix average divides by the wrong count"))
    assert flow.undo(flow.comment("/spark undo", by="trudy")) == "refused"
    assert FIXED in head_file(flow)
    assert "Sorry @trudy, `/spark undo` needs write permission" in bot_comments(flow.outcome())[-1]


def test_undo_when_the_head_moved_names_each_commit_pushed_since(flows: StartFlow) -> None:
    flow = calculator(flows, [FIX_SCRIPT])
    flow.fix(flow.comment("/spark fix average divides by the wrong count"))
    fixed = flow.head()
    for n in range(7):
        flow.github.push(REPO, "average", {f"notes/{n}.txt": f"{n}\n"}, f"Note {n}", author="carol")
    assert flow.undo(flow.comment("/spark undo")) == "moved"
    assert flow.head() != fixed and FIXED in head_file(flow)
    reply = bot_comments(flow.outcome())[-1]
    assert reply.startswith(f"I did not undo my commit {fixed[:7]}: the branch `average` moved since")
    # The newest five by name, the rest counted.
    assert "- 2 earlier commits" in reply and "by carol: Note 6" in reply and "Note 1" not in reply


def test_undo_reverts_applied_safe_fixes_too(flows: StartFlow) -> None:
    flow = flows(
        review_story(
            "acme/loader-undo",
            {"app/config.py": LOADER_BASE},
            {"app/config.py": LOADER},
            [{"path": "app/config.py", "reply": BARE_EXCEPT}],
        ),
    )
    assert flow.act(Event("open", {})) == "posted"
    [run] = checks(flow)
    flow.github.request_check_run_action(run["id"], "apply_fixes", author="bob")
    assert flow.apply_safe_fixes() == "committed"
    assert flow.github.file_at(flow.repo, flow.head(), "app/config.py") != LOADER
    assert flow.undo(flow.comment("/spark undo", by="bob")) == "undone"
    assert flow.github.file_at(flow.repo, flow.head(), "app/config.py") == LOADER
    assert LOADER_FIXED != LOADER
    entries = sessions.load(flow.redis, flow.ref().key).entries
    assert [(e.command, e.outcome) for e in entries] == [("safe-fixes", "undone"), ("undo", "committed")]


def test_describe_keeps_the_author_s_text_and_needs_author_or_maintainer(flows: StartFlow) -> None:
    collaborators = {"alice": "read", "bob": "triage", "maya": "maintain"}
    scripts = [describe_script("a", SUMMARY_1), describe_script("b", SUMMARY_1)]
    flow = flows(described([{"wait": 0}], scripts, collaborators=collaborators, config=NO_REVIEW))
    assert flow.describe(flow.comment("/spark describe", by="bob")) == "refused"
    assert str(flow.github.pull(REPO, 1)["body"]) == AUTHOR_BODY
    # The author may, with read permission only; a maintainer may too.
    assert flow.describe(flow.comment("/spark describe", by="alice")) == "described"
    assert flow.describe(flow.comment("/spark describe", by="maya")) == "described"
    body = str(flow.github.pull(REPO, 1)["body"])
    assert body.startswith(AUTHOR_BODY) and body.endswith(END) and body.count(START) == 1
    assert len(flow.model.requests) == 2
