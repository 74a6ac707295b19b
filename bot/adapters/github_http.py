"""One installation's calls to GitHub through PyGithub's ``Requester``: GitHub's limits, safe resends, errors.

Calls go through the ``Requester`` with explicit paths, not lazy object graphs, so each operation costs
exactly the requests it needs (no ``GET /repos/o/r`` before every call). PyGithub's client-side sleeps (0.25 s
between requests, 1 s between writes) are off; GitHub's limits are met here instead
(``bot.adapters.ratelimit``): writes go one at a time per installation within 80 a minute and 500 an hour; a
rate-limit answer (403 or 429) is waited out in place when short and raised as ``RateLimited`` when long, so
the job is deferred rather than a worker sleeping for a minute. A request is resent by the transport only
when that is safe: a connection that never carried it, or a read that changes nothing; a write whose answer
was lost (``unanswered``) is looked for by its hidden marker (by the client) before it is sent again, never
resent blindly. Every refusal leaves as a ``GitHubError``, and every call is counted in the metrics.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import requests
from github import Github, GithubException
from github.Requester import Requester
from urllib3.util.retry import Retry

from bot.adapters.github_port import GitHubError, RateLimited
from bot.adapters.ratelimit import Budget, WriteBudget, WriteLimits, rate_limit_wait
from bot.metrics import record_github_call

# Resent by the transport after a lost answer or a 5xx: reads, and PATCH (idempotent for what Spark patches:
# comment bodies, check runs, a ref to a given SHA). Never POST: a comment or review could be made twice.
RETRIED_METHODS = Retry.DEFAULT_ALLOWED_METHODS | {"PATCH"}
WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
# Rate-limit answers waited out in place per call before the job is deferred.
RATE_LIMIT_RETRIES = 3
PER_PAGE = 100

_T = TypeVar("_T")


def default_retry() -> Retry:
    """Return the transport's retry policy (urllib3): what is safe to resend without asking GitHub.

    A failed connection is retried for every method (nothing was sent). A lost answer or a 5xx is retried
    only for ``RETRIED_METHODS``: a POST may have created its comment or review, so it surfaces as an
    ``unanswered``/5xx ``GitHubError`` and the adapter looks for the write before sending it again.
    Rate-limit answers are not retried here: ``Transport`` waits them out or defers the job.
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


def github_error(exc: GithubException) -> GitHubError:
    """Return PyGithub's refusal as a ``GitHubError`` with GitHub's status and message."""
    data = exc.data if isinstance(exc.data, dict) else {}
    message = str(data.get("message") or exc.message or exc)
    return GitHubError(exc.status, message)


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


class Transport:
    """One installation's calls within GitHub's limits; every refusal leaves as a ``GitHubError``."""

    def __init__(
        self,
        github: Github,
        installation_id: int,
        *,
        limits: WriteLimits | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.github = github
        self.installation_id = installation_id
        self.limits = limits or WriteLimits()
        self._budget = budget or WriteBudget(self.limits)
        # Writes go one at a time: GitHub asks for content-creating requests to be made serially.
        self._writing = threading.Lock()

    @property
    def requester(self) -> Requester:
        """Return PyGithub's requester (auth, retries, pool)."""
        requester: Requester = self.github.requester
        return requester

    def close(self) -> None:
        """Close this installation's connection pool."""
        self.github.close()

    def call(
        self,
        verb: str,
        url: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        write: bool | None = None,
    ) -> tuple[dict[str, Any], Any]:
        """Make one call within GitHub's limits and return its headers and decoded body.

        A write (by default any non-GET) waits its turn. Raises ``RateLimited`` when GitHub asks for a longer
        wait than a job should sleep, an ``unanswered`` ``GitHubError`` when the answer was lost, and a
        ``GitHubError`` with GitHub's status for any other refusal.
        """
        is_write = verb.upper() in WRITE_METHODS if write is None else write
        return self._limited(lambda: self._send(verb, url, params, body, headers), is_write)

    def archive_link(self, repo: str, ref: str) -> str:
        """Return where the tarball of ``repo`` at ``ref`` downloads from (GitHub answers with a redirect).

        PyGithub's ``Repository.get_archive_link`` on a lazy repository: exactly the one request.
        """
        repository = self.github.withLazy(True).get_repo(repo)

        def send() -> str:
            try:
                # No ref: the default branch (the archive's header names its commit).
                link = (
                    repository.get_archive_link("tarball", ref)
                    if ref
                    else repository.get_archive_link("tarball")
                )
            except GithubException as exc:
                _record_call("rest", "GET", exc.status, exc.headers, self.installation_id)
                raise
            except requests.RequestException as exc:
                raise GitHubError(
                    0, f"no answer from GitHub ({type(exc).__name__})", unanswered=True
                ) from exc
            _record_call("rest", "GET", "2xx", None, self.installation_id)
            return link

        return self._limited(send, False)

    def _limited(self, send: Callable[[], _T], is_write: bool) -> _T:
        """Send within GitHub's limits: writes one at a time, in the budget; rate limits waited or raised."""
        for attempt in range(RATE_LIMIT_RETRIES + 1):
            try:
                if not is_write:
                    return send()
                with self._writing:
                    self._wait_for_budget()
                    return send()
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
                    raise github_error(exc) from exc
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

    def pages(self, url: str, params: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Yield every item of a paged REST list, a hundred a page."""
        page = 1
        while True:
            _, data = self.call("GET", url, params={**(params or {}), "per_page": PER_PAGE, "page": page})
            items = data if isinstance(data, list) else []
            yield from items
            if len(items) < PER_PAGE:
                return
            page += 1

    def graphql(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        """Run a GraphQL document; return the whole response (``data`` and ``errors``) for the caller.

        A query is a read: sent again once when its answer was lost. A mutation is a write: it waits its
        turn and is never resent here (``expectedHeadOid`` lets the caller find out what happened).
        """
        mutation = query.lstrip().startswith("mutation")
        payload = {"query": query, "variables": variables}
        url = self.requester.graphql_url
        try:
            headers, data = self.call("POST", url, body=payload, write=mutation)
        except GitHubError as exc:
            if mutation or not exc.maybe_done or isinstance(exc, RateLimited):
                raise
            headers, data = self.call("POST", url, body=payload, write=False)
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
