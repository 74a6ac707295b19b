"""The dry-run recorder: the flows' ``GitHubPort`` reading through a real client and recording every write.

``spark review PR_URL`` (``workers.oneshot``) runs the worker's flows with it: reads go to GitHub unchanged,
each write is recorded as a ``Write`` and, unless ``dry_run``, then made by the real client. It implements the
port rather than subclassing the client, so a call the port gains cannot slip past it unrecorded.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.adapters.github import Installation
from bot.adapters.github_port import (
    BranchMoved,
    CheckInfo,
    CommentRef,
    CommitInfo,
    Committed,
    Comparison,
    PullDiff,
    PullInfo,
    PushRefused,
    Reaction,
    ReviewCommentInfo,
    ReviewThread,
    upsert_comment,
)
from bot.core.ci import Annotation
from bot.core.diff import format_patch
from bot.core.types import ReviewComment

DRY_RUN_URL = "(dry run: not committed)"


@dataclass(frozen=True, slots=True)
class Write:
    """One write the flow made (or, on a dry run, would have made)."""

    kind: str
    target: str
    body: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


class RecordingInstallation:
    """A ``GitHubPort`` that records every write, and on ``dry_run`` makes none of them.

    Reads go to ``client`` unchanged. Comment id 0 stands for "no comment" (a dry run posts no request
    comment), so there is nothing to react to. ``operator`` is who runs the command: Spark acts as them.
    """

    def __init__(self, client: Installation, *, dry_run: bool, operator: str) -> None:
        self.client = client
        self.dry_run = dry_run
        self.operator = operator
        self.writes: list[Write] = []

    @property
    def own_login(self) -> str:
        """Return the operator's login: what Spark writes here is theirs."""
        return self.operator

    def is_own(self, login: str) -> bool:
        """Return whether ``login`` is the operator."""
        return bool(self.operator) and login == self.operator

    # Reads, through the real client ----------------------------------------------------------------------

    def pull(self, repo: str, number: int) -> PullInfo:
        """Read the pull request."""
        return self.client.pull(repo, number)

    def pull_diff(self, repo: str, number: int) -> PullDiff:
        """Read the pull request's diff."""
        return self.client.pull_diff(repo, number)

    def file_text(self, repo: str, path: str, ref: str, *, max_bytes: int | None = None) -> str | None:
        """Read a file at ``ref``."""
        return self.client.file_text(repo, path, ref, max_bytes=max_bytes)

    def tree_paths(self, repo: str, ref: str) -> tuple[list[str], bool]:
        """Read every file path at ``ref``."""
        return self.client.tree_paths(repo, ref)

    def archive(self, repo: str, ref: str) -> Iterator[bytes]:
        """Read the repository's tarball at ``ref``."""
        return self.client.archive(repo, ref)

    def compare(self, repo: str, base: str, head: str) -> Comparison:
        """Read what changed between two commits."""
        return self.client.compare(repo, base, head)

    def blob(self, repo: str, sha: str) -> bytes:
        """Read a blob by its SHA."""
        return self.client.blob(repo, sha)

    def permission(self, repo: str, login: str) -> str:
        """Return the operator's permission as admin (its credentials decide), anyone else's from GitHub."""
        if login == self.operator:
            return "admin"
        return self.client.permission(repo, login)

    def commit(self, repo: str, sha: str) -> CommitInfo:
        """Read a commit."""
        return self.client.commit(repo, sha)

    def commits_between(self, repo: str, base: str, head: str) -> list[CommitInfo]:
        """Read the commits between ``base`` and ``head``."""
        return self.client.commits_between(repo, base, head)

    def review_comments(self, repo: str, number: int) -> list[ReviewCommentInfo]:
        """Read the pull request's review comments."""
        return self.client.review_comments(repo, number)

    def review_threads(self, repo: str, number: int) -> list[ReviewThread]:
        """Read the pull request's review threads."""
        return self.client.review_threads(repo, number)

    def find_review(self, repo: str, number: int, key: str) -> int | None:
        """Find Spark's review carrying the ``reply`` marker of ``key``."""
        return self.client.find_review(repo, number, key)

    def find_comment(self, repo: str, number: int, key: str) -> CommentRef | None:
        """Find Spark's conversation comment carrying ``key``'s ``reply`` marker (what upserts edit)."""
        return self.client.find_comment(repo, number, key)

    # Writes, recorded -----------------------------------------------------------------------------------

    def react(self, repo: str, comment_id: int, content: Reaction, *, review_comment: bool = False) -> None:
        """Record and make a reaction on a real comment (a dry run has none to react to)."""
        if comment_id <= 0:
            return
        self.writes.append(Write("reaction", f"comment {comment_id}", content))
        if not self.dry_run:
            self.client.react(repo, comment_id, content, review_comment=review_comment)

    def comment(self, repo: str, number: int, body: str) -> CommentRef:
        """Record a conversation comment."""
        self.writes.append(Write("comment", f"{repo}#{number}", body))
        if self.dry_run:
            return CommentRef(id=0, html_url="", body=body)
        return self.client.comment(repo, number, body)

    def edit_comment(self, repo: str, comment_id: int, body: str) -> CommentRef:
        """Record an edit of a conversation comment."""
        self.writes.append(Write("comment edit", f"{repo} comment {comment_id}", body))
        if self.dry_run:
            return CommentRef(id=comment_id, html_url="", body=body)
        return self.client.edit_comment(repo, comment_id, body)

    def edit_pull_body(self, repo: str, number: int, body: str) -> None:
        """Record a new description of the pull request."""
        self.writes.append(Write("description", f"{repo}#{number}", body))
        if not self.dry_run:
            self.client.edit_pull_body(repo, number, body)

    def upsert_comment(self, repo: str, number: int, key: str, body: str) -> CommentRef:
        """Record the post, or the edit, of the comment carrying the ``reply`` marker of ``key``."""
        return upsert_comment(self, repo, number, key, body)

    def reply_to_review_comment(self, repo: str, number: int, comment_id: int, body: str) -> CommentRef:
        """Record a reply in a review thread."""
        self.writes.append(Write("thread reply", f"{repo}#{number} thread {comment_id}", body))
        if self.dry_run:
            return CommentRef(id=0, html_url="", body=body)
        return self.client.reply_to_review_comment(repo, number, comment_id, body)

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
        """Record a review with its inline comments."""
        inline = [
            {"path": c.path, "line": c.line, "start_line": c.start_line, "side": c.side, "body": c.body}
            for c in comments
        ]
        self.writes.append(
            Write(
                "review", f"{repo}#{number} at {commit_sha[:7]}", body, {"event": event, "comments": inline}
            )
        )
        if self.dry_run:
            return 0
        return self.client.review(
            repo, number, commit_sha=commit_sha, body=body, comments=comments, event=event, key=key
        )

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
        """Record a new check run."""
        self.writes.append(Write("check run", f"{repo} {name} on {head_sha[:7]}", status))
        if self.dry_run:
            return 0
        return self.client.create_check_run(
            repo, head_sha, name, status=status, external_id=external_id, **fields
        )

    def update_check_run(self, repo: str, check_run_id: int, **fields: Any) -> None:
        """Record a check run's update (its conclusion and summary)."""
        output = fields.get("output") or {}
        summary = f"{output.get('title', '')}\n\n{output.get('summary', '')}".strip()
        conclusion = {"conclusion": fields.get("conclusion"), "status": fields.get("status")}
        self.writes.append(Write("check run update", f"{repo} check run {check_run_id}", summary, conclusion))
        if not self.dry_run:
            self.client.update_check_run(repo, check_run_id, **fields)

    def check_run(self, repo: str, check_run_id: int) -> CheckInfo:
        """Read one check run."""
        return self.client.check_run(repo, check_run_id)

    def check_runs(self, repo: str, sha: str) -> list[CheckInfo]:
        """Read a commit's check runs."""
        return self.client.check_runs(repo, sha)

    def check_annotations(self, repo: str, check_run_id: int) -> list[Annotation]:
        """Read a check run's annotations."""
        return self.client.check_annotations(repo, check_run_id)

    def job_log(self, repo: str, job_id: int) -> Iterator[bytes]:
        """Read an Actions job's log as it streams."""
        return self.client.job_log(repo, job_id)

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
        """Record a commit with the diff of each file against ``expected_head``."""
        diffs = {
            path: format_patch(
                path, self.file_text(repo, path, expected_head) or "", data.decode("utf-8", "replace")
            )
            for path, data in (additions or {}).items()
        }
        detail = {
            "headline": headline,
            "expected_head": expected_head,
            "diffs": diffs,
            "deletions": list(deletions),
        }
        self.writes.append(Write("commit", f"{repo}:{branch}", f"{headline}\n\n{body}".strip(), detail))
        if self.dry_run:
            return Committed(oid="0" * 40, url=DRY_RUN_URL)
        result = self.client.commit_on_branch(
            repo,
            branch,
            expected_head=expected_head,
            headline=headline,
            body=body,
            additions=additions,
            deletions=deletions,
        )
        if isinstance(result, Committed):
            detail["url"] = result.url or result.oid
        return result

    def resolve_thread(self, thread_id: str) -> bool:
        """Record resolving a review thread."""
        self.writes.append(Write("resolve thread", thread_id))
        return True if self.dry_run else self.client.resolve_thread(thread_id)
