"""Check runs: created and updated by the App (body limits apply), listed per commit."""

from __future__ import annotations

from flask import Blueprint, Response, request

from sandbox.github.actions import annotations_of, require
from sandbox.github.routes.common import body, github, installation_id, json_response, page, repo_for
from sandbox.github.service import GitHub
from sandbox.github.state import CheckRun, Repo, StateError

blueprint = Blueprint("checks", __name__)


@blueprint.post("/repos/<owner>/<name>/check-runs")
def create_check_run(owner: str, name: str) -> Response:
    repo = repo_for(owner, name, write=True)
    gh = github()
    return json_response(gh.shapes.check_run(gh.create_check_run(repo, body())), 201)


@blueprint.patch("/repos/<owner>/<name>/check-runs/<int:run_id>")
def update_check_run(owner: str, name: str, run_id: int) -> Response:
    repo = repo_for(owner, name, write=True)
    gh = github()
    run = _run_of(gh, repo.full_name, run_id)
    gh.update_check_run(run, body())
    return json_response(gh.shapes.check_run(run))


@blueprint.get("/repos/<owner>/<name>/check-runs/<int:run_id>")
def get_check_run(owner: str, name: str, run_id: int) -> Response:
    repo = repo_for(owner, name)
    gh = github()
    require(gh, installation_id(), "checks")
    run = _run_of(gh, repo.full_name, run_id)
    return json_response(gh.shapes.check_run(run))


@blueprint.get("/repos/<owner>/<name>/check-runs/<int:run_id>/annotations")
def list_annotations(owner: str, name: str, run_id: int) -> Response:
    """A check run's annotations, paged (`checks: read`)."""
    repo = repo_for(owner, name)
    gh = github()
    require(gh, installation_id(), "checks")
    run = _run_of(gh, repo.full_name, run_id)
    return page(annotations_of(run), lambda annotation: annotation)


def check_runs_for(repo: Repo, ref: str) -> Response:
    """`GET …/commits/{ref}/check-runs`, newest first, optionally filtered by `check_name`."""
    gh = github()
    sha = gh.state.resolve_ref(repo, ref)
    wanted = request.args.get("check_name")
    runs = [
        r
        for r in gh.state.check_runs.values()
        if r.repo == repo.full_name and r.head_sha == sha and (wanted is None or r.name == wanted)
    ]
    runs.sort(key=lambda r: -r.id)
    return json_response({"total_count": len(runs), "check_runs": [gh.shapes.check_run(r) for r in runs]})


def _run_of(gh: GitHub, full_name: str, run_id: int) -> CheckRun:
    """Return the check run ``run_id`` of ``full_name``; 404 as GitHub answers for another repository's."""
    run = gh.state.check_runs.get(run_id)
    if run is None or run.repo != full_name:
        raise StateError(404, "Not Found")
    return run
