"""RQ entry points, enqueued by dotted path from the web process (see the job table in docs/architecture.md).

For now each one only records that it ran (a JSON line on ``spark:jobs:ran``); the fix and review flows
replace these bodies.
"""

from __future__ import annotations

from typing import Any

import orjson
from rq import get_current_job

RAN_KEY = "spark:jobs:ran"


def _record(name: str, **kwargs: Any) -> None:
    job = get_current_job()
    if job is None:
        raise RuntimeError(f"workers.jobs.{name} must run inside an RQ job")
    job.connection.rpush(RAN_KEY, orjson.dumps({"job": name, "job_id": job.id, "kwargs": kwargs}))


def review(pr: dict[str, Any], trigger: str) -> None:
    """Review a pull request's head (automatic on open/push, or forced by ``/spark review``)."""
    _record("review", pr=pr, trigger=trigger)


def command(pr: dict[str, Any], command: dict[str, Any]) -> None:
    """Run a ``/spark`` command from a PR comment or a review thread."""
    _record("command", pr=pr, command=command)


def cancel(pr: dict[str, Any], reason: str) -> None:
    """Cancel pending and running work on a pull request (closed, merged)."""
    _record("cancel", pr=pr, reason=reason)


def installation(installation_id: int, action: str, account: str, repositories: list[str]) -> None:
    """Record or forget an installation and the repositories it covers."""
    _record(
        "installation",
        installation_id=installation_id,
        action=action,
        account=account,
        repositories=repositories,
    )


def check_run(pr: dict[str, Any], check_run_id: int, action: str, identifier: str) -> None:
    """Re-run Spark's check (rerequested) or act on its button (requested_action)."""
    _record("check_run", pr=pr, check_run_id=check_run_id, action=action, identifier=identifier)
