"""``spark sandbox``: run the local GitHub and Cerebras for manual use, and say how to point Spark at them.

Start it, paste the printed environment into another shell (or a ``.env``), run ``spark serve`` and
``spark worker`` there, and the sandbox delivers its webhooks to that receiver. With ``--scenario`` the
repository and pull request are seeded, and each of the scenario's events is fired when you press Enter.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from bot.settings import Settings
from sandbox import scenario as scenarios
from sandbox.scenario import Scenario, ScenarioError, Scene
from sandbox.stack import stack_env, start_sandboxes

# Where `spark serve` listens by default (see bot/cli/main.py), so the two meet without configuration.
DEFAULT_WEBHOOK_URL = "http://127.0.0.1:3000/api/github/webhooks"
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


def export_lines(env: Mapping[str, str], key_file: Path) -> list[str]:
    """Return ``export NAME=value`` lines for a shell; the private key is referenced by file, not inlined."""
    lines = []
    for name, value in env.items():
        if name == "GITHUB_PRIVATE_KEY":
            lines.append(f"export GITHUB_PRIVATE_KEY_PATH={shlex.quote(str(key_file))}")
        else:
            lines.append(f"export {name}={shlex.quote(value)}")
    return lines


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Entry point of ``spark sandbox [--scenario FILE] [--port N]``: serve until interrupted."""
    try:
        scenario: Scenario = (
            scenarios.load(args.scenario) if args.scenario else scenarios.parse(EMPTY_SCENARIO)
        )
    except ScenarioError as exc:
        print(f"spark sandbox: {exc}", file=sys.stderr)
        return 2
    data_dir = settings.spark_data_dir.resolve() / "sandbox"
    data_dir.mkdir(parents=True, exist_ok=True)
    github, model = start_sandboxes(scenario, settings, port=int(args.port or 0))
    try:
        github.webhook_url = DEFAULT_WEBHOOK_URL
        scene = scenarios.apply(scenario, github)
        interactive = sys.stdin.isatty()
        if not scene.pr_number and not interactive:
            scene.open_pull_request(webhooks=False)  # nobody to press Enter: open it quietly
        key_file = data_dir / "sandbox-app.pem"
        key_file.write_text(github.private_key_pem)
        key_file.chmod(0o600)
        env = stack_env(settings, github, model, settings.spark_data_dir.resolve())
        print(f"Local GitHub:   {github.url}  (REST; GraphQL at {github.url}/graphql)")
        if model is not None:
            print(f"Local Cerebras: {model.url}  (scripted replies from scenario {scenario.name!r})")
        print(f"Webhooks go to: {DEFAULT_WEBHOOK_URL}  (where `spark serve` listens by default)")
        opened = f"#{scene.pr_number}" if scene.pr_number else " (the PR opens with the first event)"
        print(f"Seeded:         {scene.repo}{opened}, App installed on {scenario.repository['owner']}")
        pull_url = f"{github.url}/{scene.repo}/pull/{scene.pr_number or 1}"
        print(f"Pull request:   {pull_url}  (try `spark review {pull_url} --dry-run`)")
        print("\nPoint Spark at the sandbox (then run `spark serve` and `spark worker` in that shell):\n")
        print("\n".join(export_lines(env, key_file)))
        print()
        _fire_on_enter(scene, interactive)
    except KeyboardInterrupt:
        pass
    finally:
        github.stop()
        if model is not None:
            model.stop()
    return 0


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
