"""Who Spark acts as on GitHub: the App (JWT calls, a warm ``Installation`` per installation), or a token.

One ``GitHubApp`` per process. It keeps one PyGithub ``Github`` object per installation for the life of the
process, so its connection pool stays warm and PyGithub's ``AppInstallationAuth`` keeps the installation token
until shortly before it expires (PyGithub re-mints 20 s early). The App's own calls (its slug, its webhook
delivery log, the manifest flow's code exchange) are made here too, through the same metered ``request``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import jwt
import requests
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from github import Auth, Github, GithubException, GithubIntegration
from github.Requester import Requester
from urllib3.util.retry import Retry

from bot.adapters.github import Installation
from bot.adapters.github_http import PER_PAGE, default_retry, github_error, request
from bot.adapters.github_port import GitHubError
from bot.adapters.ratelimit import Budget, WriteBudget, WriteLimits
from bot.settings import Settings


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


def write_limits(settings: Settings) -> WriteLimits:
    """Return the write pacing and rate-limit waits the settings ask for."""
    return WriteLimits(
        per_minute=settings.spark_github_writes_per_minute,
        per_hour=settings.spark_github_writes_per_hour,
        max_inline_wait=settings.spark_github_max_inline_wait_seconds,
        secondary_wait=settings.spark_github_secondary_wait_seconds,
    )


@functools.lru_cache(maxsize=2)
def _rsa_key(private_key: str) -> RSAPrivateKey:
    """Parse the App's key (a process has one; parsing checks the RSA key, which is what costs)."""
    key = load_pem_private_key(private_key.encode(), password=None)
    if not isinstance(key, RSAPrivateKey):
        raise ValueError("a GitHub App's private key is an RSA key")
    return key


def jwt_signer(private_key: str) -> Callable[[dict[str, Any]], str]:
    """Return a function signing the App's JWTs (RS256) with ``private_key``, loaded once.

    Given the PEM text, PyGithub's signer parses it again for every JWT, and parsing checks the RSA key:
    about 50 ms of CPU each time, against under 1 ms to sign with the loaded key.
    """
    key = _rsa_key(private_key)

    def sign(payload: dict[str, Any]) -> str:
        return jwt.encode(payload, key=key, algorithm="RS256")

    return sign


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
        pool_size: int = 48,
        limits: WriteLimits | None = None,
        budget_for: Callable[[int, WriteLimits], Budget] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.limits = limits or WriteLimits()
        # Where each installation's writes are counted: in this process unless the caller shares a budget.
        self._budget_for = budget_for or (lambda _installation, limits: WriteBudget(limits))
        self._auth = Auth.AppAuth(app_id, sign_func=jwt_signer(private_key))
        self._kwargs = client_options(self.base_url, retry=retry, timeout=timeout, pool_size=pool_size)
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
            raise github_error(exc) from exc
        return str(data.get("slug") or data.get("name") or "")

    def repo_installation(self, owner: str, repo: str) -> int:
        """Return the id of the App's installation on ``owner/repo`` (a 404 when it is not installed)."""
        try:
            _, data = request(self._jwt_requester, "GET", f"/repos/{quote(owner)}/{quote(repo)}/installation")
        except GithubException as exc:
            raise github_error(exc) from exc
        return int(data["id"])

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
                raise github_error(exc) from exc
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
            raise github_error(exc) from exc


def client_options(
    base_url: str, *, retry: Retry | None = None, timeout: int = 15, pool_size: int = 48
) -> dict[str, Any]:
    """Return PyGithub's options: the transport's retries, none of PyGithub's sleeps (see ``Transport``)."""
    return {
        "base_url": base_url,
        "retry": retry if retry is not None else default_retry(),
        "timeout": timeout,
        "pool_size": pool_size,
        "seconds_between_requests": 0,
        "seconds_between_writes": 0,
    }


def token_client(token: str, *, base_url: str, limits: WriteLimits | None = None) -> Installation:
    """Return a client acting with ``token``: a person's (its ``own_login`` is theirs) or an installation's.

    An installation token (e.g. Actions' ``GITHUB_TOKEN``) has no user: its ``own_login`` is empty.
    """
    github = Github(auth=Auth.Token(token), **client_options(base_url.rstrip("/")))
    try:
        _, data = request(github.requester, "GET", "/user")
        login = str(data.get("login") or "")
    except GithubException:
        login = ""
    except requests.RequestException as exc:
        github.close()
        raise GitHubError(0, f"no answer from GitHub ({type(exc).__name__})", unanswered=True) from exc
    return Installation(github, 0, own_login=login, limits=limits)


def exchange_manifest_code(api_url: str, code: str, *, timeout: int) -> dict[str, Any]:
    """Trade an App-manifest ``code`` for the new App's settings (``POST /app-manifests/{code}/conversions``).

    Unauthenticated, as GitHub specifies, and never resent: a code works once, so a replayed POST could only
    fail. A refusal raises ``GitHubError`` with GitHub's status; no answer at all raises one with status 0.
    """
    client = Github(base_url=api_url, retry=None, timeout=timeout)
    try:
        _, data = request(client.requester, "POST", f"/app-manifests/{quote(code)}/conversions")
    except GithubException as exc:
        raise github_error(exc) from exc
    except requests.RequestException as exc:
        raise GitHubError(0, str(exc), unanswered=True) from exc
    finally:
        client.close()
    return dict(data) if isinstance(data, dict) else {}


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
