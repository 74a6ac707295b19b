"""A job's GitHub port: what it reads teaches it the secret values, what it writes is scrubbed of them.

The core redacts secrets from everything on its way to the model, and ``outbound`` removes what still looks
like one from each post. A value the model repeats from elsewhere ("the old password hunter2 was committed")
has no secret's look, so each job also removes by value every secret the core's redaction finds in what the
job read: either side of the diff, each file read, each comment and message, the pull request's text and the
comment that asked. One wrapper, one rule for every channel: conversation comments and replies, review bodies
and inline comments, check-run text, commit messages and the description.

Finding the values costs what the core's redaction costs (tens of milliseconds for a large diff): it runs in
the background while the job goes on, and a write waits for it only if it is still running.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Literal

from bot.adapters.github_port import (
    BranchMoved,
    CheckInfo,
    CommentRef,
    CommitInfo,
    Committed,
    Comparison,
    GitHubPort,
    PullDiff,
    PullInfo,
    PushRefused,
    Reaction,
    ReviewCommentInfo,
    ReviewThread,
)
from bot.core.anchors import read_suggestion
from bot.core.ci import Annotation
from bot.core.diff import parse_diff
from bot.core.render import scrubbed
from bot.core.secrets import SecretValues, diff_values, redact, redact_file
from bot.core.types import ReviewComment

# The opening fence of a ```suggestion block, and what a suggestion that held a secret value says instead.
_SUGGESTION = re.compile(r"^(`{3,})suggestion[ \t]*$", re.MULTILINE)
DEMOTED = (
    "\n\n<sub>Shown as code, not as a suggestion: it held a value Spark keeps out of its posts, and "
    "committing it would write the placeholder.</sub>"
)
# Threads shared by a process's jobs (each job's values stay in its own port), made in the process that uses
# them: a pool made before a fork would have no threads in the child.
_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _learning() -> ThreadPoolExecutor:
    with _POOLS_LOCK:
        pool = _POOLS.get(os.getpid())
        if pool is None:
            pool = _POOLS[os.getpid()] = ThreadPoolExecutor(2, thread_name_prefix="spark-secret-values")
        return pool


def _diff_values(text: str) -> list[str]:
    return [v for file in parse_diff(text).files for v in diff_values(file)]


class RedactingPort:
    """``inner`` (the installation's client or the dry-run recorder) seen through one job's secret values."""

    def __init__(self, inner: GitHubPort, secrets: SecretValues | None = None, *, heard: str = "") -> None:
        self.inner = inner
        self.secrets = secrets if secrets is not None else SecretValues()
        self._pending: list[Future[None]] = []
        self._lock = threading.Lock()  # flows read and write from several threads at once
        self._learn(heard)

    def _learn(self, text: str | None, path: str | None = None) -> None:
        if text:
            self._later(lambda: (redact_file(path, text) if path else redact(text)).values)

    def _later(self, values: Callable[[], Iterable[str]]) -> None:
        future = _learning().submit(lambda: self.secrets.add(values()))
        with self._lock:
            self._pending.append(future)

    def learned(self) -> SecretValues:
        """Return the job's secret values once every read so far has been looked through."""
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.result()
        with self._lock:
            self._pending = [f for f in self._pending if not f.done()]
        return self.secrets

    def _scrub(self, text: str) -> str:
        clean = scrubbed(text, self.learned())
        if clean != text and read_suggestion(clean) is not None:
            # A suggestion holding a placeholder would commit it on a click: it is shown as plain code.
            clean = _SUGGESTION.sub(r"\1", clean) + DEMOTED
        return clean

    def _scrub_all(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._scrub(value)
        if isinstance(value, dict):
            return {k: self._scrub_all(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self._scrub_all(v) for v in value)
        return value

    @property
    def own_login(self) -> str:
        """Return the login Spark writes as: only comments by it count as Spark's memory."""
        return self.inner.own_login

    def is_own(self, login: str) -> bool:
        """Return whether ``login`` (as REST spells it) is Spark itself."""
        return self.inner.is_own(login)

    # Reads: each text read teaches the job its secret values.

    def pull(self, repo: str, number: int) -> PullInfo:
        """Return the pull request's head, base, fork status and ``maintainer_can_modify``."""
        pull = self.inner.pull(repo, number)
        self._learn(pull.title)
        self._learn(pull.body)
        return pull

    def pull_diff(self, repo: str, number: int) -> PullDiff:
        """Return the pull request's unified diff (rebuilt from per-file patches when GitHub refuses it)."""
        diff = self.inner.pull_diff(repo, number)
        self._later(lambda: _diff_values(diff.text))
        return diff

    def file_text(self, repo: str, path: str, ref: str, *, max_bytes: int | None = None) -> str | None:
        """Return a file's text at ``ref``, or None when nothing is there; ``Unreadable`` if not a file."""
        text = self.inner.file_text(repo, path, ref, max_bytes=max_bytes)
        self._learn(text, path)
        return text

    def tree_paths(self, repo: str, ref: str) -> tuple[list[str], bool]:
        """Return every file path at ``ref`` and whether GitHub listed them all."""
        return self.inner.tree_paths(repo, ref)

    def archive(self, repo: str, ref: str) -> Iterator[bytes]:
        """Stream the repository's tarball at ``ref`` (gzipped tar, GitHub's archive layout) in chunks."""
        return self.inner.archive(repo, ref)

    def compare(self, repo: str, base: str, head: str) -> Comparison:
        """Return how ``head`` relates to ``base`` and the files changed (with their blob SHAs)."""
        return self.inner.compare(repo, base, head)

    def blob(self, repo: str, sha: str) -> bytes:
        """Return a blob's bytes by its SHA."""
        return self.inner.blob(repo, sha)

    def permission(self, repo: str, login: str) -> str:
        """Return ``login``'s permission on the repository: admin, maintain, write, triage, read or none."""
        return self.inner.permission(repo, login)

    def commit(self, repo: str, sha: str) -> CommitInfo:
        """Return a commit's message and page."""
        commit = self.inner.commit(repo, sha)
        self._learn(commit.message)
        return commit

    def commits_between(self, repo: str, base: str, head: str) -> list[CommitInfo]:
        """Return the commits reachable from ``head``, not from ``base``, oldest first."""
        commits = self.inner.commits_between(repo, base, head)
        for commit in commits:
            self._learn(commit.message)
        return commits

    def review_comments(self, repo: str, number: int) -> list[ReviewCommentInfo]:
        """Return every review comment of the pull request."""
        comments = self.inner.review_comments(repo, number)
        for comment in comments:
            self._learn(comment.body)
        return comments

    def review_threads(self, repo: str, number: int) -> list[ReviewThread]:
        """Return every review thread of the pull request with its first comment."""
        threads = self.inner.review_threads(repo, number)
        for thread in threads:
            self._learn(thread.first_comment_body)
        return threads

    def find_review(self, repo: str, number: int, key: str) -> int | None:
        """Return the id of Spark's own review carrying the ``reply`` marker of ``key``, if any."""
        return self.inner.find_review(repo, number, key)

    # Writes: every text scrubbed of the job's secret values.

    def react(self, repo: str, comment_id: int, content: Reaction, *, review_comment: bool = False) -> None:
        """Add a reaction to an issue comment, or to a review comment when ``review_comment``."""
        self.inner.react(repo, comment_id, content, review_comment=review_comment)

    def comment(self, repo: str, number: int, body: str) -> CommentRef:
        """Post a comment in the pull request's conversation."""
        return self.inner.comment(repo, number, self._scrub(body))

    def edit_pull_body(self, repo: str, number: int, body: str) -> None:
        """Replace the pull request's description."""
        self.inner.edit_pull_body(repo, number, self._scrub(body))

    def upsert_comment(self, repo: str, number: int, key: str, body: str) -> CommentRef:
        """Post ``body`` under the ``reply`` marker of ``key``, or edit Spark's comment carrying it."""
        return self.inner.upsert_comment(repo, number, key, self._scrub(body))

    def reply_to_review_comment(self, repo: str, number: int, comment_id: int, body: str) -> CommentRef:
        """Reply in the thread of a top-level review comment."""
        return self.inner.reply_to_review_comment(repo, number, comment_id, self._scrub(body))

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
        return self.inner.review(
            repo,
            number,
            commit_sha=commit_sha,
            body=self._scrub(body),
            comments=[replace(c, body=self._scrub(c.body)) for c in comments],
            event=event,
            key=key,
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
        """Create a check run on ``head_sha``; return its id."""
        return self.inner.create_check_run(
            repo, head_sha, name, status=status, external_id=external_id, **self._scrub_all(fields)
        )

    def update_check_run(self, repo: str, check_run_id: int, **fields: Any) -> None:
        """Update a check run (status, conclusion, output, actions)."""
        self.inner.update_check_run(repo, check_run_id, **self._scrub_all(fields))

    def check_run(self, repo: str, check_run_id: int) -> CheckInfo:
        """Return one check run."""
        return self.inner.check_run(repo, check_run_id)

    def check_runs(self, repo: str, sha: str) -> list[CheckInfo]:
        """Return the check runs on a commit."""
        return self.inner.check_runs(repo, sha)

    def check_annotations(self, repo: str, check_run_id: int) -> list[Annotation]:
        """Return a check run's annotations (their messages teach it values, as any text read does)."""
        annotations = self.inner.check_annotations(repo, check_run_id)
        for annotation in annotations:
            self._learn(annotation.message)
        return annotations

    def job_log(self, repo: str, job_id: int) -> Iterator[bytes]:
        """Stream an Actions job's log (streamed through, never held: its lines reach a post only through
        the check run's text, which ``outbound`` and the values learned elsewhere scrub)."""
        return self.inner.job_log(repo, job_id)

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
        return self.inner.commit_on_branch(
            repo,
            branch,
            expected_head=expected_head,
            headline=self._scrub(headline),
            body=self._scrub(body),
            additions=additions,
            deletions=deletions,
        )

    def resolve_thread(self, thread_id: str) -> bool:
        """Resolve a review thread; return whether GitHub now reports it resolved."""
        return self.inner.resolve_thread(thread_id)
