"""The GitHub port: what the flows may ask of GitHub, the values they get back and the errors they catch.

Flows type their client as ``GitHubPort`` and import from here only. ``bot.adapters.github.Installation``
implements it over PyGithub; ``workers.recorder.RecordingInstallation`` (``spark review --dry-run``)
implements it by reading through a real client and recording the writes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from bot.core import markers
from bot.core.ci import Annotation
from bot.core.render import outbound
from bot.core.types import ReviewComment

Reaction = Literal["+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"]


class Unreadable(Exception):
    """``path`` exists but is not a regular file Spark may read; ``reason`` says what it is instead."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"`{path}`: {reason}")
        self.path = path
        self.reason = reason


class GitHubError(Exception):
    """A GitHub call failed; ``status`` is the HTTP status (0 if none) and ``message`` says why.

    ``unanswered``: the request may have reached GitHub but no answer came back (a timeout, a reset).
    """

    def __init__(self, status: int, message: str, *, unanswered: bool = False) -> None:
        super().__init__(f"GitHub answered {status}: {message}" if status else message)
        self.status = status
        self.message = message
        self.unanswered = unanswered

    @property
    def maybe_done(self) -> bool:
        """Return whether a write may have happened despite the error (a 5xx, or no answer at all)."""
        return self.unanswered or self.status >= 500


class RateLimited(GitHubError):
    """GitHub asked Spark to wait ``retry_after`` seconds (a primary or secondary rate limit)."""

    def __init__(self, status: int, message: str, retry_after: float) -> None:
        super().__init__(status, f"{message} (retry in {retry_after:.0f} s)")
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class PullInfo:
    """What the flows need to know about a pull request."""

    number: int
    title: str
    body: str
    state: str
    draft: bool
    author: str
    head_sha: str
    head_ref: str
    head_repo: str
    base_sha: str
    base_ref: str
    base_repo: str
    maintainer_can_modify: bool
    # The base repository's default branch: Spark never pushes to it.
    default_branch: str = ""
    # How many files the pull request changes (GitHub's file listing stops at 3,000 of them).
    changed_files: int = 0

    @property
    def is_fork(self) -> bool:
        """Return True when the head branch lives in another repository."""
        return self.head_repo != self.base_repo


@dataclass(frozen=True, slots=True)
class ChangedFile:
    """One file as ``GET /pulls/{n}/files`` lists it (``patch`` is None when GitHub omits it)."""

    path: str
    status: str
    previous_path: str | None
    patch: str | None
    additions: int
    deletions: int
    # The file's blob SHA at the head (the old one for a removed file); "" when GitHub sent none.
    blob: str = ""


@dataclass(frozen=True, slots=True)
class Comparison:
    """``GET /compare/{base}...{head}``: how head relates to base; the files changed since the merge base."""

    status: str  # ahead, behind, diverged or identical
    files: tuple[ChangedFile, ...]


@dataclass(frozen=True, slots=True)
class PullDiff:
    """A pull request's unified diff; ``source``: GitHub's raw diff, or rebuilt from per-file patches."""

    text: str
    source: Literal["raw", "files"]
    # Paths GitHub sent no patch for (binary or too large): the diff is incomplete for them.
    missing: tuple[str, ...] = ()
    # Rebuilt from the file listing: how many files it listed (at most 3,000, however many changed).
    listed: int = 0


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """A commit as the flows need it: its message (with trailers) and page; who wrote it, its parents, the
    files it changed against its first parent (each as a path; a rename also by its old path)."""

    sha: str
    message: str
    html_url: str
    author: str = ""
    parents: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CommentRef:
    """A posted comment: its id, page address and body."""

    id: int
    html_url: str
    body: str


@dataclass(frozen=True, slots=True)
class Committed:
    """``createCommitOnBranch`` succeeded: the new commit."""

    oid: str
    url: str


@dataclass(frozen=True, slots=True)
class BranchMoved:
    """``createCommitOnBranch`` refused: the branch no longer points at ``expected_head``."""

    expected_head: str
    message: str


@dataclass(frozen=True, slots=True)
class PushRefused:
    """``createCommitOnBranch`` refused by the branch's guard: who refused (``guard``) and the rules named.

    ``guard`` is "branch protection" (GraphQL type ``BRANCH_PROTECTION_RULE_VIOLATION``), "ruleset"
    ("Repository rule violations found") or "permissions" (``FORBIDDEN``: a fork the App may not push to).
    """

    guard: Literal["branch protection", "ruleset", "permissions"]
    rules: tuple[str, ...]
    message: str


@dataclass(frozen=True, slots=True)
class CheckInfo:
    """A check run: whose (``app``: an App's slug), on which head, how it ended, and the pull requests GitHub
    attached it to (none for a fork's head)."""

    id: int
    name: str
    head_sha: str
    status: str
    conclusion: str | None
    app: str
    pull_numbers: tuple[int, ...] = ()
    external_id: str = ""


@dataclass(frozen=True, slots=True)
class ReviewThread:
    """A review thread and its first comment (whose id replies go to)."""

    id: str
    is_resolved: bool
    is_outdated: bool
    path: str
    line: int | None
    start_line: int | None
    first_comment_id: int | None
    first_comment_body: str
    first_comment_author: str


@dataclass(frozen=True, slots=True)
class ReviewCommentInfo:
    """A review comment as the pull request's comment list shows it, with who answered and how it was met."""

    id: int
    in_reply_to_id: int | None
    author: str
    body: str
    thumbs_down: int


class MarkedComments(Protocol):
    """Conversation comments found by their hidden marker: what ``upsert_comment`` is built on."""

    def find_comment(self, repo: str, number: int, key: str) -> CommentRef | None:
        """Return Spark's earlier conversation comment carrying the ``reply`` marker of ``key``, if any."""
        ...

    def comment(self, repo: str, number: int, body: str) -> CommentRef:
        """Post a comment in the pull request's conversation."""
        ...

    def edit_comment(self, repo: str, comment_id: int, body: str) -> CommentRef:
        """Replace an issue comment's body."""
        ...


def upsert_comment(comments: MarkedComments, repo: str, number: int, key: str, body: str) -> CommentRef:
    """Post ``body`` under ``key``'s ``reply`` marker, or edit the comment carrying it (a retry posts once).

    One implementation for the client and the dry-run recorder (which records the post or the edit).
    """
    text = markers.append(body, "reply", key)
    existing = comments.find_comment(repo, number, key)
    if existing is None:
        try:
            return comments.comment(repo, number, text)
        except GitHubError as exc:
            if not exc.maybe_done:
                raise
            # A 5xx or a lost answer may hide a stored comment: look before posting again.
            existing = comments.find_comment(repo, number, key)
            if existing is None:
                return comments.comment(repo, number, text)
    if existing.body == outbound(text):
        return existing
    return comments.edit_comment(repo, existing.id, text)


class GitHubPort(Protocol):
    """What the flows may ask of GitHub: exactly the calls they make, no more.

    ``bot.adapters.github.Installation`` makes them over HTTP; ``workers.recorder.RecordingInstallation``
    reads through a real client and records the writes (a dry run makes none of them). A flow that needs
    something new from GitHub adds a method here and to both, so the recorder and the adapter's error mapping
    see it (tests/adapters/test_github_port.py checks all three agree).
    """

    @property
    def own_login(self) -> str:
        """Return the login Spark writes as: only comments by it count as Spark's memory."""
        ...

    def is_own(self, login: str) -> bool:
        """Return whether ``login`` (as REST spells it) is Spark itself."""
        ...

    # Reads

    def pull(self, repo: str, number: int) -> PullInfo:
        """Return the pull request's head, base, fork status and ``maintainer_can_modify``."""
        ...

    def pull_diff(self, repo: str, number: int) -> PullDiff:
        """Return the pull request's unified diff (rebuilt from per-file patches when GitHub refuses it)."""
        ...

    def file_text(self, repo: str, path: str, ref: str, *, max_bytes: int | None = None) -> str | None:
        """Return a file's text at ``ref``, or None when nothing is there; ``Unreadable`` if not a file."""
        ...

    def tree_paths(self, repo: str, ref: str) -> tuple[list[str], bool]:
        """Return every file path at ``ref`` and whether GitHub listed them all."""
        ...

    def archive(self, repo: str, ref: str) -> Iterator[bytes]:
        """Stream the repository's tarball at ``ref`` (gzipped tar, GitHub's archive layout) in chunks."""
        ...

    def compare(self, repo: str, base: str, head: str) -> Comparison:
        """Return how ``head`` relates to ``base`` and the files changed (with their blob SHAs)."""
        ...

    def blob(self, repo: str, sha: str) -> bytes:
        """Return a blob's bytes by its SHA."""
        ...

    def permission(self, repo: str, login: str) -> str:
        """Return ``login``'s permission on the repository: admin, maintain, write, triage, read or none."""
        ...

    def commit(self, repo: str, sha: str) -> CommitInfo:
        """Return a commit's message and page."""
        ...

    def commits_between(self, repo: str, base: str, head: str) -> list[CommitInfo]:
        """Return the commits reachable from ``head``, not from ``base``, oldest first."""
        ...

    def review_comments(self, repo: str, number: int) -> list[ReviewCommentInfo]:
        """Return every review comment of the pull request."""
        ...

    def review_threads(self, repo: str, number: int) -> list[ReviewThread]:
        """Return every review thread of the pull request with its first comment."""
        ...

    def find_review(self, repo: str, number: int, key: str) -> int | None:
        """Return the id of Spark's own review carrying the ``reply`` marker of ``key``, if any."""
        ...

    # Writes

    def react(self, repo: str, comment_id: int, content: Reaction, *, review_comment: bool = False) -> None:
        """Add a reaction to an issue comment, or to a review comment when ``review_comment``."""
        ...

    def comment(self, repo: str, number: int, body: str) -> CommentRef:
        """Post a comment in the pull request's conversation."""
        ...

    def edit_pull_body(self, repo: str, number: int, body: str) -> None:
        """Replace the pull request's description."""
        ...

    def upsert_comment(self, repo: str, number: int, key: str, body: str) -> CommentRef:
        """Post ``body`` under the ``reply`` marker of ``key``, or edit Spark's comment carrying it."""
        ...

    def reply_to_review_comment(self, repo: str, number: int, comment_id: int, body: str) -> CommentRef:
        """Reply in the thread of a top-level review comment."""
        ...

    def review(
        self,
        repo: str,
        number: int,
        *,
        commit_sha: str,
        body: str,
        comments: Sequence[ReviewComment] = (),
        event: Literal["COMMENT", "APPROVE", "REQUEST_CHANGES"] = "COMMENT",
        key: str | None = None,
    ) -> int:
        """Create a review with inline comments on ``commit_sha``; return its id."""
        ...

    def create_check_run(
        self,
        repo: str,
        head_sha: str,
        name: str,
        *,
        status: str = "in_progress",
        external_id: str = "",
        **fields: Any,
    ) -> int:
        """Create a check run on ``head_sha``; return its id."""
        ...

    def update_check_run(self, repo: str, check_run_id: int, **fields: Any) -> None:
        """Update a check run (status, conclusion, output, actions)."""
        ...

    def check_run(self, repo: str, check_run_id: int) -> CheckInfo:
        """Return one check run."""
        ...

    def check_runs(self, repo: str, sha: str) -> list[CheckInfo]:
        """Return the check runs on a commit (the latest of each name first, as GitHub lists them)."""
        ...

    def check_annotations(self, repo: str, check_run_id: int) -> list[Annotation]:
        """Return a check run's annotations (the first hundred)."""
        ...

    def job_log(self, repo: str, job_id: int) -> Iterator[bytes]:
        """Stream an Actions job's log: GitHub's redirect, then the plain text (403 without ``actions: read``,
        410 once the log has expired, both as ``GitHubError``)."""
        ...

    def commit_on_branch(
        self,
        repo: str,
        branch: str,
        *,
        expected_head: str,
        headline: str,
        body: str = "",
        additions: dict[str, bytes] | None = None,
        deletions: Sequence[str] = (),
    ) -> Committed | BranchMoved | PushRefused:
        """Commit file changes on ``branch`` unless it no longer points at ``expected_head``."""
        ...

    def resolve_thread(self, thread_id: str) -> bool:
        """Resolve a review thread; return whether GitHub now reports it resolved."""
        ...
