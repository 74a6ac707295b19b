"""The setup page and the manifest callback, on a real Redis and the sandbox GitHub over HTTP."""

from __future__ import annotations

import html
import json
import re
import stat
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from flask import Flask
from redis.backoff import NoBackoff
from redis.retry import Retry

from bot.redis_server import PrivateRedis, free_port
from bot.settings import Settings
from bot.web.app import create_app
from bot.web.setup import (
    CONFIGURED_KEY,
    ENV_FILE_CONFIG,
    STATE_KEY,
    AppCredentials,
    SetupError,
    load_manifest,
    registration_url,
    unreachable_host,
    update_env_file,
)
from sandbox.github import GitHubSandbox

MANIFEST_FIELD = re.compile(r'name="manifest" value="([^"]*)"')
STATE_FIELD = re.compile(r'name="state" value="([^"]*)"')


def _pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


PEM = _pem()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any) -> None:
        return None


@pytest.fixture()
def github() -> Iterator[GitHubSandbox]:
    with GitHubSandbox() as sandbox:
        yield sandbox


def _confirm(github: GitHubSandbox, manifest: dict[str, Any], state: str) -> str:
    """Do what the person does on GitHub: confirm the App; return the code from the redirect to Spark."""
    form = urllib.parse.urlencode({"manifest": json.dumps(manifest), "state": state}).encode()
    opener = urllib.request.build_opener(_NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as redirect:
        opener.open(f"{github.url}/settings/apps/new/confirm", data=form, timeout=10)
    assert redirect.value.code == 302
    location = urllib.parse.urlsplit(redirect.value.headers["Location"])
    query = urllib.parse.parse_qs(location.query)
    assert location.path == "/setup/callback" and query["state"] == [state]
    return query["code"][0]


def _conversions(github: GitHubSandbox) -> list[int]:
    return [r.status for r in github.request_log if r.path.startswith("/app-manifests/")]


def _app(redis_conn: redis.Redis, tmp_path: Path, **env: str) -> Flask:
    settings = Settings.load(env=env, env_file=None)
    app = create_app(settings, redis_conn)
    app.config[ENV_FILE_CONFIG] = str(tmp_path / ".env")
    return app


def _start(app: Flask) -> tuple[dict[str, Any], str, str]:
    page = app.test_client().get("/setup", base_url="https://spark.example.org").get_data(as_text=True)
    manifest_field = MANIFEST_FIELD.search(page)
    state_field = STATE_FIELD.search(page)
    assert manifest_field and state_field, page
    action = re.search(r'<form id="register" method="post" action="([^"]*)"', page)
    assert action
    return json.loads(html.unescape(manifest_field.group(1))), state_field.group(1), action.group(1)


def test_manifest_from_app_yml_is_absolute_on_the_public_url() -> None:
    manifest = load_manifest("https://spark.example.org/")
    assert manifest["url"] == "https://spark.example.org/"
    assert manifest["hook_attributes"] == {
        "url": "https://spark.example.org/api/github/webhooks",
        "active": True,
    }
    assert manifest["redirect_url"] == "https://spark.example.org/setup/callback"
    assert manifest["public"] is False


def test_registration_url_for_account_and_organisation() -> None:
    assert registration_url("https://github.com") == "https://github.com/settings/apps/new"
    assert (
        registration_url("https://ghe.corp", "acme")
        == "https://ghe.corp/organizations/acme/settings/apps/new"
    )
    with pytest.raises(SetupError, match="organisation"):
        registration_url("https://github.com", "../evil")


def test_setup_page_posts_the_manifest_with_a_state_kept_in_redis(
    redis_conn: redis.Redis, tmp_path: Path
) -> None:
    app = _app(redis_conn, tmp_path, GITHUB_URL="https://ghe.corp")
    manifest, state, action = _start(app)
    assert action == "https://ghe.corp/settings/apps/new"
    assert manifest["hook_attributes"]["url"] == "https://spark.example.org/api/github/webhooks"
    assert redis_conn.get(STATE_KEY.format(state)) == b"1"
    assert 0 < redis_conn.ttl(STATE_KEY.format(state)) <= 3600
    # Each visit gets its own state.
    assert _start(app)[1] != state
    org_page = app.test_client().get("/setup?org=acme").get_data(as_text=True)
    assert 'action="https://ghe.corp/organizations/acme/settings/apps/new"' in org_page
    assert app.test_client().get("/setup?org=not/an/org").status_code == 400


def test_callback_writes_env_and_key_with_owner_only_permissions(
    redis_conn: redis.Redis, tmp_path: Path, github: GitHubSandbox
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("REDIS_URL=redis://127.0.0.1:1/0\nGITHUB_WEBHOOK_SECRET=old\n")
    app = _app(redis_conn, tmp_path, GITHUB_URL=github.url, GITHUB_API_URL=github.url)
    manifest, state, _ = _start(app)
    code = _confirm(github, manifest, state)

    response = app.test_client().get(f"/setup/callback?code={code}&state={state}")

    page = response.get_data(as_text=True)
    assert response.status_code == 200, page
    assert f"{github.url}/apps/spark/installations/new" in page
    assert "Restart Spark" in page
    # Next steps name what the worker still needs and the check to run.
    steps = page[page.index('id="next-steps"') :]
    assert "<code>CEREBRAS_API_KEY</code>" in steps and "spark doctor" in steps
    assert _conversions(github) == [201]
    key_path = tmp_path / f"github-app-{github.app_id}.private-key.pem"
    for path in (env_file, key_path):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert key_path.read_text() == github.private_key_pem
    lines = env_file.read_text().splitlines()
    assert lines[0] == "REDIS_URL=redis://127.0.0.1:1/0"
    assert f"GITHUB_WEBHOOK_SECRET={github.webhook_secret}" in lines
    assert "GITHUB_WEBHOOK_SECRET=old" not in lines
    # What was written is what Spark reads back: a worker could start from it.
    settings = Settings.load(env={}, env_file=env_file)
    assert settings.github_app_id == github.app_id
    assert settings.github_webhook_secret is not None
    assert settings.github_webhook_secret.get_secret_value() == github.webhook_secret
    settings.check_private_key()
    assert redis_conn.get(CONFIGURED_KEY) == str(github.app_id).encode()
    # Once configured, the page offers nothing and a second callback changes nothing.
    again = app.test_client().get("/setup").get_data(as_text=True)
    assert 'id="configured"' in again and "<form" not in again
    assert app.test_client().get(f"/setup/callback?code=x&state={state}").status_code == 409


@pytest.mark.parametrize("query", ["code={code}", "code={code}&state=", "code={code}&state=forged"])
def test_callback_without_a_known_state_is_refused(
    redis_conn: redis.Redis, tmp_path: Path, github: GitHubSandbox, query: str
) -> None:
    app = _app(redis_conn, tmp_path, GITHUB_URL=github.url, GITHUB_API_URL=github.url)
    manifest, state, _ = _start(app)
    code = _confirm(github, manifest, state)
    response = app.test_client().get("/setup/callback?" + query.format(code=code))
    assert response.status_code == 400
    assert "state" in response.get_data(as_text=True)
    assert _conversions(github) == []
    assert not (tmp_path / ".env").exists()


def test_state_works_once(redis_conn: redis.Redis, tmp_path: Path, github: GitHubSandbox) -> None:
    app = _app(redis_conn, tmp_path, GITHUB_URL=github.url, GITHUB_API_URL=github.url)
    manifest, state, _ = _start(app)
    code = _confirm(github, manifest, state)
    assert app.test_client().get(f"/setup/callback?code=nope&state={state}").status_code == 502
    # The state was spent on the failed attempt; the valid code alone does not get through.
    assert app.test_client().get(f"/setup/callback?code={code}&state={state}").status_code == 400


def test_used_or_unknown_code_is_reported_and_nothing_is_written(
    redis_conn: redis.Redis, tmp_path: Path, github: GitHubSandbox
) -> None:
    app = _app(redis_conn, tmp_path, GITHUB_URL=github.url, GITHUB_API_URL=github.url)
    _, state, _ = _start(app)
    response = app.test_client().get(f"/setup/callback?code=expired&state={state}")
    assert response.status_code == 502
    assert "start again" in response.get_data(as_text=True)
    assert _conversions(github) == [404]
    assert list(tmp_path.iterdir()) == []
    bad = _start(app)[1]
    assert app.test_client().get(f"/setup/callback?code=../../x&state={bad}").status_code == 400


def test_unreachable_github_is_reported(redis_conn: redis.Redis, tmp_path: Path) -> None:
    app = _app(redis_conn, tmp_path, GITHUB_API_URL=f"http://127.0.0.1:{free_port()}")
    _, state, _ = _start(app)
    response = app.test_client().get(f"/setup/callback?code=abc&state={state}")
    assert response.status_code == 502
    assert "could not reach GitHub" in response.get_data(as_text=True)


@pytest.mark.parametrize(
    "env",
    [
        {"GITHUB_APP_ID": "7", "GITHUB_PRIVATE_KEY": PEM, "GITHUB_WEBHOOK_SECRET": "s"},
        # A web-only deployment: the secret alone means an App exists; no stranger may register another.
        {"GITHUB_WEBHOOK_SECRET": "s"},
    ],
)
def test_configured_app_offers_nothing(redis_conn: redis.Redis, tmp_path: Path, env: dict[str, str]) -> None:
    app = _app(redis_conn, tmp_path, **env)
    page = app.test_client().get("/setup").get_data(as_text=True)
    assert "is configured" in page and "<form" not in page
    assert redis_conn.keys(STATE_KEY.format("*")) == []
    assert app.test_client().get("/setup/callback?code=abc&state=x").status_code == 409


def test_redis_down_is_a_clear_503(tmp_path: Path) -> None:
    down = redis.Redis(port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    app = _app(down, tmp_path)
    response = app.test_client().get("/setup")
    assert response.status_code == 503
    assert "Redis" in response.get_data(as_text=True)


def test_update_env_file_keeps_other_lines_and_quotes_when_needed(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    path.write_text("# comment\nexport GITHUB_APP_ID=1\nLOG_LEVEL=DEBUG\n")
    path.chmod(0o644)
    update_env_file(path, {"GITHUB_APP_ID": "2", "GITHUB_WEBHOOK_SECRET": 'we ird"\\#'})
    assert path.read_text().splitlines() == [
        "# comment",
        "GITHUB_APP_ID=2",
        "LOG_LEVEL=DEBUG",
        'GITHUB_WEBHOOK_SECRET="we ird\\"\\\\#"',
    ]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    settings = Settings.load(env={}, env_file=path)
    assert settings.github_webhook_secret is not None
    assert settings.github_webhook_secret.get_secret_value() == 'we ird"\\#'


def test_credentials_repr_hides_secrets() -> None:
    credentials = AppCredentials(1, "s", "S", "https://x", pem=PEM, webhook_secret="sekrit")
    assert "sekrit" not in repr(credentials) and "PRIVATE KEY" not in repr(credentials)


def test_first_run_serves_setup_and_answers_webhooks_503(redis_conn: redis.Redis, tmp_path: Path) -> None:
    app = create_app(Settings.load(env={}, env_file=None), redis_conn)
    client = app.test_client()
    assert "<form" in client.get("/setup").get_data(as_text=True)
    assert client.get("/healthz").status_code == 200
    response = client.post(
        "/api/github/webhooks",
        data=b"{}",
        headers={"X-GitHub-Event": "ping", "X-GitHub-Delivery": "d1", "Content-Type": "application/json"},
    )
    assert response.status_code == 503
    assert "/setup" in response.get_json()["error"]
    assert redis_conn.keys("rq:*") == []


@pytest.mark.parametrize(
    ("public_url", "reason"),
    [
        ("http://127.0.0.1:3000", "127.0.0.1 is a loopback address"),
        ("http://localhost:3000", "localhost is a local name"),
        ("http://192.168.1.20:3000", "192.168.1.20 is a private address"),
        ("http://[::1]:3000", "::1 is a loopback address"),
        ("https://spark.example.org", None),
        ("https://140.82.112.3", None),
    ],
)
def test_setup_warns_when_github_cannot_reach_the_webhook_url(
    redis_conn: redis.Redis, tmp_path: Path, public_url: str, reason: str | None
) -> None:
    assert unreachable_host(public_url) == reason
    page = _app(redis_conn, tmp_path).test_client().get(f"/setup?url={public_url}").get_data(as_text=True)
    if reason is None:
        assert 'id="unreachable"' not in page
    else:
        assert 'id="unreachable"' in page and reason in page
        assert "tunnel" in page and "public URL" in page


def test_home_page_points_to_setup_until_the_app_is_configured(
    redis_conn: redis.Redis, tmp_path: Path
) -> None:
    first = _app(redis_conn, tmp_path).test_client().get("/")
    assert first.status_code == 200
    assert 'href="/setup"' in first.get_data(as_text=True)
    configured = _app(redis_conn, tmp_path, GITHUB_WEBHOOK_SECRET="s").test_client().get("/")
    page = configured.get_data(as_text=True)
    assert 'id="running"' in page and 'href="/setup"' not in page and "spark doctor" in page


def test_under_helm_the_success_page_says_how_to_keep_the_credentials_in_a_secret(
    redis_conn: redis.Redis, tmp_path: Path, github: GitHubSandbox
) -> None:
    app = _app(
        redis_conn,
        tmp_path,
        GITHUB_URL=github.url,
        GITHUB_API_URL=github.url,
        SPARK_HELM_RELEASE="review-bot",
        SPARK_HELM_NAMESPACE="tools",
    )
    manifest, state, _ = _start(app)
    code = _confirm(github, manifest, state)
    page = html.unescape(
        app.test_client().get(f"/setup/callback?code={code}&state={state}").get_data(as_text=True)
    )
    assert "kubectl -n tools create secret generic review-bot-app" in page
    assert f"--from-literal=GITHUB_APP_ID={github.app_id}" in page
    assert "--from-file=GITHUB_PRIVATE_KEY=github-app.pem" in page
    assert "helm -n tools upgrade review-bot deploy/helm/spark --reuse-values" in page
    assert "--set existingSecret=review-bot-app" in page
    assert "spark doctor" in page


def test_under_spark_serve_setup_opens_only_with_the_printed_token(
    redis_conn: redis.Redis, tmp_path: Path
) -> None:
    from bot.web.setup import SETUP_TOKEN_CONFIG, TOKEN_KEY, setup_token

    redis_conn.delete(TOKEN_KEY)
    app = _app(redis_conn, tmp_path)
    app.config[SETUP_TOKEN_CONFIG] = True  # what `spark serve` sets
    token = setup_token(redis_conn)
    assert setup_token(redis_conn) == token  # every web process (and pod) prints and checks the same one
    assert 0 < redis_conn.ttl(TOKEN_KEY) <= 7 * 24 * 3600
    client = app.test_client()
    for query in ("", "?token=", "?token=guess", f"?token={token}x"):
        refused = client.get(f"/setup{query}")
        assert refused.status_code == 403, query
        assert "spark serve" in refused.get_data(as_text=True) and 'name="state"' not in refused.get_data(
            as_text=True
        )
    assert redis_conn.keys(STATE_KEY.format("*")) == []  # a refusal starts no registration
    page = client.get(f"/setup?token={token}").get_data(as_text=True)
    assert STATE_FIELD.search(page) and f'name="token" value="{token}"' in page  # the Update form keeps it
    home = client.get("/").get_data(as_text=True)
    assert 'href="/setup"' not in home and "/setup?token=" in home
    redis_conn.delete(TOKEN_KEY)


def test_the_wsgi_entry_point_guards_setup_with_a_token_too(redis_server: PrivateRedis) -> None:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CEREBRAS_", "REDIS_", "SPARK_"))
    }
    env["REDIS_URL"] = redis_server.url
    script = (
        "import app\n"
        "client = app.app.test_client()\n"
        "token = app.app.extensions['spark'].redis.get('spark:setup:token').decode()\n"
        "print(client.get('/setup').status_code, client.get(f'/setup?token={token}').status_code, token)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True, timeout=60
    )
    refused, opened, token = result.stdout.split()
    assert (refused, opened) == ("403", "200"), result.stderr
    assert f"register one at /setup?token={token}" in result.stderr
