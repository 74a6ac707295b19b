"""The parts of GitHub's webhook payloads Spark reads, as typed structs decoded straight from the body.

A ``pull_request`` delivery is about 25 KB, of which Spark reads a dozen fields. Decoding into these structs
builds only those (the rest is checked as JSON and skipped): less than half the CPU of building the whole
payload (``python -m bench intake_costs`` prints both), and far fewer objects for the garbage collector. A
field of the wrong type is refused with its path. Every field may be absent or null: whether a delivery
without it is usable is the handler's decision.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

# JSON numbers as the job arguments can carry them (job arguments travel as JSON, 64-bit integers at most).
Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class Fields(msgspec.Struct, frozen=True):
    """Base of the payload structs: immutable, unknown fields skipped."""


class User(Fields, frozen=True):
    """A user, bot or organization account."""

    login: str | None = None
    type: str | None = None


class InstallationRef(Fields, frozen=True):
    """The App installation a delivery is for."""

    id: Int | None = None
    account: User | None = None


class Repository(Fields, frozen=True):
    """The repository a delivery is about."""

    name: str | None = None
    full_name: str | None = None
    owner: User | None = None


class Commit(Fields, frozen=True):
    """A branch tip of a pull request (``head`` or ``base``)."""

    sha: str | None = None


class PullRequest(Fields, frozen=True):
    """A pull request."""

    number: Int | None = None
    head: Commit | None = None
    merged: bool | None = None
    user: User | None = None


class Issue(Fields, frozen=True):
    """An issue, or a pull request seen as an issue (then ``pull_request`` is set)."""

    number: Int | None = None
    user: User | None = None
    pull_request: dict[str, Any] | None = None


class Comment(Fields, frozen=True):
    """A comment in a conversation or in a review thread (which adds the file, lines and thread)."""

    id: Int | None = None
    body: str | None = None
    user: User | None = None
    created_at: str | None = None
    author_association: str | None = None
    performed_via_github_app: dict[str, Any] | None = None
    path: str | None = None
    line: Int | None = None
    start_line: Int | None = None
    side: str | None = None
    in_reply_to_id: Int | None = None


class CheckRun(Fields, frozen=True):
    """A check run (the attached pull requests are checked by the handler, item by item)."""

    id: Int | None = None
    head_sha: str | None = None
    external_id: str | None = None
    pull_requests: list[Any] | None = None


class RequestedAction(Fields, frozen=True):
    """The button pressed on a check run."""

    identifier: str | None = None


class Event(Fields, frozen=True):
    """Any delivery: only its action is read (an event no handler acts on needs nothing else)."""

    # Any: a malformed action makes an event "not acted on", not a bad delivery.
    action: Any = None


class Payload(Event, frozen=True):
    """A delivery of an event Spark acts on: the union of the fields its handlers read."""

    installation: InstallationRef | None = None
    repository: Repository | None = None
    sender: User | None = None
    pull_request: PullRequest | None = None
    issue: Issue | None = None
    comment: Comment | None = None
    check_run: CheckRun | None = None
    requested_action: RequestedAction | None = None
    repositories: list[Any] | None = None
    repositories_added: list[Any] | None = None
    repositories_removed: list[Any] | None = None
