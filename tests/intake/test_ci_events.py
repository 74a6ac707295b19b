"""A failed check or Actions job on a pull request's head queues the CI job with what the worker needs."""

from __future__ import annotations

import copy
import json
from typing import Any

import redis

from bot import keys
from tests.conftest import FIXTURES, Post
from tests.stories import queued_jobs

HOOKS = FIXTURES / "webhooks"


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HOOKS / name).read_text())
    return data


def test_a_failed_actions_check_queues_the_ci_job(post: Post, redis_conn: redis.Redis) -> None:
    payload = _load("check_run/completed.failure.json")
    assert post("check_run", payload).status_code == 202
    [(_, job)] = queued_jobs(redis_conn)
    assert job.func_name == "workers.jobs.ci_failure"
    run = payload["check_run"]
    assert job.kwargs["check"] == {
        "check_run_id": run["id"],
        "name": "lint",
        "conclusion": "failure",
        "actions_job": True,
        "failed_steps": "",
    }
    assert job.kwargs["pr"]["number"] == run["pull_requests"][0]["number"]
    assert job.kwargs["pr"]["head_sha"] == run["head_sha"]


def test_another_apps_timed_out_check_is_read_without_a_log(post: Post, redis_conn: redis.Redis) -> None:
    payload = _load("check_run/completed.failure.json")
    payload["check_run"].update(conclusion="timed_out", app={"id": 9, "slug": "circleci-checks"})
    post("check_run", payload)
    [(_, job)] = queued_jobs(redis_conn)
    assert job.kwargs["check"]["conclusion"] == "timed_out"
    assert job.kwargs["check"]["actions_job"] is False


def test_passing_checks_spark_s_own_run_and_fork_heads_queue_nothing(
    post: Post, redis_conn: redis.Redis
) -> None:
    own = _load("check_run/completed.failure.json")
    own["check_run"]["external_id"] = "spark-pr-2:abc"
    for payload in (
        _load("check_run/completed.success.json"),
        own,
        _load("check_run/completed.failure.fork.json"),
    ):
        answer = post("check_run", payload)
        assert answer.json is not None and answer.json["status"] == "ignored", answer.json
    assert queued_jobs(redis_conn) == []


def test_a_failed_job_names_its_failed_steps(post: Post, redis_conn: redis.Redis) -> None:
    payload = _load("workflow_job/completed.failure.json")
    post("workflow_job", payload)
    [(_, job)] = queued_jobs(redis_conn)
    assert job.kwargs["check"]["check_run_id"] == payload["workflow_job"]["id"]
    assert job.kwargs["check"]["failed_steps"] == "Run yarn run format-check"
    assert job.kwargs["pr"]["number"] == 0
    ok = copy.deepcopy(payload)
    ok["workflow_job"]["conclusion"] = "success"
    answer = post("workflow_job", ok)
    assert answer.json is not None and answer.json["status"] == "ignored"


def test_each_failed_check_is_noted_on_its_head_as_its_delivery_is_stored(
    post: Post, redis_conn: redis.Redis
) -> None:
    # A CI job reading one failure of a head takes in the others noted there (workers.flows.ci): the note is
    # written with the delivery, before any worker runs, by both deliveries of an Actions job.
    run = _load("check_run/completed.failure.json")
    job = _load("workflow_job/completed.failure.json")
    post("check_run", run)
    post("workflow_job", job)
    installation = run["installation"]["id"]
    repo = run["repository"]["full_name"]
    noted = redis_conn.hgetall(keys.CI_FAILED.format(f"{installation}:{repo}@{run['check_run']['head_sha']}"))
    assert json.loads(noted[str(run["check_run"]["id"]).encode()])["name"] == "lint"
    wj = job["workflow_job"]
    by_job = redis_conn.hgetall(keys.CI_FAILED.format(f"{job['installation']['id']}:{repo}@{wj['head_sha']}"))
    assert json.loads(by_job[str(wj["id"]).encode()])["actions_job"] is True
    assert keys.unbounded(redis_conn) == []
