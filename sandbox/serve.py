"""``spark sandbox``: a playground, Spark installed on a pull request of a local GitHub, to try it by hand.

By default it runs the whole stack (``sandbox.stack``): the local GitHub, the model, an embedded Redis of
its own, the webhook receiver and a ``spark worker``. The model is the real Cerebras API when
``CEREBRAS_API_KEY`` is set, and otherwise the local stand-in, which answers only the replies a scenario
wrote down in advance. Open the printed pull request URL in a browser and comment there as any user, or run
``spark sandbox comment --as LOGIN PR TEXT``: each comment fires the webhook GitHub would, and Spark's
answers appear on the page.

With ``--no-spark`` only the local GitHub and model run: paste the printed environment into another shell
(or a ``.env``) and run your own ``spark serve`` and ``spark worker`` there; webhooks go to where
``spark serve`` listens by default. With ``--scenario`` the repository and pull request are seeded from a
scenario, and each of its events is fired when you press Enter.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import sys
import tempfile
import textwrap
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from bot.settings import Settings
from sandbox import scenario as scenarios
from sandbox.cerebras import ModelSandbox
from sandbox.scenario import Scenario, ScenarioError, Scene
from sandbox.stack import stack_env, start_sandboxes, start_stack

# Where `spark serve` listens by default (see bot/cli/main.py), so the two meet without configuration.
DEFAULT_WEBHOOK_URL = "http://127.0.0.1:3000/api/github/webhooks"
# Where a running playground records its pull request, so `spark sandbox comment 1 ...` finds it.
PLAYGROUND_FILE = "playground.json"
MARKER = re.compile(r"<!--.*?-->", re.S)  # hidden on GitHub's page, so here too
PULL_URL = re.compile(r"^(?P<base>https?://[^/]+)/(?P<repo>[^/]+/[^/]+)/pull/(?P<number>\d+)/?$")
EMPTY_SCENARIO = """
name: empty
description: An installed repository with one file and an open pull request, to try things by hand.
repository:
  owner: acme
  name: playground
  files: {README.md: "# playground\\n"}
pull_request:
  title: Try Spark
  author: octocat
  head_branch: try-spark
  files: {hello.py: "print('hello')\\n"}
collaborators: {octocat: admin}
events:
  - wait: 0
"""


def export_lines(env: Mapping[str, str], key_file: Path, hidden: Collection[str] = ()) -> list[str]:
    """Return ``export NAME=value`` lines for a shell; the private key is referenced by file, not inlined.

    ``hidden`` names settings whose values are the user's own secrets: they are never printed, only named.
    """
    lines = []
    for name, value in env.items():
        if name == "GITHUB_PRIVATE_KEY":
            lines.append(f"export GITHUB_PRIVATE_KEY_PATH={shlex.quote(str(key_file))}")
        elif name in hidden:
            lines.append(f"# {name}: yours, as set where you run Spark (not printed)")
        else:
            lines.append(f"export {name}={shlex.quote(value)}")
    return lines


def model_line(settings: Settings, model: ModelSandbox | None, scenario: Scenario) -> str:
    """Say plainly what answers Spark's model calls: the real Cerebras API, or scripted replies only."""
    if model is None:
        return (
            f"Model:          the Cerebras API at {settings.cerebras_base_url} (CEREBRAS_API_KEY is set): "
            f"real answers from {settings.spark_model_fast} and {settings.spark_model_deep}"
        )
    count = len(model.unused_scripts)
    outcome = (
        "other model calls fail, and Spark says so"
        if count
        else "it has none, so every model call fails, and Spark says so"
    )
    return (
        f"Model:          scripted replies only, no model: the local stand-in at {model.url} answers with "
        f"the {count} replies scenario {scenario.name!r} wrote down in advance ({outcome}). "
        "Set CEREBRAS_API_KEY for the real model."
    )


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Entry point of ``spark sandbox [--scenario FILE] [--port N] [--no-spark]`` and its ``comment`` verb."""
    if getattr(args, "sandbox_verb", None) == "comment":
        return comment(settings, args)
    try:
        scenario: Scenario = (
            scenarios.load(args.scenario) if args.scenario else scenarios.parse(EMPTY_SCENARIO)
        )
    except ScenarioError as exc:
        print(f"spark sandbox: {exc}", file=sys.stderr)
        return 2
    stop_on_signals()
    if getattr(args, "no_spark", False):
        return serve_servers(settings, scenario, int(args.port or 0))
    return serve_playground(settings, scenario, int(args.port or 0))


def stop_on_signals() -> None:
    """Make Ctrl-C and SIGTERM stop the servers through their ``finally`` (the worker and Redis with them).

    Python stops on SIGTERM without unwinding, and a shell starts a background job with SIGINT ignored.
    """

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupt)


def serve_playground(settings: Settings, scenario: Scenario, port: int) -> int:
    """Run the whole stack with Spark in it until interrupted; print where to comment and what answers."""
    live = settings.cerebras_api_key is not None
    # A Redis of its own, never the configured one: production workers must not take the playground's jobs.
    base = settings.model_copy(update={"redis_url": None})
    with tempfile.TemporaryDirectory(prefix="spark-sandbox-") as tmp:
        data_dir = Path(tmp)
        try:
            stack = start_stack(
                scenario, base, data_dir, live_model=live, port=port, worker_log_level=settings.log_level
            )
        except OSError as exc:
            return _cannot_listen(port, exc)
        except (ScenarioError, RuntimeError, TimeoutError) as exc:
            print(f"spark sandbox: {exc}", file=sys.stderr)
            return 1
        try:
            scene, github, interactive = stack.scene, stack.github, sys.stdin.isatty()
            pull_url, number = _pull_request(scene, interactive)
            author = scenario.pull_request["author"]
            print(f"Spark is installed on {scene.repo} of a local GitHub: try it by hand, no App needed.")
            print(f"Pull request:   {pull_url}  (open it in a browser; comment there as any user)")
            print(f"From a shell:   spark sandbox comment --as {author} {number} '/spark ask ...' --wait")
            print(model_line(settings, stack.model, scenario))
            print(f"Spark:          a receiver and a worker; the worker logs to {stack.worker_log}")
            env = stack_env(base, github, stack.model, data_dir)
            key_file = data_dir / "sandbox-app.pem"
            _print_servers(github.url, scene, scenario, env, key_file, live, "spark review or spark doctor")
            with _remembered(settings, pull_url):
                _fire_on_enter(scene, interactive)
        except KeyboardInterrupt:
            pass
        finally:
            stack.close()
    return 0


def serve_servers(settings: Settings, scenario: Scenario, port: int) -> int:
    """Serve the local GitHub and model only, for your own ``spark serve`` and ``spark worker``."""
    live = settings.cerebras_api_key is not None
    data_dir = settings.spark_data_dir.resolve() / "sandbox"
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        github, model = start_sandboxes(scenario, settings, live_model=live, port=port)
    except OSError as exc:
        return _cannot_listen(port, exc)
    try:
        github.webhook_url = DEFAULT_WEBHOOK_URL
        scene, interactive = scenarios.apply(scenario, github), sys.stdin.isatty()
        pull_url, _ = _pull_request(scene, interactive)
        print(f"Pull request:   {pull_url}  (open it in a browser, or `spark review {pull_url} --dry-run`)")
        print(model_line(settings, model, scenario))
        print(f"Webhooks go to: {DEFAULT_WEBHOOK_URL}  (where `spark serve` listens by default)")
        env = stack_env(settings, github, model, settings.spark_data_dir.resolve())
        key_file = data_dir / "sandbox-app.pem"
        _print_servers(github.url, scene, scenario, env, key_file, live, "spark serve and spark worker")
        with _remembered(settings, pull_url):
            _fire_on_enter(scene, interactive)
    except KeyboardInterrupt:
        pass
    finally:
        github.stop()
        if model is not None:
            model.stop()
    return 0


def _pull_request(scene: Scene, interactive: bool) -> tuple[str, int]:
    """Return the pull request's URL and number, opened quietly now when nobody is there to press Enter."""
    if not scene.pr_number and not interactive:
        scene.open_pull_request(webhooks=False)
    number = scene.pr_number or 1  # else the scenario's first event opens it: the repository's first number
    return f"{scene.github.url}/{scene.repo}/pull/{number}", number


def _cannot_listen(port: int, exc: OSError) -> int:
    """Say in one line why the local GitHub cannot listen (a taken ``--port``); return the exit code."""
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    print(f"spark sandbox: cannot listen on port {port}: {reason}", file=sys.stderr)
    return 1


def _print_servers(
    url: str,
    scene: Scene,
    scenario: Scenario,
    env: Mapping[str, str],
    key_file: Path,
    live: bool,
    commands: str,
) -> None:
    """Print the local GitHub, what is seeded, and the settings other Spark commands need to reach it."""
    key_file.write_text(env["GITHUB_PRIVATE_KEY"])
    key_file.chmod(0o600)
    print(f"Local GitHub:   {url}  (REST; GraphQL at {url}/graphql)")
    opened = f"#{scene.pr_number}" if scene.pr_number else " (the PR opens with the first event)"
    print(f"Seeded:         {scene.repo}{opened}, App installed on {scenario.repository['owner']}")
    print(f"\nPoint other Spark commands at it ({commands}) with these settings:\n")
    print("\n".join(export_lines(env, key_file, hidden={"CEREBRAS_API_KEY"} if live else ())))
    print()


@contextlib.contextmanager
def _remembered(settings: Settings, pull_url: str) -> Iterator[None]:
    """Record the pull request while it is served, for ``spark sandbox comment NUMBER``; forget it after.

    Another sandbox started since then records its own: that record is left alone.
    """
    record = settings.spark_data_dir.resolve() / "sandbox" / PLAYGROUND_FILE
    record.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"pull_request": pull_url}) + "\n"
    record.write_text(text)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            if record.read_text() == text:
                record.unlink()


def _fire_on_enter(scene: Scene, interactive: bool) -> None:
    """Fire each event when Enter is pressed (when stdin is a terminal); then serve until Ctrl-C."""
    events = [e for e in scene.scenario.events if e.kind != "wait"]
    if events and interactive:
        for event in events:
            input(f"Press Enter to fire: {event.describe()} ")
            scene.act(event)
            print(f"  fired; {len(scene.github.deliveries)} webhook deliveries so far")
    sys.stdout.flush()
    print("Serving; press Ctrl-C to stop.", flush=True)
    threading.Event().wait()


# ---- spark sandbox comment ------------------------------------------------------------------------------


def pull_request_url(settings: Settings, given: str) -> str:
    """Return the pull request URL ``given`` names: a URL, or a number (``7``, ``#7``) on the running one."""
    if PULL_URL.match(given):
        return given.rstrip("/")
    number = given.removeprefix("#")
    if not number.isdigit():
        raise ValueError(f"{given!r} is neither a pull request URL nor a number")
    record = settings.spark_data_dir.resolve() / "sandbox" / PLAYGROUND_FILE
    try:
        running = str(json.loads(record.read_text())["pull_request"])
    except (OSError, ValueError, KeyError):
        raise ValueError(
            "no playground is running here (start `spark sandbox`), or give the pull request's URL"
        ) from None
    match = PULL_URL.match(running)
    if match is None:
        raise ValueError(f"{record} names no pull request")
    return f"{match['base']}/{match['repo']}/pull/{int(number)}"


def comment(settings: Settings, args: argparse.Namespace) -> int:
    """``spark sandbox comment [--as LOGIN] [--reply-to ID | --on PATH:LINE] PR TEXT``: comment as a user."""
    try:
        url = pull_request_url(settings, args.pr)
    except ValueError as exc:
        print(f"spark sandbox comment: {exc}", file=sys.stderr)
        return 2
    form = {"body": args.text}
    if args.as_user:
        form["as"] = args.as_user
    if args.reply_to is not None:
        form["in_reply_to"] = str(args.reply_to)
    if args.on:
        path, _, line = args.on.rpartition(":")
        if not path or not line.isdigit():
            print(f"spark sandbox comment: --on takes PATH:LINE, got {args.on!r}", file=sys.stderr)
            return 2
        form.update(path=path, line=line)
    request = urllib.request.Request(
        f"{url}/comments",
        data=urllib.parse.urlencode(form).encode(),
        headers={"Accept": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            made = json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("message") or exc.reason
        except ValueError:
            message = exc.reason
        print(f"spark sandbox comment: {message} (HTTP {exc.code})", file=sys.stderr)
        return 1
    except OSError as exc:
        reason = getattr(exc, "reason", exc)
        print(
            f"spark sandbox comment: nothing answers at {url} ({reason}); is `spark sandbox` still running?",
            file=sys.stderr,
        )
        return 1
    print(f"Commented as {made['user']['login']}: {made['html_url']}", flush=True)
    if args.wait is None:
        return 0
    answer = wait_for_answer(url, int(made["id"]), args.wait)
    if not answer:
        print(f"spark sandbox comment: no answer from Spark within {args.wait:g} s", file=sys.stderr)
        return 1
    print("\n".join(describe(item) for item in answer))
    return 0


def wait_for_answer(url: str, after: int, timeout: float) -> list[dict[str, Any]]:
    """Return what an App posted on the pull request after comment ``after`` once it posts, or [] at timeout.

    A review and its inline comments arrive together; what follows within half a second comes along.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [item for item in _conversation(url, after) if item["user"]["type"] == "Bot"]
        if found:
            time.sleep(0.5)
            return [item for item in _conversation(url, after) if item["user"]["type"] == "Bot"]
        time.sleep(0.25)
    return []


def _conversation(url: str, since: int) -> list[dict[str, Any]]:
    request = urllib.request.Request(f"{url}/comments?since={since}", headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        items: list[dict[str, Any]] = json.loads(answer.read())
    return items


def describe(item: Mapping[str, Any]) -> str:
    """Return one posted item for a terminal: who, what and where, then its Markdown (markers left out)."""
    body = MARKER.sub("", str(item.get("body") or "")).strip()
    who = item["user"]["login"]
    if item["kind"] == "review":
        head = f"{who} reviewed ({item['state'].lower()}): {item['html_url']}"
    elif item["kind"] == "review_comment":
        head = f"{who} on {item['path']} line {item['line']}: {item['html_url']}"
    else:
        head = f"{who} commented: {item['html_url']}"
    return head + "\n" + textwrap.indent(body, "  ") + "\n"
