"""Small, JSON-able references that cross the queue: what a job needs to rebuild its context, nothing more.

The web process builds these from a webhook payload (``from_payload`` functions live with the handlers) and
enqueues ``as_dict()``; a worker turns the dict back with ``from_dict``. Never the whole payload.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Self


class _JobArg:
    """Mixin: round-trip a frozen dataclass through plain JSON types."""

    def as_dict(self) -> dict[str, Any]:
        """Return the fields as a JSON-able dict."""
        # Every field is a scalar: no deep copy (``dataclasses.asdict`` costs ~70 us on the intake path).
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Build from ``as_dict()`` output, ignoring keys this version does not know."""
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True, slots=True)
class PullRequestRef(_JobArg):
    """Which pull request, in which installation, at which head (``head_sha`` "" when the event lacks it)."""

    installation_id: int
    owner: str
    repo: str
    number: int
    head_sha: str = ""
    delivery_id: str = ""

    @property
    def full_name(self) -> str:
        """Return ``owner/repo``."""
        return f"{self.owner}/{self.repo}"

    @property
    def key(self) -> str:
        """Return a Redis-safe key naming this pull request across heads."""
        return f"{self.installation_id}:{self.owner}/{self.repo}#{self.number}"

    @property
    def head_key(self) -> str:
        """Return a Redis-safe key naming the head commit in its repository (whichever pull request)."""
        return f"{self.installation_id}:{self.owner}/{self.repo}@{self.head_sha}"


@dataclass(frozen=True, slots=True)
class CheckRef(_JobArg):
    """A failed check: its run (an Actions job's run has the job's id), name, conclusion and failed steps."""

    check_run_id: int
    name: str
    conclusion: str
    # An Actions job: its log can be read at /actions/jobs/{check_run_id}/logs.
    actions_job: bool = False
    failed_steps: str = ""  # the failed steps' names, one a line (from workflow_job)


@dataclass(frozen=True, slots=True)
class CommandRef(_JobArg):
    """A ``/spark`` command from a comment: what was asked, by whom, and where (for threads: which lines)."""

    name: str
    text: str
    comment_id: int
    author: str
    # "issue_comment" (PR conversation), "review_comment" (a diff thread) or "check_run" (a fix asked from
    # Spark's CI check run: its Fix CI button or auto mode; ``comment_id`` is then that check run's id).
    kind: str = "issue_comment"
    path: str | None = None
    line: int | None = None
    start_line: int | None = None
    side: str | None = None
    # For review comments: the thread's top-level comment id (GitHub replies only to top-level comments).
    thread_id: int | None = None
    created_at: str = ""
    # The word typed after /spark when it is no command Spark knows (the command is then help).
    unknown: str = ""

    def url(self, web: str, pr: PullRequestRef) -> str:
        """Return the comment's address on ``web``, GitHub's site (``GITHUB_URL``, an Enterprise host)."""
        if self.kind == "check_run":
            return f"{web}/{pr.full_name}/runs/{self.comment_id}"
        anchor = "discussion_r" if self.kind == "review_comment" else "issuecomment-"
        return f"{web}/{pr.full_name}/pull/{pr.number}#{anchor}{self.comment_id}"


# Spark's check runs carry their pull request's number in ``external_id``: GitHub leaves ``pull_requests``
# empty for a check run on a fork's head (https://docs.github.com/rest/checks/runs), so a click on the run's
# Re-run or "Apply safe fixes" would otherwise not say which pull request it is about.
_CHECK_RUN_PREFIX = "spark-pr-"


def check_run_external_id(number: int, job_id: str) -> str:
    """Return the ``external_id`` of Spark's check run for pull request ``number`` made by job ``job_id``."""
    return f"{_CHECK_RUN_PREFIX}{number}:{job_id}"


def pull_number_of_check_run(external_id: str) -> int | None:
    """Return the pull request number ``check_run_external_id`` put in ``external_id``, if it is one."""
    number, colon, _ = external_id.removeprefix(_CHECK_RUN_PREFIX).partition(":")
    if not external_id.startswith(_CHECK_RUN_PREFIX) or not colon or not number.isascii():
        return None
    return int(number) if number.isdigit() and int(number) > 0 else None
