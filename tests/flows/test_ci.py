"""Failed checks in process: read once, shown on Spark's CI check run with the Fix CI offer; annotations only
without `actions: read` (said once); the config's modes and checks; auto mode's loop guard."""

from __future__ import annotations

from typing import Any

import yaml

from bot import keys
from bot.core.ci import CHECK_NAME, FIX_ACTION
from bot.refs import CheckRef, CommandRef
from sandbox import scenario as scenarios
from sandbox.github.actions import Job, Step
from tests.flows.conftest import Flow, StartFlow
from workers.flows.ci import CHECK_RUN, run_ci_failure

CI_EVENT = next(e for e in scenarios.load("ci-fix").events if e.kind == "ci")


def _scenario(config: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(scenarios.find("ci-fix").read_text())
    data["repository"]["files"][".github/workflows/ci.yml"] = "on: pull_request\n"
    if config is not None:
        data["repository"]["files"][".github/spark.yml"] = config
    return data


def _opened(flow: Flow) -> Flow:
    flow.scene.open_pull_request(webhooks=False)
    return flow


def _fail(flow: Flow) -> list[str]:
    """Run the workflow on the head (both jobs fail), then the CI job of each failed check; return results."""
    head = flow.head()
    jobs = flow.scene.run_ci(CI_EVENT.data)
    results = []
    for job_id in jobs:
        run = flow.github.state.check_runs[job_id]
        check = CheckRef(job_id, run.name, run.conclusion or "", actions_job=True)
        results.append(run_ci_failure(flow.context("ci", head_sha=head), check))
    return results


def _spark_run(flow: Flow) -> dict[str, Any]:
    [run] = [r for r in flow.github.check_runs(flow.repo, flow.head()) if r["name"] == CHECK_NAME]
    return run


def test_failed_checks_are_offered_on_sparks_check_run(flows: StartFlow) -> None:
    flow = _opened(flows(_scenario()))
    assert _fail(flow) == ["offered", "offered"]
    run = _spark_run(flow)
    assert run["output"]["title"] == (
        "2 checks failed: lint (1 error in `src/shop/cart.py`), "
        "test (1 failure, `tests/test_cart.py` → `src/shop/cart.py`)"
    )
    assert "- `src/shop/cart.py:3`: ruff: F401 `os` imported but unused" in run["output"]["summary"]
    assert [a["identifier"] for a in run["actions"]] == [FIX_ACTION]
    assert run["conclusion"] == "neutral"
    assert flow.github.issue_comments(flow.repo, flow.number) == []


def test_a_check_is_read_once_whichever_delivery_comes_first(flows: StartFlow) -> None:
    flow = _opened(flows(_scenario()))
    head = flow.head()
    [job, _] = flow.scene.run_ci(CI_EVENT.data)
    check = CheckRef(job, "lint", "failure", actions_job=True)
    assert run_ci_failure(flow.context("ci", head_sha=head), check) == "offered"
    assert run_ci_failure(flow.context("ci", head_sha=head), check) == "already read"


def test_without_actions_read_annotations_still_locate_it_and_spark_says_how_to_grant_it(
    flows: StartFlow,
) -> None:
    flow = _opened(flows(_scenario()))
    installation = flow.github.state.repo(flow.repo).installation_id
    assert installation is not None
    flow.github.set_permissions(
        installation,
        {
            "metadata": "read",
            "contents": "write",
            "pull_requests": "write",
            "issues": "write",
            "checks": "write",
        },
    )
    assert _fail(flow) == ["offered", "offered"]
    run = _spark_run(flow)
    # ruff's annotation names the file; pytest's log cannot be read and it left no annotation on a file.
    assert run["output"]["title"].startswith(
        "2 checks failed: lint (1 error in `src/shop/cart.py`), test (nothing"
    )
    comments = flow.github.issue_comments(flow.repo, flow.number)
    assert len(comments) == 1 and "`actions: read`" in comments[0]["body"]


def test_off_and_unselected_checks_are_left_alone(flows: StartFlow) -> None:
    flow = _opened(flows(_scenario("ci:\n  fix: off\n")))
    assert _fail(flow) == ["off", "off"]
    flow = _opened(flows(_scenario("ci:\n  checks: [lint]\n")))
    assert _fail(flow) == ["offered", "not selected"]


def test_auto_mode_stops_when_its_own_fix_fails_the_same_check(flows: StartFlow) -> None:
    flow = _opened(flows(_scenario("ci:\n  fix: auto\n")))
    head = flow.head()
    flow.redis.sadd(keys.CI_FIXED.format(flow.ref().key), "lint")
    flow.redis.expire(keys.CI_FIXED.format(flow.ref().key), 60)
    flow.redis.set(keys.OWN_COMMIT.format(head), "1", ex=60)
    assert _fail(flow) == ["stopped", "stopped"]
    comments = flow.github.issue_comments(flow.repo, flow.number)
    assert len(comments) == 1
    assert "`lint` failed again on Spark's own fix" in comments[0]["body"]
    assert "/spark undo" in comments[0]["body"]


def _ci_command(flow: Flow, text: str = "ci", by: str = "bob") -> str:
    return flow.fix(flow.comment(f"/spark fix {text}".strip(), by=by))


def test_spark_fix_ci_commits_one_fix_of_the_product_file_and_the_rerun_passes(flows: StartFlow) -> None:
    flow = _opened(flows(_scenario()))
    _fail(flow)
    assert _ci_command(flow) == "committed"
    head = flow.head()
    text = flow.github.file_at(flow.repo, head, "src/shop/cart.py") or ""
    assert "import os" not in text and "if not 0 <= discount <= 1:" in text
    [request] = [
        r for r in flow.model.requests if "src/shop/cart.py" in str(r.messages) and "ci" in str(r.messages)
    ][-1:]
    asked = str(request.messages)
    assert "F401" in asked and "ValueError: discount must be between 0 and 1, got 0.0" in asked
    reply = flow.github.issue_comments(flow.repo, flow.number)[-1]["body"]
    assert "`tests/test_cart.py` ends in `src/shop/cart.py`" in reply
    assert flow.redis.smembers(keys.CI_FIXED.format(flow.ref().key)) == {b"lint", b"test"}
    flow.scene.run_ci(CI_EVENT.data)
    conclusions = {r["name"]: r["conclusion"] for r in flow.github.check_runs(flow.repo, head)}
    assert conclusions == {"lint": "success", "test": "success"}


def test_bare_spark_fix_on_a_failed_head_fixes_what_failed(flows: StartFlow) -> None:
    flow = _opened(flows(_scenario()))
    _fail(flow)
    assert _ci_command(flow, "") == "committed"
    assert "import os" not in (flow.github.file_at(flow.repo, flow.head(), "src/shop/cart.py") or "")


def test_spark_fix_ci_reads_the_failed_checks_itself_when_none_were_read(flows: StartFlow) -> None:
    flow = _opened(flows(_scenario("ci:\n  fix: off\n")))
    flow.scene.run_ci(CI_EVENT.data)  # no CI job ran: `ci.fix: off`
    assert _ci_command(flow) == "committed"


def test_spark_fix_ci_without_failed_checks_says_so(flows: StartFlow) -> None:
    flow = _opened(flows(_scenario()))
    assert _ci_command(flow) == "failed"
    reply = flow.github.issue_comments(flow.repo, flow.number)[-1]["body"]
    assert "No check has failed on the head" in reply
    assert flow.model.requests == []


def test_a_failure_in_a_workflow_file_is_refused_with_the_reason(flows: StartFlow) -> None:
    flow = _opened(flows(_scenario()))
    head = flow.head()
    annotation = {
        "path": ".github/workflows/ci.yml",
        "start_line": 7,
        "end_line": 7,
        "annotation_level": "failure",
        "message": "unknown action input",
    }
    [job] = flow.github.run_workflow(
        flow.repo, head, [Job("workflow", [Step("Set up job", "", "failure")], annotations=[annotation])]
    )
    run_ci_failure(flow.context("ci", head_sha=head), CheckRef(job, "workflow", "failure", actions_job=True))
    assert _ci_command(flow) == "failed"
    reply = flow.github.issue_comments(flow.repo, flow.number)[-1]["body"]
    assert "Spark never edits workflows" in reply


def test_the_fix_ci_button_fixes_without_a_comment(flows: StartFlow) -> None:
    flow = _opened(flows(_scenario()))
    _fail(flow)
    run_id = _spark_run(flow)["id"]
    command = CommandRef(name="fix", text="ci", comment_id=run_id, author="bob", kind=CHECK_RUN)
    assert flow.fix(command) == "committed"
    [reply] = flow.github.issue_comments(flow.repo, flow.number)
    assert "Spark-Requested-In" not in reply["body"]
    messages = [commit["message"] for commit in flow.github.commits(flow.repo, "discount")]
    assert any(f"/runs/{run_id}" in message for message in messages)


def test_a_check_spark_s_commit_broke_is_said_once_with_undo_offered(flows: StartFlow) -> None:
    flow = _opened(flows(_scenario()))
    parent = flow.head()
    flow.github.run_workflow(flow.repo, parent, [Job("docs", [Step("Run mkdocs build", "built")])])
    _fail(flow)
    assert _ci_command(flow) == "committed"
    head = flow.head()
    before = len(flow.github.issue_comments(flow.repo, flow.number))
    broken = [Job("docs", [Step("Run mkdocs build", "docs/index.md:3: broken link", "failure")])]
    for _ in range(2):  # the same failure delivered again says nothing new
        [job] = flow.github.run_workflow(flow.repo, head, broken)
        check = CheckRef(job, "docs", "failure", actions_job=True)
        run_ci_failure(flow.context("ci", head_sha=head), check)
    said = [c["body"] for c in flow.github.issue_comments(flow.repo, flow.number)[before:]]
    assert len(said) == 1
    assert said[0].startswith(f"`docs` passed before Spark's commit {head[:7]} and fails on it.")
    assert "/spark undo" in said[0]
