"""GitHub Actions in the local GitHub: workflow runs and jobs, their check runs, annotations and logs, the
deliveries a finished job fires, and the permission an installation needs to read them."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import unquote

from sandbox.github.shapes import APP_PERMISSIONS
from sandbox.github.state import CheckRun, Repo, StateError, WorkflowJob, WorkflowRun, utcnow

if TYPE_CHECKING:
    from sandbox.github.service import GitHub

# GitHub's own App that owns the check run of every Actions job.
ACTIONS_APP = "github-actions"
# "This link expires after 1 minute" (https://docs.github.com/rest/actions/workflow-jobs#download-job-logs-for-a-workflow-run).
LOG_URL_TTL = 60.0
LOG_CHUNK = 64 * 1024
_COMMAND = re.compile(
    r"^::(?P<kind>error|warning|notice|group|endgroup|debug)(?: (?P<props>[^:]*))?::(?P<text>.*)$"
)
_LEVELS = {"error": "failure", "warning": "warning", "notice": "notice"}
# Signs the log URLs this process hands out (the blob store's shared access signature).
_LOG_KEY = secrets.token_bytes(16)


@dataclass(frozen=True)
class Step:
    """One step of a job as a test describes it: its name, what it printed, how it ended."""

    name: str
    output: str = ""
    conclusion: str = "success"
    exit_code: int = 1
    command: str = ""


@dataclass(frozen=True)
class Job:
    """One job to run: its steps, or a ready-made log (bytes as GitHub serves them)."""

    name: str
    steps: Sequence[Step] = ()
    log: bytes | None = None
    annotations: Sequence[Mapping[str, object]] = field(default_factory=tuple)
    conclusion: str | None = None  # default: failure when a step failed, else success


def has_permission(gh: GitHub, installation_id: int, name: str, level: str = "read") -> bool:
    """Whether an installation was granted ``name`` at ``level`` (write includes read)."""
    granted = gh.state.permissions.get(installation_id, APP_PERMISSIONS).get(name)
    return granted == "write" or (granted == level == "read")


def require(gh: GitHub, installation_id: int, name: str, level: str = "read") -> None:
    """GitHub's answer to a call the installation's permissions do not cover."""
    if not has_permission(gh, installation_id, name, level):
        raise StateError(403, "Resource not accessible by integration")


class _Clock:
    """Timestamps for a job's log lines, each a little later than the one before."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def stamp(self) -> str:
        self.now += timedelta(microseconds=1700)
        return self.now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.now.microsecond:06d}0Z "


def job_log(steps: Sequence[Step]) -> tuple[bytes, list[dict[str, object]]]:
    """A job's log as GitHub writes it, and the annotations its workflow commands and failures make."""
    clock = _Clock()
    out: list[str] = []
    annotations: list[dict[str, object]] = []

    def emit(text: str) -> None:
        out.append(clock.stamp() + text)

    emit("Current runner version: '2.321.0'")
    emit("##[group]Runner Image")
    emit("Image: ubuntu-24.04")
    emit("##[endgroup]")
    for step in steps:
        emit(f"##[group]{step.name}")
        if step.command:
            emit(step.command)
            emit("shell: /usr/bin/bash -e {0}")
        emit("##[endgroup]")
        for line in step.output.splitlines():
            command = _COMMAND.match(line)
            if command is None:
                emit(line)
                continue
            kind, text = command["kind"], unquote(command["text"])
            if kind == "endgroup":
                emit("##[endgroup]")
                continue
            first, *rest = text.split("\n")
            emit(f"##[{kind}]{first}")
            for more in rest:
                emit(more)
            if kind in _LEVELS:
                annotations.append(_annotation(kind, text, command["props"] or ""))
        if step.conclusion == "failure":
            message = f"Process completed with exit code {step.exit_code}."
            emit(f"##[error]{message}")
            annotations.append(
                {
                    "path": ".github",
                    "start_line": 1,
                    "end_line": 1,
                    "annotation_level": "failure",
                    "message": message,
                }
            )
    emit("Cleaning up orphan processes")
    return ("\ufeff" + "\n".join(out) + "\n").encode(), annotations


def _annotation(kind: str, text: str, props: str) -> dict[str, object]:
    fields = dict(part.split("=", 1) for part in props.split(",") if "=" in part)
    line = int(fields.get("line", "1"))
    annotation: dict[str, object] = {
        "path": fields.get("file", ".github"),
        "start_line": line,
        "end_line": int(fields.get("endLine", str(line))),
        "annotation_level": _LEVELS[kind],
        "message": text,
        "title": fields.get("title"),
    }
    if "col" in fields:
        annotation["start_column"] = int(fields["col"])
        annotation["end_column"] = int(fields.get("endColumn", fields["col"]))
    return annotation


def run_workflow(
    gh: GitHub,
    repo: Repo,
    head_sha: str,
    jobs: Sequence[Job],
    *,
    name: str = "CI",
    event: str = "pull_request",
    sender: str = "octocat",
) -> WorkflowRun:
    """Run a workflow to its end on ``head_sha``: each job's check run, log and annotations stored, then the
    deliveries GitHub sends (``workflow_job`` and ``check_run`` completed per job, ``workflow_run`` last)."""
    branch = next(
        (
            pr.head_ref
            for pr in gh.state.pulls.values()
            if pr.repo == repo.full_name and gh.state.head_sha(pr) == head_sha
        ),
        repo.default_branch,
    )
    with gh.state.lock:
        run = WorkflowRun(
            gh.state.next_id(),
            repo.full_name,
            name,
            f".github/workflows/{name.lower()}.yml",
            head_sha,
            branch,
            event,
        )
        gh.state.workflow_runs[run.id] = run
        made: list[WorkflowJob] = []
        for spec in jobs:
            log, annotations = (spec.log, []) if spec.log is not None else job_log(spec.steps)
            failed = any(step.conclusion == "failure" for step in spec.steps)
            conclusion = spec.conclusion or ("failure" if failed else "success")
            job = WorkflowJob(
                gh.state.next_id(),
                run.id,
                repo.full_name,
                spec.name,
                head_sha,
                branch,
                conclusion,
                [
                    {
                        "name": step.name,
                        "status": "completed",
                        "conclusion": step.conclusion,
                        "number": number,
                    }
                    for number, step in enumerate(spec.steps, 1)
                ],
                log,
            )
            gh.state.jobs[job.id] = job
            check = CheckRun(
                job.id,
                repo.full_name,
                head_sha,
                spec.name,
                "completed",
                conclusion,
                {"title": None, "summary": None, "text": None},
                [],
                None,
                f"{gh.shapes.html}/{repo.full_name}/actions/runs/{run.id}/job/{job.id}",
                completed_at=utcnow(),
                app_slug=ACTIONS_APP,
                annotations=[*annotations, *(dict(a) for a in spec.annotations)],
            )
            gh.state.check_runs[check.id] = check
            made.append(job)
        run.conclusion = "failure" if any(job.conclusion == "failure" for job in made) else "success"
    for job in made:
        if repo.installation_id is not None and has_permission(gh, repo.installation_id, "actions"):
            # "To subscribe to this event, a GitHub App must have at least read-level access for the
            # "Actions" repository permission." (https://docs.github.com/webhooks/webhook-events-and-payloads#workflow_job)
            gh.emit(
                "workflow_job",
                repo,
                sender,
                {"action": "completed", "workflow_job": gh.shapes.workflow_job(job)},
            )
        check = gh.state.check_runs[job.id]
        gh.emit("check_run", repo, sender, {"action": "completed", "check_run": gh.shapes.check_run(check)})
    if repo.installation_id is not None and has_permission(gh, repo.installation_id, "actions"):
        gh.emit(
            "workflow_run", repo, sender, {"action": "completed", "workflow_run": gh.shapes.workflow_run(run)}
        )
    return run


def _signature(job_id: int, expires: int) -> str:
    return hmac.new(_LOG_KEY, f"{job_id}:{expires}".encode(), hashlib.sha256).hexdigest()


def log_location(gh: GitHub, job: WorkflowJob) -> str:
    """Where ``…/jobs/{id}/logs`` redirects: a signed URL that needs no token and expires in a minute."""
    expires = int(time.time() + LOG_URL_TTL)
    return f"{gh.shapes.api}/_blobs/job-logs/{job.id}?se={expires}&sig={_signature(job.id, expires)}"


def check_log_url(job_id: int, expires: str, signature: str) -> None:
    """Refuse a log URL that was not signed here or has expired (the blob store's 403)."""
    if not expires.isdigit() or int(expires) < time.time():
        raise StateError(403, "Server failed to authenticate the request (the signature has expired)")
    if not hmac.compare_digest(signature, _signature(job_id, int(expires))):
        raise StateError(403, "Server failed to authenticate the request")


def log_chunks(log: bytes) -> Iterator[bytes]:
    """A log as the blob store streams it."""
    for start in range(0, len(log), LOG_CHUNK):
        yield log[start : start + LOG_CHUNK]


def job_of(gh: GitHub, repo: Repo, job_id: int) -> WorkflowJob:
    """A job of the repository, else GitHub's 404."""
    job = gh.state.jobs.get(job_id)
    if job is None or job.repo != repo.full_name:
        raise StateError(404, "Not Found")
    return job


def annotations_of(run: CheckRun) -> list[dict[str, object]]:
    """A check run's annotations as ``GET …/check-runs/{id}/annotations`` lists them."""
    return [
        {
            "path": a.get("path"),
            "blob_href": f"https://github.com/{run.repo}/blob/{run.head_sha}/{a.get('path')}",
            "start_line": a.get("start_line"),
            "start_column": a.get("start_column"),
            "end_line": a.get("end_line"),
            "end_column": a.get("end_column"),
            "annotation_level": a.get("annotation_level"),
            "title": a.get("title") or "",
            "message": a.get("message"),
            "raw_details": a.get("raw_details"),
        }
        for a in run.annotations
    ]
