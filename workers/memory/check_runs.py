"""A job's check run: reserved in Redis before GitHub creates it, so a job that runs again never makes two."""

from __future__ import annotations

from typing import Any

import redis

from bot import keys
from bot.adapters.github_port import GitHubPort

# Written before the create call: a job that finds it ran before and may have lost the answer (its worker or
# Redis went away between GitHub's answer and the record), so it looks on the head before creating again.
PENDING = b"pending"


def open_check_run(
    conn: redis.Redis,
    github: GitHubPort,
    repo: str,
    head_sha: str,
    name: str,
    external_id: str,
    job_id: str,
    **fields: Any,
) -> tuple[int, bool]:
    """Return the id of the job's check run ``name`` on ``head_sha`` and whether it existed already.

    A new run is created with ``fields``; an existing one is the caller's to update. Only a job that ran
    before spends a request on the search: the usual path is one create between two Redis writes.
    """
    if not job_id:  # run outside RQ (a one-shot or a test): nothing runs it again
        return github.create_check_run(repo, head_sha, name, external_id=external_id, **fields), False
    key = keys.CHECK_RUN.format(job_id, head_sha, name)
    known = conn.get(key)
    if known is not None and known != PENDING:
        return int(known), True
    if known == PENDING:
        for run in github.check_runs(repo, head_sha):
            if run.name == name and run.external_id == external_id:
                conn.set(key, run.id, ex=keys.CHECK_RUN.seconds)
                return run.id, True
    conn.set(key, PENDING, ex=keys.CHECK_RUN.seconds)
    check_id = github.create_check_run(repo, head_sha, name, external_id=external_id, **fields)
    conn.set(key, check_id, ex=keys.CHECK_RUN.seconds)
    return check_id, False
