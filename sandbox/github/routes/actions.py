"""GitHub Actions: workflow runs, their jobs, and a job's log (a redirect to plain text), for installations
granted `actions: read`."""

from __future__ import annotations

from flask import Blueprint, Response, request

from sandbox.github.actions import check_log_url, job_of, log_chunks, log_location, require
from sandbox.github.routes.common import github, installation_id, json_response, repo_for
from sandbox.github.state import StateError

blueprint = Blueprint("actions", __name__)


@blueprint.get("/repos/<owner>/<name>/actions/runs/<int:run_id>")
def get_run(owner: str, name: str, run_id: int) -> Response:
    repo = repo_for(owner, name)
    gh = github()
    require(gh, installation_id(), "actions")
    run = gh.state.workflow_runs.get(run_id)
    if run is None or run.repo != repo.full_name:
        raise StateError(404, "Not Found")
    return json_response(gh.shapes.workflow_run(run))


@blueprint.get("/repos/<owner>/<name>/actions/runs/<int:run_id>/jobs")
def list_jobs(owner: str, name: str, run_id: int) -> Response:
    repo = repo_for(owner, name)
    gh = github()
    require(gh, installation_id(), "actions")
    jobs = [
        gh.shapes.workflow_job(j)
        for j in gh.state.jobs.values()
        if j.run_id == run_id and j.repo == repo.full_name
    ]
    return json_response({"total_count": len(jobs), "jobs": jobs})


@blueprint.get("/repos/<owner>/<name>/actions/jobs/<int:job_id>")
def get_job(owner: str, name: str, job_id: int) -> Response:
    repo = repo_for(owner, name)
    gh = github()
    require(gh, installation_id(), "actions")
    return json_response(gh.shapes.workflow_job(job_of(gh, repo, job_id)))


@blueprint.get("/repos/<owner>/<name>/actions/jobs/<int:job_id>/logs")
def job_logs(owner: str, name: str, job_id: int) -> Response:
    """`302 Found` to a URL that serves the log as plain text for a minute; `410 Gone` once it has expired."""
    repo = repo_for(owner, name)
    gh = github()
    require(gh, installation_id(), "actions")
    job = job_of(gh, repo, job_id)
    if job.log_expired:
        raise StateError(410, "Gone")
    response = Response(status=302)
    response.headers["Location"] = log_location(gh, job)
    return response


@blueprint.get("/_blobs/job-logs/<int:job_id>")
def log_blob(job_id: int) -> Response:
    """The blob store behind the redirect: no token, a signature that expires; the log streamed as text."""
    check_log_url(job_id, request.args.get("se", ""), request.args.get("sig", ""))
    job = github().state.jobs.get(job_id)
    if job is None:
        raise StateError(404, "The specified blob does not exist.")
    response = Response(log_chunks(job.log), mimetype="text/plain")
    response.headers["Content-Length"] = str(len(job.log))
    return response
