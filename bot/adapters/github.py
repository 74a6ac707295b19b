"""A thin GitHub App adapter over PyGithub 2.x: auth, warm pools, retries, and the calls the flows make.

One ``GitHubApp`` per process. It keeps one PyGithub ``Github`` object per installation for the life of the
process, so its connection pool stays warm and PyGithub's ``AppInstallationAuth`` keeps the installation token
until shortly before it expires (PyGithub re-mints 20 s early). PyGithub's client-side sleeps (0.25 s between
requests, 1 s between writes) are off. GitHub's limits are met here instead (``bot.adapters.ratelimit``):
writes go one at a time per installation within 80 a minute and 500 an hour; a rate-limit answer (403 or
429) is waited out in place when short and raised as ``RateLimited`` when long, so the job is deferred rather
than a worker sleeping for a minute. A request is resent by the transport only when that is safe: a
connection that never carried it, or a read that changes nothing; a write whose answer was lost
(``unanswered``) is looked for by its hidden marker before it is sent again, never resent blindly.

Calls go through PyGithub's ``Requester`` with explicit paths, not lazy object graphs, so each operation costs
exactly the requests it needs (no ``GET /repos/o/r`` before every call) and returns small typed values.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import requests
from github import Auth, Github, GithubException, GithubIntegration
from github.Requester import Requester
from urllib3.util.retry import Retry

from bot.adapters.ratelimit import Budget, WriteBudget, WriteLimits, rate_limit_wait
from bot.core import markers
from bot.core.anchors import read_suggestion
from bot.core.render import outbound
from bot.core.types import ReviewComment
from bot.metrics import SUGGESTIONS_POSTED, record_github_call
from bot.settings import Settings

# Resent by the transport after a lost answer or a 5xx: reads, and PATCH (idempotent for what Spark patches:
# comment bodies, check runs, a ref to a given SHA). Never POST: a comment or review could be made twice.
RETRIED_METHODS = Retry.DEFAULT_ALLOWED_METHODS | {"PATCH"}
WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
# Rate-limit answers waited out in place per call before the job is deferred.
RATE_LIMIT_RETRIES = 3
DIFF_MEDIA_TYPE = "application/vnd.github.diff"
PER_PAGE = 100
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


@dataclass(frozen=True, slots=True)
class HookDelivery:
    """One entry of the App's webhook delivery log."""

    id: int
    guid: str
    delivered_at: str
    status: str
    status_code: int
    event: str
    action: str | None
    redelivery: bool


def default_retry() -> Retry:
    """Return the transport's retry policy (urllib3): what is safe to resend without asking GitHub.

    A failed connection is retried for every method (nothing was sent). A lost answer or a 5xx is retried
    only for ``RETRIED_METHODS``: a POST may have created its comment or review, so it surfaces as an
    ``unanswered``/5xx ``GitHubError`` and the adapter looks for the write before sending it again.
    Rate-limit answers are not retried here: ``Installation`` waits them out or defers the job.
    """
    return Retry(
        total=6,
        connect=3,
        read=2,
        status=3,
        backoff_factor=0.25,
        status_forcelist=range(500, 600),
        allowed_methods=RETRIED_METHODS,
        raise_on_status=False,
        respect_retry_after_header=False,
    )


def write_limits(settings: Settings) -> WriteLimits:
    """Return the write pacing and rate-limit waits the settings ask for."""
    return WriteLimits(
        per_minute=settings.spark_github_writes_per_minute,
        per_hour=settings.spark_github_writes_per_hour,
        max_inline_wait=settings.spark_github_max_inline_wait_seconds,
        secondary_wait=settings.spark_github_secondary_wait_seconds,
    )


def _error(exc: GithubException) -> GitHubError:
    data = exc.data if isinstance(exc.data, dict) else {}
    message = str(data.get("message") or exc.message or exc)
    return GitHubError(exc.status, message)


class GitHubApp:
    """A GitHub App's process-wide handle: JWT calls, and one warm ``Installation`` per installation."""

    def __init__(
        self,
        app_id: int,
        private_key: str,
        *,
        base_url: str = "https://api.github.com",
        retry: Retry | None = None,
        timeout: int = 15,
        pool_size: int = 10,
        limits: WriteLimits | None = None,
        budget_for: Callable[[int, WriteLimits], Budget] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.limits = limits or WriteLimits()
        # Where each installation's writes are counted: in this process unless the caller shares a budget.
        self._budget_for = budget_for or (lambda _installation, limits: WriteBudget(limits))
        self._auth = Auth.AppAuth(app_id, private_key)
        self._kwargs: dict[str, Any] = {
            "base_url": self.base_url,
            "retry": retry if retry is not None else default_retry(),
            "timeout": timeout,
            "pool_size": pool_size,
            "seconds_between_requests": 0,
            "seconds_between_writes": 0,
        }
        self._integration = GithubIntegration(auth=self._auth, **self._kwargs)
        self._installations: dict[int, Installation] = {}
        self._lock = threading.Lock()
        self._bot_login = ""

    @classmethod
    def from_settings(
        cls, settings: Settings, *, budget_for: Callable[[int, WriteLimits], Budget] | None = None
    ) -> GitHubApp:
        """Build the App handle from settings (``require_worker`` has checked they are present)."""
        settings.require("github_app_id", "github_private_key")
        assert settings.github_app_id is not None and settings.github_private_key is not None
        return cls(
            settings.github_app_id,
            settings.github_private_key.get_secret_value(),
            base_url=settings.github_api_url,
            limits=write_limits(settings),
            budget_for=budget_for,
        )

    def installation(self, installation_id: int) -> Installation:
        """Return the cached client of ``installation_id`` (built on first use, then kept warm)."""
        with self._lock:
            client = self._installations.get(installation_id)
            if client is None:
                github = Github(auth=self._auth.get_installation_auth(installation_id), **self._kwargs)
                client = Installation(
                    github,
                    installation_id,
                    own_login=self.bot_login,
                    limits=self.limits,
                    budget=self._budget_for(installation_id, self.limits),
                )
                self._installations[installation_id] = client
            return client

    def forget(self, installation_id: int) -> None:
        """Drop (and close) the client of an uninstalled installation."""
        with self._lock:
            client = self._installations.pop(installation_id, None)
        if client is not None:
            client.close()

    def close(self) -> None:
        """Close every connection pool this App holds."""
        with self._lock:
            clients = list(self._installations.values())
            self._installations.clear()
        for client in clients:
            client.close()
        self._integration.close()

    @property
    def _jwt_requester(self) -> Requester:
        requester: Requester = self._integration.requester
        return requester

    def bot_login(self) -> str:
        """Return the login the App writes as (``<slug>[bot]``), asked of GitHub once per process."""
        with self._lock:
            if not self._bot_login:
                self._bot_login = f"{self.app_slug()}[bot]"
            return self._bot_login

    def app_slug(self) -> str:
        """Return the App's slug (``GET /app``), proving the private key matches the App."""
        try:
            _, data = request(self._jwt_requester, "GET", "/app")
        except GithubException as exc:
            raise _error(exc) from exc
        return str(data.get("slug") or data.get("name") or "")

    def deliveries(self, *, limit: int = 1000) -> list[HookDelivery]:
        """Return the App's recent webhook deliveries, newest first (``GET /app/hook/deliveries``)."""
        found: list[HookDelivery] = []
        cursor: str | None = None
        while len(found) < limit:
            params: dict[str, Any] = {"per_page": PER_PAGE}
            if cursor:
                params["cursor"] = cursor
            try:
                headers, data = request(self._jwt_requester, "GET", "/app/hook/deliveries", params=params)
            except GithubException as exc:
                raise _error(exc) from exc
            items = data if isinstance(data, list) else data.get("data", [])
            found.extend(_delivery(item) for item in items)
            cursor = _next_cursor(headers.get("link", ""))
            if not cursor or not items:
                break
        return found[:limit]

    def redeliver(self, delivery_id: int) -> None:
        """Ask GitHub to send a delivery again (it keeps its ``X-GitHub-Delivery`` guid)."""
        try:
            request(self._jwt_requester, "POST", f"/app/hook/deliveries/{delivery_id}/attempts")
        except GithubException as exc:
            raise _error(exc) from exc


def exchange_manifest_code(api_url: str, code: str, *, timeout: int) -> dict[str, Any]:
    """Trade an App-manifest ``code`` for the new App's settings (``POST /app-manifests/{code}/conversions``).

    Unauthenticated, as GitHub specifies, and never resent: a code works once, so a replayed POST could only
    fail. A refusal raises ``GitHubError`` with GitHub's status; no answer at all raises one with status 0.
    """
    client = Github(base_url=api_url, retry=None, timeout=timeout)
    try:
        _, data = request(client.requester, "POST", f"/app-manifests/{quote(code)}/conversions")
    except GithubException as exc:
        raise _error(exc) from exc
    except requests.RequestException as exc:
        raise GitHubError(0, str(exc), unanswered=True) from exc
    finally:
        client.close()
    return dict(data) if isinstance(data, dict) else {}


def request(
    requester: Requester,
    verb: str,
    url: str,
    *,
    params: dict[str, Any] | None = None,
    body: Any = None,
    headers: dict[str, str] | None = None,
    installation_id: int | None = None,
) -> tuple[dict[str, Any], Any]:
    """Make one call through PyGithub and record it (status, remaining rate limit) in the metrics."""
    api = "graphql" if url == requester.graphql_url else "rest"
    try:
        answer_headers, data = requester.requestJsonAndCheck(
            verb, url, parameters=params, input=body, headers=headers
        )
    except GithubException as exc:
        _record_call(api, verb, exc.status, exc.headers, installation_id)
        raise
    except Exception:
        record_github_call(api, verb, "error")
        raise
    # PyGithub returns no status with a success: every success is counted as "2xx".
    _record_call(api, verb, "2xx", answer_headers, installation_id)
    return answer_headers, data


def _record_call(
    api: str, verb: str, status: int | str, headers: dict[str, Any] | None, installation_id: int | None
) -> None:
    """Record a call's status and, when GitHub sent it, the installation's remaining rate limit."""
    remaining = (headers or {}).get("x-ratelimit-remaining")
    record_github_call(
        api,
        verb,
        status,
        installation_id=installation_id,
        remaining=int(str(remaining)) if str(remaining or "").isdigit() else None,
    )


def _delivery(item: dict[str, Any]) -> HookDelivery:
    return HookDelivery(
        id=int(item["id"]),
        guid=str(item.get("guid", "")),
        delivered_at=str(item.get("delivered_at", "")),
        status=str(item.get("status", "")),
        status_code=int(item.get("status_code") or 0),
        event=str(item.get("event", "")),
        action=item.get("action"),
        redelivery=bool(item.get("redelivery", False)),
    )


def _next_cursor(link: str) -> str | None:
    for part in link.split(","):
        if 'rel="next"' in part and "cursor=" in part:
            query = part[part.index("<") + 1 : part.index(">")].split("?", 1)[-1]
            for pair in query.split("&"):
                key, _, value = pair.partition("=")
                if key == "cursor":
                    return value
    return None


class Installation:
    """The installation-token client the flows use; every method is one or a few REST/GraphQL calls."""

    def __init__(
        self,
        github: Github,
        installation_id: int,
        *,
        own_login: str | Callable[[], str] = "",
        limits: WriteLimits | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.github = github
        self.installation_id = installation_id
        self._own_login = own_login
        self.limits = limits or WriteLimits()
        self._budget = budget or WriteBudget(self.limits)
        # Writes go one at a time: GitHub asks for content-creating requests to be made serially.
        self._writing = threading.Lock()

    @property
    def own_login(self) -> str:
        """Return the login Spark's own comments carry: only its markers count as Spark's memory."""
        login = self._own_login
        return login() if callable(login) else login

    def is_own(self, login: str) -> bool:
        """Return whether ``login`` (as REST spells it, see ``_login``) is Spark itself."""
        own = self.own_login
        return bool(own) and login == own

    @property
    def requester(self) -> Requester:
        """Return PyGithub's requester (auth, retries, pool) for calls it does not wrap."""
        requester: Requester = self.github.requester
        return requester

    def close(self) -> None:
        """Close this installation's connection pool."""
        self.github.close()

    def _call(
        self,
        verb: str,
        url: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        write: bool | None = None,
    ) -> tuple[dict[str, Any], Any]:
        try:
            return self._request(verb, url, params=params, body=body, headers=headers, write=write)
        except GithubException as exc:
            raise _error(exc) from exc

    def _request(
        self,
        verb: str,
        url: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        write: bool | None = None,
    ) -> tuple[dict[str, Any], Any]:
        """Make one call within GitHub's limits; a write (by default any non-GET) waits its turn.

        Raises ``RateLimited`` when GitHub asks for a longer wait than a job should sleep, and an
        ``unanswered`` ``GitHubError`` when the answer was lost; other refusals stay ``GithubException``.
        """
        is_write = verb.upper() in WRITE_METHODS if write is None else write
        for attempt in range(RATE_LIMIT_RETRIES + 1):
            try:
                if not is_write:
                    return self._send(verb, url, params, body, headers)
                with self._writing:
                    self._wait_for_budget()
                    return self._send(verb, url, params, body, headers)
            except GithubException as exc:
                data = exc.data if isinstance(exc.data, dict) else {}
                wait = rate_limit_wait(
                    exc.status,
                    exc.headers,
                    str(data.get("message") or ""),
                    now=time.time(),
                    secondary_wait=self.limits.secondary_wait,
                )
                if wait is None:
                    raise
                if wait > self.limits.max_inline_wait or attempt == RATE_LIMIT_RETRIES:
                    raise RateLimited(exc.status, str(data.get("message") or "rate limited"), wait) from exc
                time.sleep(wait)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _send(
        self,
        verb: str,
        url: str,
        params: dict[str, Any] | None,
        body: Any,
        headers: dict[str, str] | None,
    ) -> tuple[dict[str, Any], Any]:
        try:
            return request(
                self.requester,
                verb,
                url,
                params=params,
                body=body,
                headers=headers,
                installation_id=self.installation_id,
            )
        except requests.RequestException as exc:
            # The transport gave up (timeout, reset): a write may or may not have happened.
            raise GitHubError(0, f"no answer from GitHub ({type(exc).__name__})", unanswered=True) from exc

    def _wait_for_budget(self) -> None:
        """Hold this write until the installation's minute and hour budgets allow it (or defer the job)."""
        # Wall-clock time: a shared budget compares it across processes and machines.
        while (wait := self._budget.reserve(time.time())) > 0:
            if wait > self.limits.max_inline_wait:
                raise RateLimited(429, "Spark's own write budget for this installation is spent", wait)
            time.sleep(wait)

    def _pages(self, url: str, params: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        page = 1
        while True:
            _, data = self._call("GET", url, params={**(params or {}), "per_page": PER_PAGE, "page": page})
            items = data if isinstance(data, list) else []
            yield from items
            if len(items) < PER_PAGE:
                return
            page += 1

    # Pull requests ---------------------------------------------------------------------------------------

    def pull(self, repo: str, number: int) -> PullInfo:
        """Return the pull request's head, base, fork status and ``maintainer_can_modify``."""
        _, data = self._call("GET", f"/repos/{repo}/pulls/{number}")
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
            )
            for item in self._pages(f"/repos/{repo}/pulls/{number}/files")
        ]

    def pull_diff(self, repo: str, number: int) -> PullDiff:
        """Return the unified diff; if GitHub refuses it as too large (406), rebuild it from file patches."""
        try:
            _, data = self._request(
                "GET", f"/repos/{repo}/pulls/{number}", headers={"Accept": DIFF_MEDIA_TYPE}
            )
        except GithubException as exc:
            if exc.status != 406:
                raise _error(exc) from exc
            return diff_from_files(self.pull_files(repo, number))
        # PyGithub wraps a non-JSON body as {"data": text}.
        text = data.get("data", "") if isinstance(data, dict) else str(data)
        return PullDiff(text=str(text), source="raw")

    def file_text(self, repo: str, path: str, ref: str, *, max_bytes: int | None = None) -> str | None:
        """Return a regular file's text at ``ref``, or None when nothing exists at ``path`` there.

        Raises ``Unreadable`` for a symlink, a submodule or a directory, for a file over ``max_bytes``, and
        for one whose content GitHub did not send in full: an unreadable file is never read as empty. Files
        over 1 MB come without content from the contents API; they are read through the blob API (up to
        100 MB) only when ``max_bytes`` allows them
        (https://docs.github.com/rest/repos/contents#get-repository-content).
        """
        try:
            _, data = self._call("GET", f"/repos/{repo}/contents/{quote(path)}", params={"ref": ref})
        except GitHubError as exc:
            if exc.status == 404:
                return None
            if exc.status == 403 and "too large" in exc.message.lower():
                raise Unreadable(path, "too large for GitHub's API (over 100 MB)") from exc
            raise
        if not isinstance(data, dict):
            raise Unreadable(path, "a directory")
        kind = data.get("type")
        # A symlink to a file comes back as that file, with `target` set (GitHub follows the link).
        target = data.get("target")
        if kind == "symlink" or target or str(data.get("path") or path) != path:
            raise Unreadable(path, f"a symbolic link to `{target or data.get('path')}`")
        if kind == "submodule" or data.get("submodule_git_url"):
            raise Unreadable(path, "a submodule (a commit of another repository)")
        if kind != "file":
            raise Unreadable(path, f"not a file (GitHub says {kind!r})")
        size = int(data.get("size") or 0)
        if max_bytes is not None and size > max_bytes:
            raise Unreadable(path, f"too large ({size:,} bytes; the limit is {max_bytes:,})")
        raw = self._file_bytes(repo, path, data) if size else b""
        if len(raw) != size:
            raise Unreadable(path, f"a file GitHub sent only in part ({len(raw):,} of {size:,} bytes)")
        return raw.decode("utf-8", errors="surrogateescape")

    def _file_bytes(self, repo: str, path: str, data: dict[str, Any]) -> bytes:
        """Return a file's bytes: inline base64 up to 1 MB, else through the blob API (up to 100 MB)."""
        if data.get("encoding") == "base64" and data.get("content"):
            return base64.b64decode(str(data["content"]))
        try:
            _, blob = self._call("GET", f"/repos/{repo}/git/blobs/{data['sha']}")
        except GitHubError as exc:
            if exc.status == 403 and "too large" in exc.message.lower():
                raise Unreadable(path, "too large for GitHub's API (over 100 MB)") from exc
            raise
        if blob.get("encoding") != "base64":
            raise Unreadable(path, f"a file in an unknown encoding ({blob.get('encoding')!r})")
        return base64.b64decode(str(blob.get("content") or ""))

    def tree_paths(self, repo: str, ref: str) -> tuple[list[str], bool]:
        """Return every file path at ``ref`` (one recursive tree call) and whether GitHub listed them all."""
        _, data = self._call("GET", f"/repos/{repo}/git/trees/{ref}", params={"recursive": "1"})
        if not isinstance(data, dict):
            raise GitHubError(0, f"the tree at {ref[:12]} is not a JSON object")
        paths = [str(e["path"]) for e in data.get("tree") or [] if e.get("type") == "blob" and e.get("path")]
        return paths, not data.get("truncated")

    def permission(self, repo: str, login: str) -> str:
        """Return ``login``'s permission on the repository: admin, maintain, write, triage, read or none."""
        try:
            _, data = self._call("GET", f"/repos/{repo}/collaborators/{login}/permission")
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
            self._call("POST", url, body={"content": content})
        except GitHubError as exc:
            if not exc.maybe_done or isinstance(exc, RateLimited):
                raise
            # GitHub answers an existing reaction with 200, so resending after a 5xx cannot duplicate it.
            self._call("POST", url, body={"content": content})

    def comment(self, repo: str, number: int, body: str) -> CommentRef:
        """Post a comment in the pull request's conversation."""
        _, data = self._call("POST", f"/repos/{repo}/issues/{number}/comments", body={"body": outbound(body)})
        return _comment(data)

    def edit_comment(self, repo: str, comment_id: int, body: str) -> CommentRef:
        """Replace an issue comment's body."""
        _, data = self._call(
            "PATCH", f"/repos/{repo}/issues/comments/{comment_id}", body={"body": outbound(body)}
        )
        return _comment(data)

    def find_comment(self, repo: str, number: int, key: str) -> CommentRef | None:
        """Return Spark's earlier conversation comment carrying the ``reply`` marker of ``key``, if any.

        Only a comment the App wrote counts: anyone can paste a marker into their own comment.
        """
        for item in self._pages(f"/repos/{repo}/issues/{number}/comments"):
            author = str((item.get("user") or {}).get("login") or "")
            if self.is_own(author) and markers.carries(str(item.get("body") or ""), "reply", key):
                return _comment(item)
        return None

    def upsert_comment(self, repo: str, number: int, key: str, body: str) -> CommentRef:
        """Post ``body`` under the ``reply`` marker of ``key``, or edit the comment carrying it (once)."""
        text = markers.append(body, "reply", key)
        existing = self.find_comment(repo, number, key)
        if existing is None:
            try:
                return self.comment(repo, number, text)
            except GitHubError as exc:
                if not exc.maybe_done:
                    raise
                # A 5xx or a lost answer may hide a stored comment: look before posting again.
                existing = self.find_comment(repo, number, key)
                if existing is None:
                    return self.comment(repo, number, text)
        if existing.body == outbound(text):
            return existing
        return self.edit_comment(repo, existing.id, text)

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
            for item in self._pages(f"/repos/{repo}/pulls/{number}/comments")
        ]

    def reply_to_review_comment(self, repo: str, number: int, comment_id: int, body: str) -> CommentRef:
        """Reply in the thread of a top-level review comment."""
        _, data = self._call(
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
            _, data = self._call("POST", url, body=payload)
        except GitHubError as exc:
            if not exc.maybe_done or key is None:
                raise
            found = self.find_review(repo, number, key)
            if found is not None:
                return found
            _, data = self._call("POST", url, body=payload)
        SUGGESTIONS_POSTED.inc(sum(read_suggestion(c.body) is not None for c in comments))
        return int(data["id"])

    def find_review(self, repo: str, number: int, key: str) -> int | None:
        """Return the id of Spark's own review of the pull request carrying ``key``'s ``reply`` marker."""
        for item in self._pages(f"/repos/{repo}/pulls/{number}/reviews"):
            author = str((item.get("user") or {}).get("login") or "")
            if self.is_own(author) and markers.carries(str(item.get("body") or ""), "reply", key):
                return int(item["id"])
        return None

    def commit(self, repo: str, sha: str) -> CommitInfo:
        """Return a commit's message and page (GitHub serves a fork PR's commits from the base repo too)."""
        _, data = self._call("GET", f"/repos/{repo}/commits/{sha}")
        return _commit_info(data, sha)

    def commits_between(self, repo: str, base: str, head: str) -> list[CommitInfo]:
        """Return the commits reachable from ``head``, not from ``base``, oldest first (GitHub's compare)."""
        _, data = self._call("GET", f"/repos/{repo}/compare/{base}...{head}")
        return [_commit_info(item, "") for item in data.get("commits") or []]

    def edit_pull_body(self, repo: str, number: int, body: str) -> None:
        """Replace the pull request's description."""
        self._call("PATCH", f"/repos/{repo}/pulls/{number}", body={"body": outbound(body)})

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
            _, data = self._call("POST", f"/repos/{repo}/check-runs", body=payload)
        except GitHubError as exc:
            if not exc.maybe_done or not external_id:
                raise
            _, found = self._call(
                "GET", f"/repos/{repo}/commits/{head_sha}/check-runs", params={"check_name": name}
            )
            for run in found.get("check_runs", []):
                if run.get("external_id") == external_id:
                    return int(run["id"])
            _, data = self._call("POST", f"/repos/{repo}/check-runs", body=payload)
        return int(data["id"])

    def update_check_run(self, repo: str, check_run_id: int, **fields: Any) -> None:
        """Update a check run (status, conclusion, output, actions)."""
        self._call("PATCH", f"/repos/{repo}/check-runs/{check_run_id}", body=_outbound_fields(fields))

    # GraphQL --------------------------------------------------------------------------------------------

    def graphql(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        """Run a GraphQL document; return the whole response (``data`` and ``errors``) for the caller.

        A query is a read: sent again once when its answer was lost. A mutation is a write: it waits its
        turn and is never resent here (``expectedHeadOid`` lets the caller find out what happened).
        """
        mutation = query.lstrip().startswith("mutation")
        payload = {"query": query, "variables": variables}
        url = self.requester.graphql_url
        try:
            headers, data = self._call("POST", url, body=payload, write=mutation)
        except GitHubError as exc:
            if mutation or not exc.maybe_done or isinstance(exc, RateLimited):
                raise
            headers, data = self._call("POST", url, body=payload, write=False)
        errors = data.get("errors") or [] if isinstance(data, dict) else []
        if any(isinstance(e, dict) and e.get("type") == "RATE_LIMITED" for e in errors):
            wait = rate_limit_wait(
                403,
                headers,
                "rate limit exceeded",
                now=time.time(),
                secondary_wait=self.limits.secondary_wait,
            )
            raise RateLimited(200, "GraphQL rate limit exceeded", wait or self.limits.secondary_wait)
        return dict(data)

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
        """Commit file changes with ``createCommitOnBranch`` (GitHub signs it) unless the branch moved.

        GitHub answers a refused mutation with HTTP 200 and typed ``errors``: a moved branch is
        ``BranchMoved``, a protection rule, ruleset or missing permission is ``PushRefused``; anything else
        raises ``GitHubError`` with the status the type stands for (only a 5xx-like one is worth retrying).
        """
        changes: dict[str, Any] = {
            "additions": [
                {"path": path, "contents": base64.b64encode(data).decode()}
                for path, data in (additions or {}).items()
            ],
            "deletions": [{"path": path} for path in deletions],
        }
        message: dict[str, str] = {"headline": outbound(headline)}
        if body:
            message["body"] = outbound(body)
        variables = {
            "input": {
                "branch": {"repositoryNameWithOwner": repo, "branchName": branch},
                "message": message,
                "fileChanges": changes,
                "expectedHeadOid": expected_head,
            }
        }
        result = self.graphql(_COMMIT_MUTATION, variables)
        errors = result.get("errors") or []
        if errors:
            text = "; ".join(str(e.get("message", e)) for e in errors)
            if any(_is_stale(e) for e in errors):
                return BranchMoved(expected_head=expected_head, message=text)
            refused = _push_refusal(errors)
            if refused is not None:
                return refused
            raise GitHubError(_graphql_status(errors), f"createCommitOnBranch failed: {text}")
        commit = result["data"]["createCommitOnBranch"]["commit"]
        return Committed(oid=str(commit["oid"]), url=str(commit.get("url") or ""))

    def review_threads(self, repo: str, number: int) -> list[ReviewThread]:
        """Return every review thread of the pull request with its first comment."""
        owner, name = repo.split("/", 1)
        threads: list[ReviewThread] = []
        cursor: str | None = None
        while True:
            result = self.graphql(
                _THREADS_QUERY, {"owner": owner, "name": name, "number": number, "cursor": cursor}
            )
            if result.get("errors"):
                raise GitHubError(0, "reviewThreads failed: " + str(result["errors"][0].get("message")))
            page = result["data"]["repository"]["pullRequest"]["reviewThreads"]
            threads.extend(_thread(node) for node in page["nodes"])
            if not page["pageInfo"]["hasNextPage"]:
                return threads
            cursor = page["pageInfo"]["endCursor"]

    def resolve_thread(self, thread_id: str) -> bool:
        """Resolve a review thread; return whether GitHub now reports it resolved."""
        result = self.graphql(_RESOLVE_MUTATION, {"id": thread_id})
        if result.get("errors"):
            raise GitHubError(0, "resolveReviewThread failed: " + str(result["errors"][0].get("message")))
        return bool(result["data"]["resolveReviewThread"]["thread"]["isResolved"])


_COMMIT_MUTATION = """
mutation($input: CreateCommitOnBranchInput!) {
  createCommitOnBranch(input: $input) { commit { oid url } }
}
"""

_THREADS_QUERY = """
query($owner: String!, $name: String!, $number: Int!, $cursor: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $cursor) {
        pageInfo { hasNextPage endCursor }
        nodes {
          id isResolved isOutdated path line startLine
          comments(first: 1) { nodes { databaseId body author { __typename login } } }
        }
      }
    }
  }
}
"""

_RESOLVE_MUTATION = """
mutation($id: ID!) { resolveReviewThread(input: {threadId: $id}) { thread { id isResolved } } }
"""


def _is_stale(error: dict[str, Any]) -> bool:
    # GitHub answers a moved branch with type STALE_DATA and "Expected branch to point to ...".
    return (
        error.get("type") == "STALE_DATA"
        or "expected branch to point to" in str(error.get("message")).lower()
    )


# GraphQL error types and the HTTP status each stands for; an untyped error is GitHub failing (retryable).
_GRAPHQL_STATUS = {
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "UNPROCESSABLE": 422,
    "BRANCH_PROTECTION_RULE_VIOLATION": 422,
    "STALE_DATA": 409,
    "RATE_LIMITED": 429,
    "SERVICE_UNAVAILABLE": 503,
    "INTERNAL": 502,
    "TIMEOUT": 504,
}


def _graphql_status(errors: Sequence[dict[str, Any]]) -> int:
    types = [str(e.get("type") or "") for e in errors]
    return max((_GRAPHQL_STATUS.get(t, 502) if t else 502) for t in types)


def _push_refusal(errors: Sequence[dict[str, Any]]) -> PushRefused | None:
    """Return the refusal a push's errors carry: a protection rule, a ruleset, or no permission."""
    for error in errors:
        kind, message = str(error.get("type") or ""), str(error.get("message") or "")
        # GitHub lists each broken rule on its own "- " line, as `git push` prints after GH013.
        rules = tuple(line[2:].strip() for line in message.splitlines() if line.startswith("- "))
        if kind == "BRANCH_PROTECTION_RULE_VIOLATION" or "protected branch" in message.lower():
            return PushRefused("branch protection", rules or (message.strip().split("\n", 1)[0],), message)
        if "rule violations" in message.lower():
            return PushRefused("ruleset", rules or (message.strip().split("\n", 1)[0],), message)
        if kind == "FORBIDDEN":
            return PushRefused("permissions", (message,), message)
    return None


def _thread(node: dict[str, Any]) -> ReviewThread:
    comments = (node.get("comments") or {}).get("nodes") or [{}]
    first = comments[0] if comments else {}
    return ReviewThread(
        id=str(node["id"]),
        is_resolved=bool(node.get("isResolved")),
        is_outdated=bool(node.get("isOutdated")),
        path=str(node.get("path") or ""),
        line=node.get("line"),
        start_line=node.get("startLine"),
        first_comment_id=first.get("databaseId"),
        first_comment_body=str(first.get("body") or ""),
        first_comment_author=_login(first.get("author") or {}),
    )


def _login(actor: dict[str, Any]) -> str:
    """Return an actor's login as REST spells it: GraphQL's bot ``x`` is REST's ``x[bot]``."""
    login = str(actor.get("login") or "")
    return f"{login}[bot]" if actor.get("__typename") == "Bot" and login else login


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
