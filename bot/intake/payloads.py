"""One typed struct per event Spark acts on: the fields its handlers read, decoded straight from the body.

A ``pull_request`` delivery is about 25 KB, of which Spark reads a dozen fields. Decoding into these structs
builds only those (the rest is checked as JSON and skipped): less than half the CPU of building the whole
payload (``python -m bench intake_costs`` prints both), and far fewer objects for the garbage collector.
A field a handler needs is required here, with its type, so a delivery without it is refused by msgspec with
the field's path (``Expected `int`, got `str` - at `$.pull_request.number```) and handlers read attributes.
Fields a handler only consults (who wrote a comment, which line) may be absent or null.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

# JSON numbers as the job arguments can carry them (job arguments travel as JSON, 64-bit integers at most).
Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class Fields(msgspec.Struct, frozen=True, kw_only=True):
    """Base of the payload structs: immutable, unknown fields skipped, required fields in any order."""


class User(Fields, frozen=True, kw_only=True):
    """A user, bot or organization account."""

    login: str
    type: str | None = None


class InstallationRef(Fields, frozen=True, kw_only=True):
    """The App installation a delivery is for."""

    id: Int


class InstallationAccount(InstallationRef, frozen=True, kw_only=True):
    """The installation an ``installation`` event is about, with the account it is installed on."""

    account: User


class Repository(Fields, frozen=True, kw_only=True):
    """The repository a delivery is about."""

    name: str
    owner: User


class RepositoryName(Fields, frozen=True, kw_only=True):
    """A repository an installation covers, as installation events list them."""

    full_name: str


class Commit(Fields, frozen=True, kw_only=True):
    """A branch tip of a pull request (``head`` or ``base``)."""

    sha: str


class PullRequest(Fields, frozen=True, kw_only=True):
    """A pull request."""

    number: Int
    head: Commit
    user: User | None = None


class Issue(Fields, frozen=True, kw_only=True):
    """An issue, or a pull request seen as an issue (then ``pull_request`` is set)."""

    number: Int
    user: User | None = None
    pull_request: dict[str, Any] | None = None


class Comment(Fields, frozen=True, kw_only=True):
    """A comment in a pull request's conversation."""

    id: Int
    body: str
    user: User
    created_at: str | None = None
    author_association: str | None = None
    performed_via_github_app: dict[str, Any] | None = None


class ReviewComment(Comment, frozen=True, kw_only=True):
    """A comment in a review thread: a comment on a file's lines, maybe a reply in its thread."""

    path: str
    line: Int | None = None
    start_line: Int | None = None
    side: str | None = None
    in_reply_to_id: Int | None = None


class App(Fields, frozen=True, kw_only=True):
    """The App that owns a check run (``github-actions`` for a workflow's job)."""

    id: Int | None = None
    slug: str | None = None


class CheckRun(Fields, frozen=True, kw_only=True):
    """A check run."""

    id: Int
    head_sha: str
    name: str = ""
    conclusion: str | None = None
    app: App | None = None
    external_id: str | None = None
    # Items are read one by one: an attachment that names no pull request number means "not attached"
    # (the check run is then ignored, not refused).
    pull_requests: list[Any] = []


class RequestedAction(Fields, frozen=True, kw_only=True):
    """The button pressed on a check run."""

    identifier: str | None = None


class Event(Fields, frozen=True, kw_only=True):
    """Any delivery: only its action is read (an event no handler acts on needs nothing else)."""

    # Any: a malformed action makes an event "not acted on", not a bad delivery.
    action: Any = None


class RepositoryEvent(Event, frozen=True, kw_only=True):
    """A delivery about a repository, for the App installation that receives it (when it is one)."""

    installation: InstallationRef | None = None
    repository: Repository
    sender: User | None = None


class PullRequestEvent(RepositoryEvent, frozen=True, kw_only=True):
    """``pull_request``: opened, pushed to, closed, ..."""

    pull_request: PullRequest


class IssueCommentEvent(RepositoryEvent, frozen=True, kw_only=True):
    """``issue_comment``: a comment in an issue's or a pull request's conversation."""

    issue: Issue
    comment: Comment


class ReviewCommentEvent(RepositoryEvent, frozen=True, kw_only=True):
    """``pull_request_review_comment``: a comment in a review thread."""

    pull_request: PullRequest
    comment: ReviewComment


class CheckRunEvent(RepositoryEvent, frozen=True, kw_only=True):
    """``check_run``: a check finished, a re-run requested, or a button pressed on a check run."""

    check_run: CheckRun
    requested_action: RequestedAction | None = None


class WorkflowStep(Fields, frozen=True, kw_only=True):
    """One step of an Actions job."""

    name: str = ""
    conclusion: str | None = None


class WorkflowJob(Fields, frozen=True, kw_only=True):
    """A GitHub Actions job; its check run has the same id."""

    id: Int
    head_sha: str
    name: str = ""
    conclusion: str | None = None
    steps: list[WorkflowStep] = []


class WorkflowJobEvent(RepositoryEvent, frozen=True, kw_only=True):
    """``workflow_job``: an Actions job queued, started or finished."""

    workflow_job: WorkflowJob


class InstallationEvent(Event, frozen=True, kw_only=True):
    """``installation``: the App installed, removed, suspended, or granted new permissions."""

    installation: InstallationAccount
    repositories: list[RepositoryName] = []


class InstallationRepositoriesEvent(Event, frozen=True, kw_only=True):
    """``installation_repositories``: repositories added to or removed from an installation."""

    installation: InstallationAccount
    repositories_added: list[RepositoryName] = []
    repositories_removed: list[RepositoryName] = []
