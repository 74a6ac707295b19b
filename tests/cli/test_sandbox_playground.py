"""``spark sandbox``, a playground: Spark on a local GitHub, comments as anyone, the model said plainly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.cli.main import build_parser
from bot.settings import Settings
from sandbox.cerebras import ModelSandbox, Script
from sandbox.github import GitHubSandbox
from sandbox.scenario import Scenario, parse
from sandbox.serve import (
    EMPTY_SCENARIO,
    PLAYGROUND_FILE,
    _remembered,
    comment,
    export_lines,
    model_line,
    pull_request_url,
    serve_playground,
    serve_servers,
)
from sandbox.stack import stack_env

ROOT = Path(__file__).resolve().parents[2]
PLANTED_KEY = "csk-planted-0123456789abcdef"
ANSWER = "It prints hello, once."


def spark(*argv: str, env: dict[str, str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "--env-file", os.devnull, *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        **kwargs,  # type: ignore[call-overload]
    )


@pytest.fixture()
def sandboxes(private_key: str) -> Iterator[tuple[GitHubSandbox, ModelSandbox]]:
    with GitHubSandbox(private_key_pem=private_key) as github, ModelSandbox() as model:
        yield github, model


def test_the_printed_settings_leave_the_log_level_alone(
    sandboxes: tuple[GitHubSandbox, ModelSandbox], tmp_path: Path
) -> None:
    github, model = sandboxes
    env = stack_env(Settings.load({}, env_file=None), github, model, tmp_path)
    assert "LOG_LEVEL" not in env
    assert Settings.load(env, env_file=None).log_level == "INFO"


def test_the_users_own_model_key_is_named_never_printed(
    sandboxes: tuple[GitHubSandbox, ModelSandbox], tmp_path: Path
) -> None:
    github, _ = sandboxes
    base = Settings.load({"CEREBRAS_API_KEY": PLANTED_KEY}, env_file=None)
    env = stack_env(base, github, None, tmp_path)
    assert env["CEREBRAS_API_KEY"] == PLANTED_KEY and env["CEREBRAS_BASE_URL"] == "https://api.cerebras.ai"
    printed = "\n".join(export_lines(env, tmp_path / "key.pem", hidden={"CEREBRAS_API_KEY"}))
    assert PLANTED_KEY not in printed and "# CEREBRAS_API_KEY: yours" in printed
    assert "export CEREBRAS_BASE_URL=https://api.cerebras.ai" in printed


def test_the_model_line_says_plainly_what_answers(sandboxes: tuple[GitHubSandbox, ModelSandbox]) -> None:
    _, model = sandboxes
    empty = parse(EMPTY_SCENARIO)
    scripted = model_line(Settings.load({}, env_file=None), model, empty)
    assert scripted.startswith("Model:          scripted replies only, no model")
    assert "it has none, so every model call fails" in scripted and "Set CEREBRAS_API_KEY" in scripted
    live = model_line(Settings.load({"CEREBRAS_API_KEY": PLANTED_KEY}, env_file=None), None, empty)
    assert "the Cerebras API at https://api.cerebras.ai (CEREBRAS_API_KEY is set): real answers" in live
    assert PLANTED_KEY not in live


def test_a_pull_request_is_named_by_url_or_by_number_on_the_running_playground(tmp_path: Path) -> None:
    settings = Settings.load({"SPARK_DATA_DIR": str(tmp_path)}, env_file=None)
    url = "http://127.0.0.1:4000/acme/playground/pull/1"
    assert pull_request_url(settings, url + "/") == url
    with pytest.raises(ValueError, match="no playground is running here"):
        pull_request_url(settings, "2")
    (tmp_path / "sandbox").mkdir()
    (tmp_path / "sandbox" / PLAYGROUND_FILE).write_text(f'{{"pull_request": "{url}"}}')
    assert pull_request_url(settings, "#2") == "http://127.0.0.1:4000/acme/playground/pull/2"
    with pytest.raises(ValueError, match="neither a pull request URL nor a number"):
        pull_request_url(settings, "acme/playground")


def test_the_playground_runs_spark_on_the_real_model_api_and_takes_comments_from_anyone(
    tmp_path: Path,
) -> None:
    # Cerebras's real API cannot be called here: a stand-in at the configured base URL takes its place, and
    # accepts only the user's key. Spark answering through it shows what the worker was given.
    mine = ("GITHUB_", "CEREBRAS_", "SPARK_", "LOG_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(mine)}
    env["SPARK_DATA_DIR"] = str(tmp_path / "data")
    with ModelSandbox([Script(ANSWER, name="ask", command="ask", repeat=True)], api_key=PLANTED_KEY) as api:
        env |= {"CEREBRAS_API_KEY": PLANTED_KEY, "CEREBRAS_BASE_URL": api.url}
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.main", "--env-file", os.devnull, "sandbox"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            lines = []
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("Serving"):
                    break
            printed = "".join(lines)
            assert "Serving" in printed, printed + (proc.stderr.read() if proc.stderr else "")
            pull_url = next(line.split()[2] for line in lines if line.startswith("Pull request:"))
            assert f"Model:          the Cerebras API at {api.url} (CEREBRAS_API_KEY is set)" in printed
            # The printed URL opens the pull request's page in a browser.
            with urllib.request.urlopen(pull_url, timeout=10) as page:
                assert page.status == 200 and "Try Spark" in page.read().decode()

            ask = "/spark ask what does it print?"
            done = spark("sandbox", "comment", "--as", "octocat", "1", ask, "--wait", "60", env=env)
            assert done.returncode == 0, done.stderr
            said, answered = done.stdout.split("\n", 1)
            assert said.startswith(f"Commented as octocat: {pull_url}#issuecomment-")
            assert answered.startswith(f"spark[bot] commented: {pull_url}#issuecomment-")
            assert f"\n  {ANSWER}\n" in answered and "<!--" not in answered
            assert ANSWER in urllib.request.urlopen(pull_url, timeout=10).read().decode()
            assert [r.status for r in api.requests] == [200]
            log_path = next(line.split()[-1] for line in lines if line.startswith("Spark:"))
            assert '"level":"info"' in Path(log_path).read_text()  # the worker's logs are not silenced
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert PLANTED_KEY not in printed + out + err
    assert not (tmp_path / "data" / "sandbox" / PLAYGROUND_FILE).exists()
    gone = spark("sandbox", "comment", "1", "hello", env=env)
    assert gone.returncode == 2 and "no playground is running here" in gone.stderr


@pytest.mark.parametrize("serve", [serve_playground, serve_servers])
def test_a_taken_port_is_one_line(
    serve: Callable[[Settings, Scenario, int], int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = Settings.load({"SPARK_DATA_DIR": str(tmp_path)}, env_file=None)
        assert serve(settings, parse(EMPTY_SCENARIO), port) == 1
    err = capsys.readouterr().err
    assert err == f"spark sandbox: cannot listen on port {port}: Address already in use\n"


def test_the_record_of_a_later_sandbox_is_left_alone(tmp_path: Path) -> None:
    settings = Settings.load({"SPARK_DATA_DIR": str(tmp_path)}, env_file=None)
    record = tmp_path / "sandbox" / PLAYGROUND_FILE
    with _remembered(settings, "http://127.0.0.1:1/a/b/pull/1"):
        assert pull_request_url(settings, "1") == "http://127.0.0.1:1/a/b/pull/1"
    assert not record.exists()
    with _remembered(settings, "http://127.0.0.1:1/a/b/pull/1"):
        record.write_text('{"pull_request": "http://127.0.0.1:2/a/b/pull/1"}')  # another one started
    assert pull_request_url(settings, "1") == "http://127.0.0.1:2/a/b/pull/1"


def test_the_comment_verb_comments_replies_and_comments_on_a_line(
    sandboxes: tuple[GitHubSandbox, ModelSandbox], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    github, _ = sandboxes
    github.create_repo("acme/app", {"a.py": "x = 1\n"}, github.create_installation("acme"))
    github.open_pull_request("acme/app", "b", {"a.py": "x = 2\n"}, author="alice")
    settings = Settings.load({"SPARK_DATA_DIR": str(tmp_path)}, env_file=None)

    def verb(*argv: str) -> int:
        return comment(settings, build_parser().parse_args(["sandbox", "comment", *argv]))

    with _remembered(settings, f"{github.url}/acme/app/pull/1"):
        # Spark's answer comes once the command waits for it (the first look at the conversation).
        github.faults.on_request(
            "GET",
            r"/pull/1/comments$",
            lambda: github.comment("acme/app", 1, "Because.\n<!-- m -->", "spark[bot]"),
        )
        assert verb("1", "/spark ask why 2?", "--wait", "10") == 0  # as the pull request's author
        assert verb("--as", "dana", "1", "anyone?", "--wait", "0.5") == 1
        assert verb("--as", "bob", "--on", "a.py:1", "#1", "/spark fix make it 3") == 0
        thread = github.review_comments("acme/app", 1)[0]["id"]
        assert verb("--as", "carol", "--reply-to", str(thread), "1", "won't fix") == 0
        assert verb("--on", "a.py", "1", "x") == 2
        assert verb("--as", "spark[bot]", "1", "x") == 1
    out, err = capsys.readouterr()
    asked, answered = (c["id"] for c in github.issue_comments("acme/app", 1)[:2])
    assert out.splitlines()[:3] == [
        f"Commented as alice: {github.url}/acme/app/pull/1#issuecomment-{asked}",
        f"spark[bot] commented: {github.url}/acme/app/pull/1#issuecomment-{answered}",
        "  Because.",
    ]
    assert "no answer from Spark within 0.5 s" in err
    assert "Commented as bob" in out and "Commented as carol" in out
    assert "--on takes PATH:LINE, got 'a.py'" in err and "is the App" in err
    inline = [(c["user"]["login"], c["path"], c["line"]) for c in github.review_comments("acme/app", 1)]
    assert inline == [("bob", "a.py", 1), ("carol", "a.py", 1)]
