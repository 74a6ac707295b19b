"""The App registration flow in a real headless browser: Spark's /setup -> the sandbox's GitHub -> back.

Drives Debian's chromium (the ``browser`` fixture of ``conftest.py``); skips, saying why, where no browser
is available. A screenshot of the success page is kept in ``artifacts/``.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bot.settings import Settings
from bot.web.app import create_app
from bot.web.setup import ENV_FILE_CONFIG
from sandbox.github import GitHubSandbox
from tests.conftest import serving

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"


@pytest.fixture()
def github() -> Iterator[GitHubSandbox]:
    with GitHubSandbox() as sandbox:
        yield sandbox


@pytest.fixture()
def spark_url(redis_conn: redis.Redis, github: GitHubSandbox, tmp_path: Path) -> Iterator[str]:
    """Serve a first-run Spark (nothing configured) on a free port, pointed at the sandbox as its GitHub."""
    settings = Settings.load(env={"GITHUB_URL": github.url, "GITHUB_API_URL": github.url}, env_file=None)
    app = create_app(settings, redis_conn)
    app.config[ENV_FILE_CONFIG] = str(tmp_path / ".env")
    with serving(app) as url:
        yield url


def test_register_the_app_through_the_setup_page(
    browser: object, spark_url: str, github: GitHubSandbox, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.wait import WebDriverWait

    assert isinstance(browser, WebDriver)
    wait = WebDriverWait(browser, 20)
    # A first run: the home page points to /setup.
    browser.get(f"{spark_url}/")
    browser.find_element(By.ID, "setup").click()
    wait.until(expected_conditions.title_contains("Register Spark on GitHub"))
    assert f"{spark_url}/api/github/webhooks" in browser.page_source
    # This server is on 127.0.0.1: GitHub could not deliver there, and the page says what to use instead.
    warning = browser.find_element(By.ID, "unreachable").text
    assert "127.0.0.1 is a loopback address" in warning and "tunnel" in warning and "public URL" in warning

    # Spark's button posts the manifest to "GitHub"; the sandbox shows its confirmation page.
    browser.find_element(By.ID, "create-app").click()
    wait.until(expected_conditions.url_contains(f"{github.url}/settings/apps/new"))
    assert browser.find_element(By.ID, "app-name").text == "Spark"
    # Confirming redirects back to Spark's callback, which exchanges the code and shows the next steps.
    browser.find_element(By.ID, "create-app").click()
    wait.until(expected_conditions.presence_of_element_located((By.ID, "configured")))
    assert browser.current_url.startswith(f"{spark_url}/setup/callback?code=")
    assert "Install the App" in browser.find_element(By.ID, "install").text
    next_steps = browser.find_element(By.ID, "next-steps").text
    assert "CEREBRAS_API_KEY" in next_steps and "spark doctor" in next_steps

    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "setup-flow.png"))

    env_file = tmp_path / ".env"
    key_file = tmp_path / f"github-app-{github.app_id}.private-key.pem"
    for path in (env_file, key_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert key_file.read_text() == github.private_key_pem
    settings = Settings.load(env={}, env_file=env_file)
    assert settings.github_app_id == github.app_id
    assert settings.github_webhook_secret is not None
    assert settings.github_webhook_secret.get_secret_value() == github.webhook_secret
    settings.check_private_key()

    # Reloading /setup now offers nothing.
    browser.get(f"{spark_url}/setup")
    assert browser.find_elements(By.ID, "configured") and not browser.find_elements(By.ID, "create-app")
