"""GitHub Actions in the local GitHub: runs, jobs, their check runs and annotations, logs served as GitHub
serves them (a redirect to plain text with timestamps, 410 Gone past retention), the deliveries a finished
job fires, and the `actions: read` permission enforced."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from sandbox.github import GitHubSandbox
from sandbox.github.actions import Job, Step
from sandbox.github.auth import generate_private_key_pem
from tests.stories import missing_required, response_schema

KEY = generate_private_key_pem()
RUFF = (
    "::error title=ruff (F401),file=src/x.py,line=1,col=8,endLine=1,endColumn=10::"
    "src/x.py:1:8: F401 `os` imported but unused\nFound 1 error.\n"
)
STAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z ")


@pytest.fixture()
def gh() -> Iterator[GitHubSandbox]:
    """acme/app installed, PR #1 open."""
    with GitHubSandbox(private_key_pem=KEY) as sandbox:
        installation = sandbox.create_installation("acme")
        sandbox.create_repo("acme/app", {"src/x.py": "x = 1\n"}, installation)
        sandbox.open_pull_request("acme/app", "feature", {"src/x.py": "import os\nx = 2\n"})
        yield sandbox


def _payloads(gh: GitHubSandbox) -> list[tuple[str, dict[str, Any]]]:
    return [(d.event, json.loads(d.body)) for d in gh.deliveries]


def _token(gh: GitHubSandbox) -> dict[str, str]:
    installation = next(iter(gh.state.installations))
    return {"Authorization": f"token {gh.integration().get_access_token(installation).token}"}


def _fail_lint(gh: GitHubSandbox) -> int:
    head = gh.head_sha("acme/app", 1)
    steps = [Step("Run actions/checkout@v4"), Step("Run ruff check .", RUFF, "failure", 1, "ruff check .")]
    return gh.run_workflow(
        "acme/app", head, [Job("lint", steps), Job("test", [Step("Run pytest", "1 passed")])]
    )[0]


def test_a_failed_job_fires_workflow_job_and_check_run_completed(gh: GitHubSandbox) -> None:
    job = _fail_lint(gh)
    fired = [(event, payload.get("action")) for event, payload in _payloads(gh)]
    assert fired[-5:] == [
        ("workflow_job", "completed"),
        ("check_run", "completed"),
        ("workflow_job", "completed"),
        ("check_run", "completed"),
        ("workflow_run", "completed"),
    ]
    check = next(payload["check_run"] for event, payload in _payloads(gh) if event == "check_run")
    assert check["id"] == job and check["conclusion"] == "failure"
    assert check["app"]["slug"] == "github-actions"
    assert check["pull_requests"][0]["number"] == 1
    assert check["output"]["annotations_count"] == 2
    workflow_job = next(
        payload["workflow_job"] for event, payload in _payloads(gh) if event == "workflow_job"
    )
    assert workflow_job["check_run_url"].endswith(f"/check-runs/{job}")
    assert [s["conclusion"] for s in workflow_job["steps"]] == ["success", "failure"]


def _keys_missing(real: Any, ours: Any, path: str = "") -> list[str]:
    if not isinstance(real, dict) or not isinstance(ours, dict):
        return []
    missing = [f"{path}.{key}" for key in real if key not in ours]
    return missing + [
        m for key in real if key in ours for m in _keys_missing(real[key], ours[key], f"{path}.{key}")
    ]


@pytest.mark.shared
def test_deliveries_have_the_keys_of_real_ones(gh: GitHubSandbox, shared_dir: Path) -> None:
    _fail_lint(gh)
    hooks = shared_dir / "github/webhooks"
    real_job = json.loads(
        (hooks / "workflow_job/completed.failure.with-organization.payload.json").read_text()
    )
    real_check = json.loads((hooks / "check_run/completed.payload.json").read_text())
    ours = dict(_payloads(gh))
    # Fields of objects Spark never reads (the whole check suite, the repository's 80 URLs) are not compared.
    assert _keys_missing(real_job["workflow_job"], ours["workflow_job"]["workflow_job"]) == []
    check = {k: v for k, v in real_check["check_run"].items() if k not in ("check_suite", "app")}
    assert _keys_missing(check, ours["check_run"]["check_run"]) == []
    assert set(real_job) - {"organization"} <= set(ours["workflow_job"])


def test_the_log_is_a_redirect_to_plain_text_with_timestamps(gh: GitHubSandbox) -> None:
    job = _fail_lint(gh)
    url = f"{gh.url}/repos/acme/app/actions/jobs/{job}/logs"
    answer = requests.get(url, headers=_token(gh), allow_redirects=False, timeout=5)
    assert answer.status_code == 302
    location = answer.headers["Location"]
    text = requests.get(location, timeout=5)  # no token: the URL is signed
    assert text.status_code == 200
    assert text.headers["Content-Type"].startswith("text/plain")
    lines = text.content.decode("utf-8-sig").splitlines()
    assert all(STAMPED.match(line) for line in lines)
    bare = [STAMPED.sub("", line) for line in lines]
    assert "##[group]Run ruff check ." in bare
    assert "##[error]src/x.py:1:8: F401 `os` imported but unused" in bare
    assert bare[-2] == "##[error]Process completed with exit code 1."
    forged = requests.get(location.replace("sig=", "sig=0"), timeout=5)
    assert forged.status_code == 403


def test_an_expired_log_is_gone(gh: GitHubSandbox) -> None:
    job = _fail_lint(gh)
    gh.expire_job_log(job)
    answer = requests.get(f"{gh.url}/repos/acme/app/actions/jobs/{job}/logs", headers=_token(gh), timeout=5)
    assert answer.status_code == 410


def test_a_large_log_streams_whole(gh: GitHubSandbox) -> None:
    head = gh.head_sha("acme/app", 1)
    line = b"2026-11-28T17:02:11.1234567Z compiling a unit of the project\n"
    log = line * (8 * 1024 * 1024 // len(line))
    [job] = gh.run_workflow("acme/app", head, [Job("build", log=log, conclusion="failure")])
    answer = requests.get(
        f"{gh.url}/repos/acme/app/actions/jobs/{job}/logs", headers=_token(gh), stream=True, timeout=5
    )
    received = sum(len(chunk) for chunk in answer.iter_content(1 << 16))
    assert received == len(log) == int(answer.headers["Content-Length"])


def test_annotations_come_from_workflow_commands_and_the_failed_step(gh: GitHubSandbox) -> None:
    job = _fail_lint(gh)
    answer = requests.get(
        f"{gh.url}/repos/acme/app/check-runs/{job}/annotations", headers=_token(gh), timeout=5
    )
    rows = [(a["path"], a["start_line"], a["annotation_level"], a["message"]) for a in answer.json()]
    assert rows == [
        ("src/x.py", 1, "failure", "src/x.py:1:8: F401 `os` imported but unused"),
        (".github", 1, "failure", "Process completed with exit code 1."),
    ]


def test_an_apps_annotations_add_up_over_its_updates(gh: GitHubSandbox) -> None:
    client = gh.client(next(iter(gh.state.installations)))
    repo = client.get_repo("acme/app")
    run = repo.create_check_run(name="Spark", head_sha=gh.head_sha("acme/app", 1))
    one = {"path": "src/x.py", "start_line": 1, "end_line": 1, "annotation_level": "warning", "message": "a"}
    run.edit(output={"title": "t", "summary": "s", "annotations": [one]})
    run.edit(output={"title": "t", "summary": "s", "annotations": [{**one, "message": "b"}]})
    assert [a.message for a in run.get_annotations()] == ["a", "b"]
    assert repo.get_check_run(run.id).output.annotations_count == 2


def test_without_actions_read_the_logs_are_refused_and_workflow_job_is_not_sent(gh: GitHubSandbox) -> None:
    installation = next(iter(gh.state.installations))
    gh.set_permissions(installation, {"metadata": "read", "contents": "write", "checks": "write"})
    job = _fail_lint(gh)
    assert "workflow_job" not in [d.event for d in gh.deliveries]
    answer = requests.get(f"{gh.url}/repos/acme/app/actions/jobs/{job}/logs", headers=_token(gh), timeout=5)
    assert answer.status_code == 403
    assert answer.json()["message"] == "Resource not accessible by integration"
    annotations = requests.get(
        f"{gh.url}/repos/acme/app/check-runs/{job}/annotations", headers=_token(gh), timeout=5
    )
    assert annotations.status_code == 200
    token = gh.integration().get_access_token(installation)
    assert "actions" not in token.permissions


@pytest.mark.shared
def test_actions_responses_have_githubs_required_fields(gh: GitHubSandbox, shared_dir: Path) -> None:
    spec = json.loads((shared_dir / "github/openapi/api.github.com.json").read_text())
    job = _fail_lint(gh)
    headers = _token(gh)
    run_id = gh.state.jobs[job].run_id
    calls = [
        # GitHub's 2020 description lists this one's answer under 202.
        ("/repos/{owner}/{repo}/actions/jobs/{job_id}", f"/repos/acme/app/actions/jobs/{job}", "202"),
        ("/repos/{owner}/{repo}/actions/runs/{run_id}", f"/repos/acme/app/actions/runs/{run_id}", "200"),
        (
            "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs",
            f"/repos/acme/app/actions/runs/{run_id}/jobs",
            "200",
        ),
        ("/repos/{owner}/{repo}/check-runs/{check_run_id}", f"/repos/acme/app/check-runs/{job}", "200"),
        (
            "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations",
            f"/repos/acme/app/check-runs/{job}/annotations",
            "200",
        ),
    ]
    for path, url, status in calls:
        data = requests.get(gh.url + url, headers=headers, timeout=5).json()
        schema = response_schema(spec, path, "get", status)
        assert missing_required(data, schema, spec) == [], path
