"""The browser the browser tests drive: Debian's chromium through Selenium and chromedriver.

``make browser-deps`` installs them when it can; without them, each test skips and says why.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# Quiet, offline, reproducible: no sandboxing (containers run as root), no GPU, no background traffic.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1200,900",
)


@pytest.fixture()
def browser(tmp_path: Path) -> Iterator[object]:
    """Start headless chromium with a fresh profile, or skip when it is not installed."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("no browser: install Debian's chromium and chromium-driver (make browser-deps, as root)")
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')"
    )
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    # An explicit driver path: Selenium Manager must not try to download one.
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(tmp_path / "chromium-profile", ignore_errors=True)
