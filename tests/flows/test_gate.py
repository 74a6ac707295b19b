"""The merge gate (``review.gate``) in process: what the "Spark" check run concludes on the local GitHub.

With ``high`` the check fails while a verified high-severity finding stands unresolved; a resolved thread, a
👎, a push that removes the finding's code or Spark's own fix release it; "Re-run" on a head Spark already
reviewed decides again from what Spark remembers, without a model call; an error is neutral, never success.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.adapters.github_port import GitHubError
from sandbox.cerebras import Script
from sandbox.scenario import Event
from tests.flows.conftest import Flow, StartFlow
from tests.stories import (
    BARE_EXCEPT,
    LOADER,
    LOADER_BASE,
    UNCLOSED,
    checks,
    head,
    reviews,
)
from tests.stories import review_story as story

GATE_HIGH = "review:\n  gate: high\n"
# The model's second answer for the same file (a re-review), when a test lets it review again.
AGAIN = {"path": "app/config.py", "reply": BARE_EXCEPT + "\n" + UNCLOSED}


def gated(
    repo: str, config: str | None = GATE_HIGH, replies: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Return a story whose pull request brings a bare except (high) and an unclosed file (medium)."""
    base = {"app/config.py": LOADER_BASE}
    if config is not None:
        base[".github/spark.yml"] = config
    return story(repo, base, {"app/config.py": LOADER}, [AGAIN] if replies is None else replies)


def spark_runs(flow: Flow) -> list[dict[str, Any]]:
    """Return the "Spark" check runs on the current head, oldest first."""
    return [r for r in checks(flow) if r["name"] == "Spark" and r["head_sha"] == head(flow)]


def comment_about(flow: Flow, words: str) -> dict[str, Any]:
    """Return the review comment of the first review whose body says ``words``."""
    return next(c for c in reviews(flow)[0]["comments"] if words in c["body"])


def test_an_unresolved_high_finding_fails_the_check_and_resolving_it_passes_the_re_run(
    flows: StartFlow,
) -> None:
    flow = flows(gated("acme/gate-high"))
    assert flow.act(Event("open", {})) == "posted"
    [run] = spark_runs(flow)
    assert run["conclusion"] == "failure"
    assert run["output"]["title"] == "2 new findings; 1 high-severity finding unresolved"
    summary = run["output"]["summary"]
    assert summary.startswith("**Merge gate** (`review.gate: high`): 1 high-severity finding stands")
    assert "- **high** `app/config.py` bare except hides real errors" in summary
    # The medium finding does not hold the gate.
    assert "never closed" not in summary.split("\n\n**")[0]

    # Re-run before anything changed: the same verdict, and no model call.
    asked = len(flow.model.requests)
    assert flow.rerun_check() == "gate failure"
    assert len(flow.model.requests) == asked
    assert spark_runs(flow)[-1]["conclusion"] == "failure"

    # A person resolves the high finding's thread, then presses "Re-run": a new check run passes.
    flow.github.resolve_thread(comment_about(flow, "bare except")["id"], author="bob")
    assert flow.rerun_check() == "gate success"
    assert len(flow.model.requests) == asked
    latest = spark_runs(flow)[-1]
    assert latest["conclusion"] == "success" and latest["status"] == "completed"
    assert len(spark_runs(flow)) == 3
    assert "1 finding released (1 resolved)" in latest["output"]["summary"]
    assert "without a new model call" in latest["output"]["summary"]
    assert len(reviews(flow)) == 1


def test_a_thread_unresolved_again_holds_the_gate_again(flows: StartFlow) -> None:
    flow = flows(gated("acme/gate-unresolved"))
    flow.act(Event("open", {}))
    bare = comment_about(flow, "bare except")["id"]
    flow.github.resolve_thread(bare, author="bob")
    assert flow.rerun_check() == "gate success"
    flow.github.resolve_thread(bare, author="carol", resolved=False)
    assert flow.rerun_check() == "gate failure"


def test_a_thumbs_down_dismisses_the_finding_and_releases_the_gate(flows: StartFlow) -> None:
    flow = flows(gated("acme/gate-dismissed"))
    flow.act(Event("open", {}))
    flow.github.react(comment_about(flow, "bare except")["id"], "-1", author="carol")
    asked = len(flow.model.requests)
    assert flow.rerun_check() == "gate success"
    assert len(flow.model.requests) == asked
    assert "1 finding released (1 dismissed)" in spark_runs(flow)[-1]["output"]["summary"]


def test_a_push_that_removes_the_findings_code_fixes_it(flows: StartFlow) -> None:
    flow = flows(gated("acme/gate-fixed", replies=[AGAIN, {"path": "app/config.py", "reply": UNCLOSED}]))
    flow.act(Event("open", {}))
    assert spark_runs(flow)[-1]["conclusion"] == "failure"
    fixed = LOADER.replace("    except:", "    except ValueError:")
    assert flow.act(Event("push", {"files": {"app/config.py": fixed}})) == "nothing new"
    [run] = spark_runs(flow)
    assert run["conclusion"] == "success"
    assert "no high-severity finding stands unresolved" in run["output"]["summary"]


def test_spark_s_own_fix_gets_a_gate_check_without_a_review(flows: StartFlow) -> None:
    flow = flows(gated("acme/gate-own-fix"))
    flow.act(Event("open", {}))
    reviewed = head(flow)
    [run] = spark_runs(flow)
    flow.github.request_check_run_action(run["id"], "apply_fixes", author="bob")
    assert flow.apply_safe_fixes() == "committed"
    asked = len(flow.model.requests)
    assert flow.review("synchronize") == "own commit"
    assert head(flow) != reviewed and len(flow.model.requests) == asked
    [own] = spark_runs(flow)
    assert own["conclusion"] == "success"
    assert "is Spark's own commit" in own["output"]["summary"]


def test_with_the_gate_off_the_check_concludes_as_before(flows: StartFlow) -> None:
    flow = flows(gated("acme/gate-off", config=None, replies=[AGAIN, AGAIN]))
    flow.act(Event("open", {}))
    [run] = spark_runs(flow)
    assert run["conclusion"] == "neutral"
    assert run["output"]["title"] == "2 new findings"
    assert "Merge gate" not in run["output"]["summary"]
    # "Re-run" reviews the head again, as it always did (a model call).
    asked = len(flow.model.requests)
    assert flow.rerun_check() == "nothing new"
    assert len(flow.model.requests) == asked + 1
    assert spark_runs(flow)[-1]["conclusion"] == "success"


def test_a_review_that_left_a_file_unreviewed_is_neutral_and_a_re_run_reviews_again(
    flows: StartFlow,
) -> None:
    # No scripted answer: the model call fails, the file is not reviewed.
    flow = flows(gated("acme/gate-partial", replies=[]))
    assert flow.act(Event("open", {})) == "model failed"
    [run] = spark_runs(flow)
    assert run["conclusion"] == "neutral"
    assert "1 file of the head was not reviewed" in run["output"]["summary"]
    flow.model.add_scripts([Script(reply=AGAIN["reply"], path="app/config.py")])
    assert flow.rerun_check() == "posted"
    assert spark_runs(flow)[-1]["conclusion"] == "failure"


@pytest.mark.parametrize(("config", "conclusion"), [(GATE_HIGH, "neutral"), (None, "failure")])
def test_an_error_in_spark_s_run_is_neutral_with_its_reason_under_the_gate(
    flows: StartFlow, config: str | None, conclusion: str
) -> None:
    flow = flows(gated(f"acme/gate-error-{conclusion}", config=config))
    flow.github.faults.inject(403, "POST", r".*/pulls/\d+/reviews$", times=5, body={"message": "Nope"})
    with pytest.raises(GitHubError):
        flow.act(Event("open", {}))
    [run] = spark_runs(flow)
    assert run["conclusion"] == conclusion
    assert run["output"]["title"] == "Review failed"
    summary = run["output"]["summary"]
    assert "The review failed: GitHubError" in summary
    assert ("**Merge gate** (`review.gate: high`): not evaluated" in summary) == (config is not None)
