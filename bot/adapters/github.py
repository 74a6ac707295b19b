"""The installation client: ``Installation`` implements the flows' ``GitHubPort`` over PyGithub.

Every method is one or a few REST or GraphQL calls made through the installation's ``Transport``
(``bot.adapters.github_http``: GitHub's limits, safe resends, errors mapped, every call metered) and returns
the port's small typed values. A write whose answer was lost (a 5xx, a timeout) is looked for by its hidden
marker or external id before it is sent again, so a retried job never posts twice.
Just past 400 lines: it is the port's one implementation, a method per call the flows make; transport,
GraphQL, file reads and the App's own calls live in the ``github_*`` modules beside it.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import requests
from github import Github

from bot.adapters import github_files, github_graphql
from bot.adapters.github_http import Transport
from bot.adapters.github_port import (
    BranchMoved,
    ChangedFile,
    CheckInfo,
    CommentRef,
    CommitInfo,
    Committed,
    Comparison,
    GitHubError,
    PullDiff,
    PullInfo,
    PushRefused,
    RateLimited,
    Reaction,
    ReviewCommentInfo,
    ReviewThread,
    upsert_comment,
)
from bot.adapters.ratelimit import Budget, WriteLimits
from bot.core import markers
from bot.core.anchors import read_suggestion
from bot.core.ci import Annotation
from bot.core.render import outbound
from bot.core.types import ReviewComment
from bot.metrics import SUGGESTIONS_POSTED

DIFF_MEDIA_TYPE = "application/vnd.github.diff"
# An archive is read as it downloads, in chunks of this size; a stalled download fails after the timeout.
ARCHIVE_CHUNK = 256 * 1024
ARCHIVE_TIMEOUT = 30.0


class Installation:
    """The installation-token client the flows use (through ``GitHubPort``), with a few calls of its own."""

    def __init__(
        self,
        github: Github,
        installation_id: int,
        *,
        own_login: str | Callable[[], str] = "",
        limits: WriteLimits | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.installation_id = installation_id
        self._own_login = own_login
        self._http = Transport(github, installation_id, limits=limits, budget=budget)

    @property
    def own_login(self) -> str:
        """Return the login Spark's own comments carry: only its markers count as Spark's memory."""
        login = self._own_login
        return login() if callable(login) else login

    def is_own(self, login: str) -> bool:
        """Return whether ``login`` (as REST spells it, see ``_login``) is Spark itself."""
        own = self.own_login
        return bool(own) and login == own

    def close(self) -> None:
        """Close this installation's connection pool."""
        self._http.close()

    # Pull requests ---------------------------------------------------------------------------------------

    def pull(self, repo: str, number: int) -> PullInfo:
        """Return the pull request's head, base, fork status and ``maintainer_can_modify``."""
        _, data = self._http.call("GET", f"/repos/{repo}/pulls/{number}")
        head, base = data["head"], data["base"]
        head_repo = (head.get("repo") or {}).get("full_name") or ""
        return PullInfo(
            number=int(data["number"]),
            title=str(data.get("title") or ""),
            body=str(data.get("body") or ""),
            state=str(data.get("state") or ""),
            draft=bool(data.get("draft", False)),
            author=str((data.get("user") or {}).get("login") or ""),
            head_sha=str(head["sha"]),
            head_ref=str(head["ref"]),
            head_repo=head_repo,
            base_sha=str(base["sha"]),
            base_ref=str(base["ref"]),
            base_repo=str(base["repo"]["full_name"]),
            maintainer_can_modify=bool(data.get("maintainer_can_modify", False)),
            default_branch=str(base["repo"].get("default_branch") or ""),
            changed_files=int(data.get("changed_files") or 0),
        )

    def pull_files(self, repo: str, number: int) -> list[ChangedFile]:
        """Return the changed files with their per-file ``patch`` (GitHub lists at most 3000)."""
        return [
            ChangedFile(
                path=str(item["filename"]),
                status=str(item.get("status", "")),
                previous_path=item.get("previous_filename"),
                patch=item.get("patch"),
                additions=int(item.get("additions") or 0),
                deletions=int(item.get("deletions") or 0),
                blob=str(item.get("sha") or ""),
            )
            for item in self._http.pages(f"/repos/{repo}/pulls/{number}/files")
        ]

    def archive(self, repo: str, ref: str) -> Iterator[bytes]:
        """Stream the tarball of ``repo`` at ``ref``: GitHub's redirect (one API call), then the download.

        The download link is signed for this request (a token in its query for a private repository), so it
        is fetched without the installation's credentials, as GitHub documents.
        """
        location = self._http.archive_link(repo, ref)
        try:
            with requests.get(location, stream=True, timeout=ARCHIVE_TIMEOUT) as response:
                if response.status_code != 200:
                    raise GitHubError(
                        response.status_code, f"the archive download answered {response.status_code}"
                    )
                yield from response.iter_content(ARCHIVE_CHUNK)
        except requests.RequestException as exc:
            raise GitHubError(0, f"the archive download broke off ({type(exc).__name__})") from exc

    def compare(self, repo: str, base: str, head: str) -> Comparison:
        """Return ``GET /compare/{base}...{head}``: the status and the changed files with their blob SHAs.

        GitHub lists at most 300 files; a caller that needs all of a longer change reads the archive.
        """
        _, data = self._http.call("GET", f"/repos/{repo}/compare/{base}...{head}", params={"per_page": 100})
        files = tuple(
            ChangedFile(
                path=str(item["filename"]),
                status=str(item.get("status", "")),
                previous_path=item.get("previous_filename"),
                patch=None,
                additions=int(item.get("additions") or 0),
                deletions=int(item.get("deletions") or 0),
                blob=str(item.get("sha") or ""),
            )
            for item in data.get("files") or []
        )
        return Comparison(str(data.get("status") or ""), files)

    def blob(self, repo: str, sha: str) -> bytes:
        """Return a blob's bytes (``GET /git/blobs/{sha}``, base64 in JSON, up to 100 MB)."""
        _, data = self._http.call("GET", f"/repos/{repo}/git/blobs/{sha}")
        return base64.b64decode(str(data.get("content") or ""))

    def pull_diff(self, repo: str, number: int) -> PullDiff:
        """Return the unified diff; if GitHub refuses it as too large (406), rebuild it from file patches."""
        try:
            _, data = self._http.call(
                "GET", f"/repos/{repo}/pulls/{number}", headers={"Accept": DIFF_MEDIA_TYPE}
            )
        except GitHubError as exc:
            if exc.status != 406:
                raise
            return diff_from_files(self.pull_files(repo, number))
        # PyGithub wraps a non-JSON body as {"data": text}.
        text = data.get("data", "") if isinstance(data, dict) else str(data)
        return PullDiff(text=str(text), source="raw")

    def file_text(self, repo: str, path: str, ref: str, *, max_bytes: int | None = None) -> str | None:
        """Return a regular file's text at ``ref``, or None when nothing exists at ``path`` there.

        Raises ``Unreadable`` for anything but a regular file Spark may read (``github_files``).
        """
        return github_files.file_text(self._http, repo, path, ref, max_bytes=max_bytes)

    def tree_paths(self, repo: str, ref: str) -> tuple[list[str], bool]:
        """Return every file path at ``ref`` (one recursive tree call) and whether GitHub listed them all."""
        _, data = self._http.call("GET", f"/repos/{repo}/git/trees/{ref}", params={"recursive": "1"})
        if not isinstance(data, dict):
            raise GitHubError(0, f"the tree at {ref[:12]} is not a JSON object")
        paths = [str(e["path"]) for e in data.get("tree") or [] if e.get("type") == "blob" and e.get("path")]
        return paths, not data.get("truncated")

    def permission(self, repo: str, login: str) -> str:
        """Return ``login``'s permission on the repository: admin, maintain, write, triage, read or none."""
        try:
            _, data = self._http.call("GET", f"/repos/{repo}/collaborators/{login}/permission")
        except GitHubError as exc:
            if exc.status == 404:
                return "none"
            raise
        role = str(data.get("role_name") or "")
        # role_name distinguishes maintain/triage, which the legacy `permission` field folds into write/read.
        return (
            role if role in ("admin", "maintain", "write", "triage", "read") else str(data.get("permission"))
        )

    # Comments and reactions ------------------------------------------------------------------------------

    def react(self, repo: str, comment_id: int, content: Reaction, *, review_comment: bool = False) -> None:
        """Add a reaction to an issue comment, or to a review comment when ``review_comment``."""
        kind = "pulls" if review_comment else "issues"
        url = f"/repos/{repo}/{kind}/comments/{comment_id}/reactions"
        try:
            self._http.call("POST", url, body={"content": content})
        except GitHubError as exc:
            if not exc.maybe_done or isinstance(exc, RateLimited):
                raise
            # GitHub answers an existing reaction with 200, so resending after a 5xx cannot duplicate it.
            self._http.call("POST", url, body={"content": content})

    def comment(self, repo: str, number: int, body: str) -> CommentRef:
        """Post a comment in the pull request's conversation."""
        _, data = self._http.call(
            "POST", f"/repos/{repo}/issues/{number}/comments", body={"body": outbound(body)}
        )
        return _comment(data)

    def edit_comment(self, repo: str, comment_id: int, body: str) -> CommentRef:
        """Replace an issue comment's body."""
        _, data = self._http.call(
            "PATCH", f"/repos/{repo}/issues/comments/{comment_id}", body={"body": outbound(body)}
        )
        return _comment(data)

    def find_comment(self, repo: str, number: int, key: str) -> CommentRef | None:
        """Return Spark's earlier conversation comment carrying the ``reply`` marker of ``key``, if any.

        Only a comment the App wrote counts: anyone can paste a marker into their own comment.
        """
        for item in self._http.pages(f"/repos/{repo}/issues/{number}/comments"):
            author = str((item.get("user") or {}).get("login") or "")
            if self.is_own(author) and markers.carries(str(item.get("body") or ""), "reply", key):
                return _comment(item)
        return None

    def upsert_comment(self, repo: str, number: int, key: str, body: str) -> CommentRef:
        """Post ``body`` under the ``reply`` marker of ``key``, or edit the comment carrying it (once)."""
        return upsert_comment(self, repo, number, key, body)

    def review_comments(self, repo: str, number: int) -> list[ReviewCommentInfo]:
        """Return every review comment of the pull request (threads' roots and replies, with 👎 counts)."""
        return [
            ReviewCommentInfo(
                id=int(item["id"]),
                in_reply_to_id=item.get("in_reply_to_id"),
                author=str((item.get("user") or {}).get("login") or ""),
                body=str(item.get("body") or ""),
                thumbs_down=int((item.get("reactions") or {}).get("-1") or 0),
            )
            for item in self._http.pages(f"/repos/{repo}/pulls/{number}/comments")
        ]

    def reply_to_review_comment(self, repo: str, number: int, comment_id: int, body: str) -> CommentRef:
        """Reply in the thread of a top-level review comment."""
        _, data = self._http.call(
            "POST",
            f"/repos/{repo}/pulls/{number}/comments/{comment_id}/replies",
            body={"body": outbound(body)},
        )
        if read_suggestion(body) is not None:
            SUGGESTIONS_POSTED.inc()
        return _comment(data)

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
        """Create a review with inline comments on ``commit_sha``; return its id (one bad line fails all).

        With ``key`` the body carries the ``reply`` marker of ``key``, and after a 5xx or a lost answer the
        posted reviews are searched for it before posting again, so a review is never doubled.
        """
        payload: dict[str, Any] = {
            "commit_id": commit_sha,
            "body": outbound(markers.append(body, "reply", key) if key else body),
            "event": event,
            "comments": [_review_comment(c) for c in comments],
        }
        url = f"/repos/{repo}/pulls/{number}/reviews"
        try:
            _, data = self._http.call("POST", url, body=payload)
        except GitHubError as exc:
            if not exc.maybe_done or key is None:
                raise
            found = self.find_review(repo, number, key)
            if found is not None:
                return found
            _, data = self._http.call("POST", url, body=payload)
        SUGGESTIONS_POSTED.inc(sum(read_suggestion(c.body) is not None for c in comments))
        return int(data["id"])

    def find_review(self, repo: str, number: int, key: str) -> int | None:
        """Return the id of Spark's own review of the pull request carrying ``key``'s ``reply`` marker."""
        for item in self._http.pages(f"/repos/{repo}/pulls/{number}/reviews"):
            author = str((item.get("user") or {}).get("login") or "")
            if self.is_own(author) and markers.carries(str(item.get("body") or ""), "reply", key):
                return int(item["id"])
        return None

    def commit(self, repo: str, sha: str) -> CommitInfo:
        """Return a commit's message and page (GitHub serves a fork PR's commits from the base repo too)."""
        _, data = self._http.call("GET", f"/repos/{repo}/commits/{sha}")
        return _commit_info(data, sha)

    def commits_between(self, repo: str, base: str, head: str) -> list[CommitInfo]:
        """Return the commits reachable from ``head``, not from ``base``, oldest first (GitHub's compare)."""
        _, data = self._http.call("GET", f"/repos/{repo}/compare/{base}...{head}")
        return [_commit_info(item, "") for item in data.get("commits") or []]

    def edit_pull_body(self, repo: str, number: int, body: str) -> None:
        """Replace the pull request's description."""
        self._http.call("PATCH", f"/repos/{repo}/pulls/{number}", body={"body": outbound(body)})

    # Check runs -----------------------------------------------------------------------------------------

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
        """Create a check run on ``head_sha``; return its id.

        With ``external_id`` (e.g. the job id), after a 5xx or a lost answer the head's runs are searched for
        it before creating again, so a retried call never leaves two runs.
        """
        payload = {"name": name, "head_sha": head_sha, "status": status, **_outbound_fields(fields)}
        if external_id:
            payload["external_id"] = external_id
        try:
            _, data = self._http.call("POST", f"/repos/{repo}/check-runs", body=payload)
        except GitHubError as exc:
            if not exc.maybe_done or not external_id:
                raise
            _, found = self._http.call(
                "GET", f"/repos/{repo}/commits/{head_sha}/check-runs", params={"check_name": name}
            )
            for run in found.get("check_runs", []):
                if run.get("external_id") == external_id:
                    return int(run["id"])
            _, data = self._http.call("POST", f"/repos/{repo}/check-runs", body=payload)
        return int(data["id"])

    def update_check_run(self, repo: str, check_run_id: int, **fields: Any) -> None:
        """Update a check run (status, conclusion, output, actions)."""
        self._http.call("PATCH", f"/repos/{repo}/check-runs/{check_run_id}", body=_outbound_fields(fields))

    def check_run(self, repo: str, check_run_id: int) -> CheckInfo:
        """Return ``GET …/check-runs/{id}``."""
        _, data = self._http.call("GET", f"/repos/{repo}/check-runs/{check_run_id}")
        return _check_info(data)

    def check_runs(self, repo: str, sha: str) -> list[CheckInfo]:
        """Return ``GET …/commits/{sha}/check-runs`` (the latest run of each name, a hundred at most)."""
        _, data = self._http.call(
            "GET", f"/repos/{repo}/commits/{sha}/check-runs", params={"filter": "latest", "per_page": 100}
        )
        return [_check_info(run) for run in data.get("check_runs", [])]

    def check_annotations(self, repo: str, check_run_id: int) -> list[Annotation]:
        """Return the first hundred of ``GET …/check-runs/{id}/annotations``."""
        _, data = self._http.call(
            "GET", f"/repos/{repo}/check-runs/{check_run_id}/annotations", params={"per_page": 100}
        )
        return [
            Annotation(
                str(item.get("path") or ""),
                int(item["start_line"]) if isinstance(item.get("start_line"), int) else None,
                str(item.get("annotation_level") or ""),
                str(item.get("message") or ""),
                str(item.get("title") or ""),
            )
            for item in (data if isinstance(data, list) else [])
        ]

    def job_log(self, repo: str, job_id: int) -> Iterator[bytes]:
        """Stream a job's log: ``GET …/actions/jobs/{id}/logs`` answers with a redirect to a signed URL, which
        is fetched without the installation's credentials, as GitHub documents (the link lasts a minute)."""
        headers, _ = self._http.call("GET", f"/repos/{repo}/actions/jobs/{job_id}/logs")
        location = headers.get("location")
        if not location:
            raise GitHubError(502, "GitHub gave no location for the job's log")
        try:
            with requests.get(location, stream=True, timeout=ARCHIVE_TIMEOUT) as response:
                if response.status_code != 200:
                    raise GitHubError(
                        response.status_code, f"the log download answered {response.status_code}"
                    )
                yield from response.iter_content(ARCHIVE_CHUNK)
        except requests.RequestException as exc:
            raise GitHubError(0, f"the log download broke off ({type(exc).__name__})") from exc

    # GraphQL --------------------------------------------------------------------------------------------

    # GraphQL (bot.adapters.github_graphql) ---------------------------------------------------------------

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
        """Commit file changes with ``createCommitOnBranch`` (GitHub signs it) unless the branch moved."""
        return github_graphql.commit_on_branch(
            self._http.graphql,
            repo,
            branch,
            expected_head=expected_head,
            headline=headline,
            body=body,
            additions=additions,
            deletions=deletions,
        )

    def review_threads(self, repo: str, number: int) -> list[ReviewThread]:
        """Return every review thread of the pull request with its first comment."""
        return github_graphql.review_threads(self._http.graphql, repo, number)

    def resolve_thread(self, thread_id: str) -> bool:
        """Resolve a review thread; return whether GitHub now reports it resolved."""
        return github_graphql.resolve_thread(self._http.graphql, thread_id)


def _outbound_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Return check-run fields with the output's texts passed through ``outbound`` (secrets redacted)."""
    output = fields.get("output")
    if not isinstance(output, dict):
        return fields
    texts = {k: outbound(v) if isinstance(v, str) else v for k, v in output.items()}
    return {**fields, "output": texts}


def _commit_info(data: dict[str, Any], sha: str) -> CommitInfo:
    commit = data.get("commit") or {}
    # The account when GitHub matched the author's email to one, else the name in the commit.
    author = (data.get("author") or {}).get("login") or (commit.get("author") or {}).get("name") or ""
    files: list[str] = []
    for item in data.get("files") or []:
        files += [str(p) for p in (item.get("filename"), item.get("previous_filename")) if p]
    return CommitInfo(
        sha=str(data.get("sha") or sha),
        message=str(commit.get("message") or ""),
        html_url=str(data.get("html_url") or ""),
        author=str(author),
        parents=tuple(str(p.get("sha")) for p in data.get("parents") or [] if p.get("sha")),
        files=tuple(files),
    )


def _comment(data: dict[str, Any]) -> CommentRef:
    return CommentRef(
        id=int(data["id"]), html_url=str(data.get("html_url") or ""), body=str(data.get("body") or "")
    )


def _review_comment(comment: ReviewComment) -> dict[str, Any]:
    item: dict[str, Any] = {
        "path": comment.path,
        "line": comment.line,
        "side": comment.side,
        "body": outbound(comment.body),
    }
    if comment.start_line is not None and comment.start_line != comment.line:
        item["start_line"] = comment.start_line
        item["start_side"] = comment.start_side or comment.side
    return item


def diff_from_files(files: Sequence[ChangedFile]) -> PullDiff:
    """Rebuild a unified diff from per-file patches (GitHub omits ``patch`` for binary and huge files)."""
    parts: list[str] = []
    missing: list[str] = []
    for item in files:
        old = item.previous_path or item.path
        old_name = "/dev/null" if item.status == "added" else f"a/{old}"
        new_name = "/dev/null" if item.status == "removed" else f"b/{item.path}"
        if item.patch is None:
            missing.append(item.path)
            continue
        header = f"diff --git a/{old} b/{item.path}\n--- {old_name}\n+++ {new_name}\n"
        parts.append(header + item.patch.rstrip("\n") + "\n")
    return PullDiff(text="".join(parts), source="files", missing=tuple(missing), listed=len(files))


def _check_info(data: dict[str, Any]) -> CheckInfo:
    owner = data.get("app")
    app: dict[str, Any] = owner if isinstance(owner, dict) else {}
    return CheckInfo(
        id=int(data["id"]),
        name=str(data.get("name") or ""),
        head_sha=str(data.get("head_sha") or ""),
        status=str(data.get("status") or ""),
        conclusion=data.get("conclusion"),
        app=str(app.get("slug") or ""),
        pull_numbers=tuple(int(pr["number"]) for pr in data.get("pull_requests") or [] if "number" in pr),
        external_id=str(data.get("external_id") or ""),
    )
