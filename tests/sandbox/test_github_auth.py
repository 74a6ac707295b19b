"""App authentication as GitHub does it, driven by the real PyGithub client (and requests for raw checks)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import jwt
import pytest
import requests
from github import (
    Auth,
    BadCredentialsException,
    Github,
    GithubException,
    GithubIntegration,
    UnknownObjectException,
)

from sandbox.github import GitHubSandbox
from sandbox.github.auth import generate_private_key_pem
from sandbox.github.routes import manifest as manifest_module

KEY = generate_private_key_pem()
OTHER_KEY = generate_private_key_pem()


@pytest.fixture()
def gh() -> Iterator[GitHubSandbox]:
    """A running sandbox with one installation and one repository."""
    with GitHubSandbox(private_key_pem=KEY) as sandbox:
        installation = sandbox.create_installation("acme")
        sandbox.create_repo("acme/app", {"a.py": "x = 1\n"}, installation, private=True)
        yield sandbox


def integration(gh: GitHubSandbox, auth: Auth.AppAuth) -> GithubIntegration:
    return GithubIntegration(auth=auth, base_url=gh.url, seconds_between_requests=0, seconds_between_writes=0)


def test_app_jwt_signed_by_the_app_key_is_accepted(gh: GitHubSandbox) -> None:
    app = gh.integration().get_app()
    assert app.id == gh.app_id
    assert app.slug == gh.app_slug
    installation = gh.integration().get_repo_installation("acme", "app")
    assert installation.id == next(iter(gh.state.installations))


def test_jwt_signed_by_another_key_is_401(gh: GitHubSandbox) -> None:
    with pytest.raises(GithubException) as caught:
        integration(gh, Auth.AppAuth(gh.app_id, OTHER_KEY)).get_app()
    assert caught.value.status == 401
    assert caught.value.data["message"] == "A JSON web token could not be decoded"


def test_expired_jwt_is_401(gh: GitHubSandbox) -> None:
    now = int(time.time())
    expired = jwt.encode({"iat": now - 700, "exp": now - 60, "iss": str(gh.app_id)}, KEY, algorithm="RS256")
    with pytest.raises(GithubException) as caught:
        client = Github(auth=Auth.AppAuthToken(expired), base_url=gh.url, retry=None)
        client.requester.requestJsonAndCheck("GET", "/app")
    assert caught.value.status == 401
    assert "'Expiration time' claim ('exp')" in caught.value.data["message"]


def test_installation_token_is_not_an_app_credential(gh: GitHubSandbox) -> None:
    token = gh.integration().get_access_token(next(iter(gh.state.installations))).token
    response = requests.get(f"{gh.url}/app", headers={"Authorization": f"token {token}"}, timeout=5)
    assert response.status_code == 401


def test_api_calls_need_a_live_installation_token(gh: GitHubSandbox) -> None:
    installation = next(iter(gh.state.installations))
    token = gh.integration().get_access_token(installation)
    assert token.token.startswith("ghs_")
    assert 3500 < token.expires_at.timestamp() - time.time() <= 3600
    headers = {"Authorization": f"token {token.token}"}
    ok = requests.get(f"{gh.url}/repos/acme/app", headers=headers, timeout=5)
    assert ok.status_code == 200
    assert ok.headers["x-ratelimit-limit"] == "5000"
    assert int(ok.headers["x-ratelimit-remaining"]) < 5000
    assert {"x-ratelimit-reset", "x-ratelimit-used", "x-ratelimit-resource"} <= set(ok.headers.keys())
    gh.expire_tokens()
    expired = requests.get(f"{gh.url}/repos/acme/app", headers=headers, timeout=5)
    assert expired.status_code == 401
    assert expired.json()["message"] == "Bad credentials"
    missing = requests.get(f"{gh.url}/repos/acme/app", timeout=5)
    assert missing.status_code == 401
    assert missing.json()["message"] == "Requires authentication"


def test_short_token_ttl_makes_pygithub_mint_again(gh: GitHubSandbox) -> None:
    gh.token_ttl = 5  # below PyGithub's 20 s refresh threshold: a fresh token before every call
    client = gh.client(next(iter(gh.state.installations)))
    client.get_repo("acme/app")
    client.get_repo("acme/app")
    mints = [r for r in gh.request_log if r.path.endswith("/access_tokens")]
    assert len(mints) == 2


def test_token_of_another_installation_sees_no_private_repo(gh: GitHubSandbox) -> None:
    other = gh.create_installation("someone-else")
    with pytest.raises(UnknownObjectException):
        gh.client(other).get_repo("acme/app")


def test_unknown_installation_is_404(gh: GitHubSandbox) -> None:
    with pytest.raises(UnknownObjectException):
        gh.integration().get_access_token(999_999)


def test_manifest_flow_yields_working_credentials(gh: GitHubSandbox) -> None:
    manifest = (
        '{"name": "Spark", "url": "https://spark.example", "hook_attributes": {"url": "http://127.0.0.1:9/hook"},'
        ' "redirect_url": "http://127.0.0.1:9/setup/callback?x=1"}'
    )
    session = requests.Session()
    page = session.post(f"{gh.url}/settings/apps/new", data={"manifest": manifest, "state": "s1"}, timeout=5)
    assert page.status_code == 200
    assert 'id="create-app"' in page.text
    confirm = session.post(
        f"{gh.url}/settings/apps/new/confirm",
        data={"manifest": manifest, "state": "s1"},
        allow_redirects=False,
        timeout=5,
    )
    assert confirm.status_code == 302
    location = confirm.headers["Location"]
    assert location.startswith("http://127.0.0.1:9/setup/callback?x=1&code=")
    assert location.endswith("&state=s1")
    code = location.split("code=")[1].split("&")[0]
    converted = session.post(f"{gh.url}/app-manifests/{code}/conversions", timeout=5)
    assert converted.status_code == 201
    body = converted.json()
    assert {"id", "slug", "pem", "webhook_secret", "client_id", "client_secret"} <= body.keys()
    assert body["webhook_secret"] == gh.webhook_secret
    again = session.post(f"{gh.url}/app-manifests/{code}/conversions", timeout=5)
    assert again.status_code == 404  # codes are single-use
    app = integration(gh, Auth.AppAuth(body["id"], body["pem"])).get_app()
    assert app.slug == body["slug"]


def test_manifest_without_redirect_url_is_refused(gh: GitHubSandbox) -> None:
    response = requests.post(
        f"{gh.url}/settings/apps/new", data={"manifest": '{"url": "x", "hook_attributes": {}}'}, timeout=5
    )
    assert response.status_code == 422


def test_github_client_with_bad_token_is_401(gh: GitHubSandbox) -> None:
    client = Github(auth=Auth.Token("ghs_not_a_token"), base_url=gh.url, retry=None)
    with pytest.raises(BadCredentialsException):
        client.get_repo("acme/app")


def test_manifest_codes_expire(gh: GitHubSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manifest_module, "CODE_TTL", -1.0)  # a code already past GitHub's one hour
    manifest = '{"url": "https://x", "hook_attributes": {"url": "https://x/h"}, "redirect_url": "http://127.0.0.1:9/cb"}'
    confirm = requests.post(
        f"{gh.url}/settings/apps/new/confirm", data={"manifest": manifest}, allow_redirects=False, timeout=5
    )
    code = confirm.headers["Location"].split("code=")[1]
    assert requests.post(f"{gh.url}/app-manifests/{code}/conversions", timeout=5).status_code == 404
