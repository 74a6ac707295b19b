"""Run ``spark`` commands in-process through ``bot.cli.main.main`` with exactly the environment given."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping

import pytest

from bot.cli.main import main
from sandbox.cerebras import ModelSandbox
from sandbox.github import GitHubSandbox

# Settings come from the environment only: the caller's GitHub, Cerebras and Redis settings must not leak in.
PREFIXES = ("GITHUB_", "CEREBRAS_", "SPARK_", "REDIS_URL", "LOG_LEVEL")

Spark = Callable[..., tuple[int, str, str]]


@pytest.fixture()
def spark(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: object) -> Spark:
    """Return ``spark(env, *argv) -> (exit code, stdout, stderr)``."""

    def run(env: Mapping[str, str], *argv: str) -> tuple[int, str, str]:
        for name in list(os.environ):
            if name.upper().startswith(PREFIXES):
                monkeypatch.delenv(name)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        # A command of several processes sets it in this process (`spark worker --processes 2 ...`).
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")  # so the test ends with it unset again
        monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
        capsys.readouterr()
        code = main(["--env-file", os.devnull, *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(scope="module")
def github() -> Iterator[GitHubSandbox]:
    """A local GitHub for the module."""
    with GitHubSandbox() as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def model() -> Iterator[ModelSandbox]:
    """A local Cerebras for the module."""
    with ModelSandbox() as sandbox:
        yield sandbox


def sandbox_env(github: GitHubSandbox, model: ModelSandbox, redis_url: str) -> dict[str, str]:
    """Return the settings of a Spark process pointed at both sandboxes."""
    return {
        "GITHUB_APP_ID": str(github.app_id),
        "GITHUB_PRIVATE_KEY": github.private_key_pem,
        "GITHUB_WEBHOOK_SECRET": github.webhook_secret,
        "GITHUB_API_URL": github.url,
        "GITHUB_URL": github.url,
        "CEREBRAS_API_KEY": model.api_key,
        "CEREBRAS_BASE_URL": model.url,
        "REDIS_URL": redis_url,
    }
