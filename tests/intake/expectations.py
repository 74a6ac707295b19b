"""The routing table, written out independently of the code under test: what each delivery must queue."""

from __future__ import annotations

import re
from typing import Any

INTERACTIVE = "spark-interactive"
REVIEW = "spark-review"

# No job: the delivery only raises a cancellation signal (a closed pull request stops its work at intake).
SIGNAL_ONLY = ("", "")

# (event, action) -> (job, queue). Comment and check-run rows have conditions, checked in ``expected_job``.
TABLE: dict[tuple[str, str], tuple[str, str]] = {
    ("pull_request", "opened"): ("workers.jobs.review", REVIEW),
    ("pull_request", "reopened"): ("workers.jobs.review", REVIEW),
    ("pull_request", "synchronize"): ("workers.jobs.review", REVIEW),
    ("pull_request", "ready_for_review"): ("workers.jobs.review", REVIEW),
    ("pull_request", "closed"): SIGNAL_ONLY,
    ("issue_comment", "created"): ("workers.jobs.command", INTERACTIVE),
    ("pull_request_review_comment", "created"): ("workers.jobs.command", INTERACTIVE),
    ("installation", "created"): ("workers.jobs.installation", INTERACTIVE),
    ("installation", "deleted"): ("workers.jobs.installation", INTERACTIVE),
    ("installation", "suspend"): ("workers.jobs.installation", INTERACTIVE),
    ("installation", "unsuspend"): ("workers.jobs.installation", INTERACTIVE),
    ("installation", "new_permissions_accepted"): ("workers.jobs.installation", INTERACTIVE),
    ("installation_repositories", "added"): ("workers.jobs.installation", INTERACTIVE),
    ("installation_repositories", "removed"): ("workers.jobs.installation", INTERACTIVE),
    ("check_run", "rerequested"): ("workers.jobs.check_run", INTERACTIVE),
    ("check_run", "requested_action"): ("workers.jobs.check_run", INTERACTIVE),
    ("check_run", "completed"): ("workers.jobs.ci_failure", INTERACTIVE),
    ("workflow_job", "completed"): ("workers.jobs.ci_failure", INTERACTIVE),
}
FAILED = ("failure", "timed_out", "action_required")


def _by_bot(payload: dict[str, Any]) -> bool:
    user = payload["comment"]["user"]
    return (
        user.get("type") == "Bot"
        or user["login"].endswith("[bot]")
        or payload.get("sender", {}).get("type") == "Bot"
        or bool(payload["comment"].get("performed_via_github_app"))
    )


def expected_job(event: str, payload: dict[str, Any]) -> tuple[str, str] | None:
    """Return (job, queue) the routing table gives this delivery, or ``None`` when it must be ignored."""
    row = TABLE.get((event, payload.get("action", "")))
    if row is None or "installation" not in payload:
        return None
    if event in ("issue_comment", "pull_request_review_comment"):
        if event == "issue_comment" and not payload["issue"].get("pull_request"):
            return None
        command = payload["comment"]["body"].lstrip().lower().startswith("/spark")
        # A plain reply in a review thread is queued too: the job answers it when the thread is Spark's.
        reply = (
            event == "pull_request_review_comment" and payload["comment"].get("in_reply_to_id") is not None
        )
        if not (command or reply) or _by_bot(payload):
            return None
    if (event, payload["action"]) == ("check_run", "completed"):
        run = payload["check_run"]
        if run.get("conclusion") not in FAILED or not run.get("pull_requests"):
            return None
        return None if str(run.get("external_id") or "").startswith("spark-pr-") else row
    if event == "workflow_job":
        return row if payload["workflow_job"].get("conclusion") in FAILED else None
    if event == "check_run" and _check_run_number(payload["check_run"]) is None:
        return None
    return row


def _check_run_number(run: dict[str, Any]) -> int | None:
    """A check run's pull request: GitHub's list, else (a fork's head) the one Spark's external_id names."""
    if run.get("pull_requests"):
        return int(run["pull_requests"][0]["number"])
    found = re.fullmatch(r"spark-pr-([1-9][0-9]*):.*", str(run.get("external_id") or ""), re.S)
    return int(found.group(1)) if found else None


def expected_pr_number(event: str, payload: dict[str, Any]) -> int | None:
    """Return the pull request number the job must carry, if it is about one."""
    if event == "issue_comment":
        return int(payload["issue"]["number"])
    if event == "workflow_job":
        return 0  # a job names no pull request: the worker reads it from the job's check run
    if event == "check_run":
        return _check_run_number(payload["check_run"])
    if event in ("pull_request", "pull_request_review_comment"):
        return int(payload["pull_request"]["number"])
    return None
