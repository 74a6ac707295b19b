"""Every ``spark`` command in every failing state, secrets planted: no output, log line or error quotes one.

The secrets are distinctive values (and the lines of a real key's body); each command runs in-process through
``bot.cli.main.main``; its stdout, stderr and any exception it lets escape (with its traceback) are searched.
"""

from __future__ import annotations

import socket
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.redis_server import free_port
from tests.cli.conftest import PREFIXES, Spark
from tests.cli.conftest import spark as spark

WEBHOOK_SECRET = "whsec-planted-7f3a91"
MODEL_KEY = "csk-planted-91bc04"
TOKEN = "ghp_planted0token0a55e"
REDIS_PASSWORD = "redis-planted-pw-2e6"
NOT_A_KEY = "planted-not-a-pem-key-3c1d"


@pytest.fixture(scope="module")
def taken_port() -> Iterator[int]:
    """A port some other program listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def planted(private_key: str, tmp_path: Path) -> dict[str, str]:
    """Settings carrying every kind of secret, pointed at addresses where nothing answers."""
    closed = free_port()
    return {
        "GITHUB_APP_ID": "1",
        "GITHUB_PRIVATE_KEY": private_key,
        "GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "GITHUB_TOKEN": TOKEN,
        "CEREBRAS_API_KEY": MODEL_KEY,
        "GITHUB_API_URL": f"http://127.0.0.1:{closed}",
        "CEREBRAS_BASE_URL": f"http://127.0.0.1:{closed}",
        "REDIS_URL": f"redis://:{REDIS_PASSWORD}@127.0.0.1:{closed}/0",
        "SPARK_DATA_DIR": str(tmp_path / "data"),
        "SPARK_REDIS_WAIT_SECONDS": "0.3",
        "LOG_LEVEL": "DEBUG",
    }


# Each failing state: what it changes in the planted settings (None removes a variable).
STATES: dict[str, dict[str, str | None]] = {
    "key file unreadable": {"GITHUB_PRIVATE_KEY": None, "GITHUB_PRIVATE_KEY_PATH": "/nonexistent/key.pem"},
    "key not a PEM key": {"GITHUB_PRIVATE_KEY": NOT_A_KEY},
    "invalid variables": {"GITHUB_API_URL": "ftp://example.invalid", "SPARK_CONTEXT_TOKENS": "lots"},
    "Redis URL of the wrong scheme": {"REDIS_URL": f"http://:{REDIS_PASSWORD}@example.invalid/0"},
    "Redis URL with a bad port": {"REDIS_URL": f"redis://:{REDIS_PASSWORD}@127.0.0.1:port/0"},
    "nothing reachable": {},
}

COMMANDS: dict[str, list[str]] = {
    "doctor": ["doctor"],
    "doctor --json": ["doctor", "--json"],
    "serve": ["serve", "--workers", "1", "--bind", "127.0.0.1:{taken}"],
    "worker": ["worker", "--burst"],
    "worker pool": ["worker", "--burst", "--processes", "2"],
    "worker metrics": ["worker", "--burst", "--metrics-port", "{taken}"],
    "review": ["review", "octo/app#1", "--dry-run"],
    "redeliver": ["redeliver", "--dry-run"],
    "queues": ["queues", "--json"],
    "demo": ["demo", "--scenario", "/nonexistent/scenario.yml"],
    "sandbox": ["sandbox", "--scenario", "/nonexistent/scenario.yml"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_no_command_prints_a_secret_in_any_failing_state(
    spark: Spark,
    command: str,
    private_key: str,
    taken_port: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # what a command writes lands here
    secrets = {
        "webhook secret": WEBHOOK_SECRET,
        "model API key": MODEL_KEY,
        "GitHub token": TOKEN,
        "Redis password": REDIS_PASSWORD,
        "malformed key": NOT_A_KEY,
        # The key's body, line by line: a fragment of it is as bad as the whole.
        **{f"private key line {i}": line for i, line in enumerate(private_key.splitlines()[1:4])},
    }
    argv = [arg.format(taken=taken_port) for arg in COMMANDS[command]]
    for state, changes in STATES.items():
        env = planted(private_key, tmp_path) | changes
        code, out, err = run(spark, {k: v for k, v in env.items() if v is not None}, argv)
        assert code != 0, f"{command} in state {state!r} did not fail"
        for what, value in secrets.items():
            for stream, text in (("stdout", out), ("stderr", err)):
                assert value not in text, f"`spark {' '.join(argv)}` ({state}) prints the {what} on {stream}"


def run(spark: Spark, env: dict[str, str], argv: list[str]) -> tuple[int, str, str]:
    """Run the command; an exception it lets escape counts as output (its traceback is what a user sees)."""
    assert all(name.upper().startswith(PREFIXES) for name in env)
    try:
        return spark(env, *argv)
    except SystemExit as exc:
        return int(exc.code or 0), "", ""
    except Exception as exc:
        return 1, "", "".join(traceback.format_exception(exc))


def test_a_log_line_masks_a_secret_value_inside_any_field(capfd: pytest.CaptureFixture[str]) -> None:
    import logging

    import structlog

    from bot.logs import REDACTED, configure_logging
    from bot.settings import Settings

    password = REDIS_PASSWORD
    settings = Settings.load(
        {"CEREBRAS_API_KEY": MODEL_KEY, "REDIS_URL": f"redis://:{password}@redis:6379/0"}, env_file=None
    )
    configure_logging(settings)
    try:
        raise ValueError(f"refused with key {MODEL_KEY}")
    except ValueError:
        structlog.get_logger("t").exception("call_failed", url=f"redis://:{password}@redis")
    logging.getLogger("some.library").warning("connecting with %s", MODEL_KEY)
    out, err = capfd.readouterr()
    assert MODEL_KEY not in out + err and password not in out + err
    assert out.count(REDACTED) == 2 and REDACTED in err
