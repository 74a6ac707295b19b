"""Failed checks in process: read once, shown on Spark's CI check run with the Fix CI offer; annotations only
without `actions: read` (said once); the config's modes and checks; auto mode's loop guard."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from typing import Any, cast

import pytest
import yaml

from bot import keys
from bot.adapters.github_port import GitHubError, GitHubPort
from bot.adapters.redacting import RedactingPort
from bot.core.ci import CHECK_NAME, FIX_ACTION
from bot.core.config import RepoConfig
from bot.refs import CheckRef, CommandRef
from sandbox import scenario as scenarios
from sandbox.github.actions import Job, Step
from tests.flows.conftest import Flow, StartFlow
from workers.commands.fix.flow import run_fix
from workers.flows.ci import (
    CHECK_RUN,
    CiOutcome,
    read_ci_failure,
    run_ci_failure,
    show_offer,
    stored_reports,
)
from workers.memory import last_seen

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


def _seen(flow: Flow) -> Flow:
    """Open the pull request and let a review job (automatic review off) note its head: Spark then remembers
    the head and what the config at the base says of failed checks, as after the review of a push."""
    flow.scene.open_pull_request(webhooks=False)
    assert flow.review() == "auto review off"
    return flow


QUIET = "review:\n  auto: false\n"


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


def _set_config(flow: Flow, text: str) -> None:
    """Change `.github/spark.yml` on the base branch (no webhook reaches Spark)."""
    flow.github.push(flow.repo, "main", {".github/spark.yml": text}, message="Config", author="alice")


def _check(flow: Flow, job_id: int) -> CheckRef:
    run = flow.github.state.check_runs[job_id]
    return CheckRef(job_id, run.name, run.conclusion or "", actions_job=True)


def test_on_a_head_spark_saw_the_offer_leaves_before_any_read_is_back(flows: StartFlow) -> None:
    # The pull request cannot be read: on a head Spark saw, the offer was written anyway (from the webhook and
    # what Spark remembers), so it did not wait for that read; the job then fails on the read.
    flow = _seen(flows(_scenario(QUIET)))
    head = flow.head()
    [lint, _] = flow.scene.run_ci(CI_EVENT.data)
    flow.github.faults.inject(404, "GET", rf"^/repos/{flow.repo}/pulls/{flow.number}$", times=5)
    with pytest.raises(GitHubError):
        run_ci_failure(flow.context("ci", head_sha=head), _check(flow, lint))
    run = _spark_run(flow)
    assert run["output"]["title"] == "1 check failed: lint (reading what failed)"
    assert [a["identifier"] for a in run["actions"]] == [FIX_ACTION]


def test_on_a_head_spark_never_saw_the_offer_waits_for_the_config(flows: StartFlow) -> None:
    flow = _opened(flows(_scenario(QUIET)))
    head = flow.head()
    [lint, _] = flow.scene.run_ci(CI_EVENT.data)
    flow.github.faults.inject(404, "GET", rf"^/repos/{flow.repo}/pulls/{flow.number}$", times=5)
    with pytest.raises(GitHubError):
        run_ci_failure(flow.context("ci", head_sha=head), _check(flow, lint))
    assert [r for r in flow.github.check_runs(flow.repo, head) if r["name"] == CHECK_NAME] == []


def test_on_a_head_spark_saw_the_offer_ends_as_the_slow_path_does(flows: StartFlow) -> None:
    flow = _seen(flows(_scenario(QUIET)))
    assert _fail(flow) == ["offered", "offered"]
    run = _spark_run(flow)
    assert run["output"]["title"] == (
        "2 checks failed: lint (1 error in `src/shop/cart.py`), "
        "test (1 failure, `tests/test_cart.py` → `src/shop/cart.py`)"
    )
    assert [a["identifier"] for a in run["actions"]] == [FIX_ACTION]


def test_ci_fix_off_never_gets_an_offer_even_on_a_head_spark_saw(flows: StartFlow) -> None:
    flow = _seen(flows(_scenario(QUIET + "ci:\n  fix: off\n")))
    seen = last_seen.recall(flow.redis, flow.ref().key)
    assert seen is not None and seen.ci_fix == "off"
    assert _fail(flow) == ["off", "off"]
    assert [r for r in flow.github.check_runs(flow.repo, flow.head()) if r["name"] == CHECK_NAME] == []


def test_an_offer_made_from_memory_is_withdrawn_when_the_config_turned_it_off(flows: StartFlow) -> None:
    flow = _seen(flows(_scenario(QUIET)))
    _set_config(flow, QUIET + "ci:\n  fix: off\n")  # since Spark last read it
    assert _fail(flow) == ["off", "off"]
    run = _spark_run(flow)
    assert run["actions"] == [] and run["conclusion"] == "skipped"
    assert "`ci.fix` is `off`" in run["output"]["summary"]
    # The button, had someone pressed it in between, fixes nothing.
    command = CommandRef(name="fix", text="ci", comment_id=run["id"], author="bob", kind=CHECK_RUN)
    assert flow.fix(command) == "failed"
    assert [c["author"] for c in flow.github.commits(flow.repo, "discount")].count("spark[bot]") == 0
    assert flow.model.requests == []


def test_ci_checks_filters_on_a_head_spark_saw(flows: StartFlow) -> None:
    flow = _seen(flows(_scenario(QUIET + "ci:\n  checks: [lint]\n")))
    assert _fail(flow) == ["offered", "not selected"]
    assert _spark_run(flow)["output"]["title"].startswith("1 check failed: lint (")
    # Narrowed since Spark last read it: the check the config no longer names leaves the others' offer be.
    flow = _seen(flows(_scenario(QUIET + "ci:\n  checks: [lint, test]\n")))
    _set_config(flow, QUIET + "ci:\n  checks: [lint]\n")
    assert _fail(flow) == ["offered", "not selected"]
    run = _spark_run(flow)
    assert run["output"]["title"].startswith("1 check failed: lint (")
    assert [a["identifier"] for a in run["actions"]] == [FIX_ACTION]


AUTO = QUIET + "ci:\n  fix: auto\n"


class CountingPort:
    """A job's GitHub port that counts the calls the flow makes through it (what the flow asked for, whatever
    the transport then did: a GET retried on a dropped connection is one read)."""

    def __init__(self, inner: GitHubPort, calls: Counter[tuple[str, ...]]) -> None:
        self._inner, self._calls = inner, calls

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._calls[(name, *map(str, args))] += 1
            return attr(*args, **kwargs)

        return call


def _auto(
    flow: Flow, head: str, job_id: int, calls: Counter[tuple[str, ...]] | None = None
) -> tuple[CiOutcome, str]:
    """Read a failed check as the CI job does; when auto mode fixes, run that fix as the job does (on the CI
    job's reads and GitHub port); with ``calls``, count the calls made through that port."""
    ci_ctx = flow.context("ci", head_sha=head)
    if calls is not None:
        client = flow.clients.github.installation(ci_ctx.pr.installation_id)
        ci_ctx = replace(ci_ctx, github=RedactingPort(cast(GitHubPort, CountingPort(client, calls))))
    outcome = read_ci_failure(ci_ctx, _check(flow, job_id))
    if outcome.result != "auto":
        return outcome, ""
    run_id = int(flow.redis.hget(keys.CI_REPORTS.format(flow.ref().key, head), "_run") or 0)
    command = CommandRef(name="fix", text="ci", comment_id=run_id, author="spark", kind=CHECK_RUN)
    fix_ctx = replace(flow.context("fix", order=run_id, claim=False), github=ci_ctx.github)
    fixed = run_fix(fix_ctx, command, outcome.reads)
    if outcome.after is not None:
        outcome.after()
    return outcome, fixed


def _spark_commits(flow: Flow) -> int:
    return [c["author"] for c in flow.github.commits(flow.repo, "discount")].count("spark[bot]")


def test_auto_mode_fixes_every_failed_check_on_the_ci_job_s_own_reads(flows: StartFlow) -> None:
    flow = _seen(flows(_scenario(AUTO)))
    head = flow.head()
    [lint, _] = flow.scene.run_ci(CI_EVENT.data)
    calls: Counter[tuple[str, ...]] = Counter()
    outcome, fixed = _auto(flow, head, lint, calls)
    assert (outcome.result, fixed) == ("auto", "committed")
    text = flow.github.file_at(flow.repo, flow.head(), "src/shop/cart.py") or ""
    assert "import os" not in text and "if not 0 <= discount <= 1:" in text
    asked = str(flow.model.requests[-1].messages)
    assert "F401" in asked and "ValueError: discount must be between 0 and 1, got 0.0" in asked
    # The fix read nothing the CI job had read: the pull request, the config, the file list, the head's
    # check runs and the file it fixed, once each (counted as the flows ask: on a machine loaded enough,
    # the transport may send a GET again on a fresh connection, which is not the flow reading twice).
    for call in (
        ("pull", flow.repo, str(flow.number)),
        ("file_text", flow.repo, ".github/spark.yml", "main"),
        ("tree_paths", flow.repo, head),
        ("file_text", flow.repo, "src/shop/cart.py", head),
        ("check_runs", flow.repo, head),
    ):
        assert calls[call] == 1, (call, calls)


def test_a_head_that_moved_before_the_reads_gets_no_fix(flows: StartFlow) -> None:
    flow = _seen(flows(_scenario(AUTO)))
    head = flow.head()
    [lint, _] = flow.scene.run_ci(CI_EVENT.data)
    flow.github.push(flow.repo, "discount", {"README.md": "docs\n"}, message="More", author="bob")
    outcome, fixed = _auto(flow, head, lint)
    assert (outcome.result, fixed) == ("stale", "")
    run = _spark_run_on(flow, head)
    assert run["actions"] == [] and "moved on" in run["output"]["summary"]
    assert _spark_commits(flow) == 0 and flow.model.requests == []


def _fix_after_push(flow: Flow, files: dict[str, str | bytes | None]) -> str:
    """Auto mode's fix on the CI job's reads, with a push of ``files`` by bob between reads and fix."""
    head = flow.head()
    [lint, _] = flow.scene.run_ci(CI_EVENT.data)
    ci_ctx = flow.context("ci", head_sha=head)
    outcome = read_ci_failure(ci_ctx, _check(flow, lint))
    assert outcome.result == "auto" and outcome.reads is not None
    flow.github.push(flow.repo, "discount", files, message="More", author="bob")
    run_id = int(flow.redis.hget(keys.CI_REPORTS.format(flow.ref().key, head), "_run") or 0)
    command = CommandRef(name="fix", text="ci", comment_id=run_id, author="spark", kind=CHECK_RUN)
    fix_ctx = replace(flow.context("fix", order=run_id, claim=False), github=ci_ctx.github)
    return run_fix(fix_ctx, command, outcome.reads)


def test_a_head_that_moves_after_the_reads_never_gets_a_commit_on_text_it_no_longer_has(
    flows: StartFlow,
) -> None:
    # The fix runs on what the CI job read; bob changes the lines it edits before the commit. GitHub refuses
    # the commit on the head that was read (expectedHeadOid); the edit, tried on bob's text as read anew,
    # does not apply: nothing is committed, bob's text stands.
    flow = _seen(flows(_scenario(AUTO)))
    bobs = (flow.github.file_at(flow.repo, flow.head(), "src/shop/cart.py") or "").replace(
        "if not 0 < discount <= 1:", "if discount < 0 or discount > 1:"
    )
    assert _fix_after_push(flow, {"src/shop/cart.py": bobs}) == "failed"
    assert _spark_commits(flow) == 0
    assert flow.github.file_at(flow.repo, flow.head(), "src/shop/cart.py") == bobs


def test_a_head_that_moves_elsewhere_after_the_reads_gets_the_fix_on_its_own_text(flows: StartFlow) -> None:
    flow = _seen(flows(_scenario(AUTO)))
    assert _fix_after_push(flow, {"README.md": "docs\n"}) == "committed"
    head = flow.head()
    assert flow.github.file_at(flow.repo, head, "README.md") == "docs\n"
    assert "import os" not in (flow.github.file_at(flow.repo, head, "src/shop/cart.py") or "")
    assert _spark_commits(flow) == 1


def test_a_workflow_job_finds_its_pull_request_from_the_head_spark_saw(flows: StartFlow) -> None:
    flow = _seen(flows(_scenario(QUIET)))
    installation = flow.ref().installation_id
    assert last_seen.pull_of_head(flow.redis, installation, flow.repo, flow.head()) == flow.number
    assert last_seen.pull_of_head(flow.redis, installation, flow.repo, "f" * 40) is None


def _spark_run_on(flow: Flow, head: str) -> dict[str, Any]:
    [run] = [r for r in flow.github.check_runs(flow.repo, head) if r["name"] == CHECK_NAME]
    return run


def test_auto_mode_reads_the_checks_the_intake_noted_on_the_head_before_its_fix_starts(
    flows: StartFlow,
) -> None:
    flow = _seen(flows(_scenario(AUTO)))
    head = flow.head()
    [lint, test] = flow.scene.run_ci(CI_EVENT.data)
    # What the intake writes with the test job's delivery (tests/intake/test_ci_events.py).
    noted = keys.CI_FAILED.format(flow.ref(head).head_key)
    flow.redis.hset(noted, str(test), json.dumps(_check(flow, test).as_dict()))
    flow.redis.expire(noted, 60)
    mark = len(flow.github.request_log)
    ci_ctx = flow.context("ci", head_sha=head)
    outcome = read_ci_failure(ci_ctx, _check(flow, lint))
    assert outcome.result == "auto" and outcome.reads is not None
    assert list(outcome.reads.siblings) == [test]  # read by the CI job, beside its own check
    run_id = int(flow.redis.hget(keys.CI_REPORTS.format(flow.ref().key, head), "_run") or 0)
    command = CommandRef(name="fix", text="ci", comment_id=run_id, author="spark", kind=CHECK_RUN)
    fix_ctx = replace(flow.context("fix", order=run_id, claim=False), github=ci_ctx.github)
    assert run_fix(fix_ctx, command, outcome.reads) == "committed"
    # The fix used those reads: the test job's annotations and log were read once, and its failure was in
    # the model's request.
    every = [r.path for r in flow.github.request_log[mark:]]
    assert every.count(f"/repos/{flow.repo}/check-runs/{test}/annotations?per_page=100") == 1
    assert every.count(f"/repos/{flow.repo}/actions/jobs/{test}/logs") == 1
    assert "ValueError: discount must be between 0 and 1, got 0.0" in str(flow.model.requests[-1].messages)


def test_a_write_made_from_an_older_list_keeps_the_checks_stored_since(flows: StartFlow) -> None:
    # Two checks' jobs run side by side: the one that writes last may have read the head's reports before
    # the other stored its own. Its write still shows both.
    flow = _opened(flows(_scenario()))
    assert _fail(flow) == ["offered", "offered"]
    head = flow.head()
    [lint] = [r for r in stored_reports(flow.redis, flow.ref().key, head) if r.name == "lint"]
    show_offer(flow.context("ci", head_sha=head), head, [lint], "offer", fixable=True, config=RepoConfig())
    run = _spark_run(flow)
    assert run["output"]["title"].startswith("2 checks failed: lint (1 error in `src/shop/cart.py`), test (")
    assert [a["identifier"] for a in run["actions"]] == [FIX_ACTION]
