"""What `spark ... --help` and `spark demo --list` print, run as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys

from sandbox import scenario as scenarios
from tests.processes.conftest import ROOT


def spark(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "--env-file", os.devnull, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    return done.stdout


def test_demo_list_never_cuts_a_description_mid_word() -> None:
    listed = dict(line.split(None, 1) for line in spark("demo", "--list").splitlines())
    assert set(listed) == {path.stem for path in scenarios.bundled()}
    for name, shown in listed.items():
        full = " ".join(scenarios.load(name).description.split())
        if shown == full:
            continue
        assert shown.endswith(" …"), shown
        kept = shown.removesuffix(" …")
        # What is shown is whole words of the description.
        assert full.startswith(kept) and full[len(kept)] == " ", (kept, full)


def test_scenario_help_says_bundled_names_work() -> None:
    for command in ("demo", "sandbox"):
        assert "a bundled scenario's name" in " ".join(spark(command, "--help").split())


def test_review_help_shows_both_address_forms() -> None:
    text = " ".join(spark("review", "--help").split())
    assert "https://github.com/OWNER/REPO/pull/N or OWNER/REPO#N" in text
