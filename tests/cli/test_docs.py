"""The operations docs against the code: every setting and config key documented, every command real."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis
from pydantic import SecretStr
from rq import Queue

from bot.cli.main import build_parser
from bot.core.config import parse_config, schema
from bot.redis_server import PrivateRedis
from bot.settings import Settings
from tests.conftest import RedisDb, redis_url

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = ("operations.md", "configuration.md", "security.md")
README = ROOT / "README.md"


def table(text: str, heading: str) -> list[list[str]]:
    """Return the body rows of the first Markdown table after ``heading``, as lists of cells."""
    section = text[text.index(heading) :]
    rows: list[list[str]] = []
    for line in section.splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
        elif rows:
            break
    return rows[2:]


def code_lines(text: str, lang: str = "sh") -> list[str]:
    """Return the lines of every fenced block of ``lang``."""
    return [
        line
        for block in re.findall(rf"```{lang}\n(.*?)```", text, re.DOTALL)
        for line in block.splitlines()
        if line.strip()
    ]


@pytest.mark.parametrize(
    ("page", "heading"), [(DOCS / "configuration.md", "## Environment"), (README, "## Configuration")]
)
def test_environment_table_lists_exactly_the_settings_with_their_defaults(page: Path, heading: str) -> None:
    rows = table(page.read_text(), heading)
    documented = {row[0].strip("`"): row[1] for row in rows}
    assert sorted(documented) == sorted(name.upper() for name in Settings.model_fields)
    for name, field in Settings.model_fields.items():
        default = field.default
        if default is None or isinstance(default, SecretStr):
            assert documented[name.upper()].startswith("(none"), name
        else:
            assert documented[name.upper()] == f"`{default}`", name


def schema_rows() -> dict[str, tuple[str, str]]:
    """Render each leaf key of the config schema as (type, description), as the docs table shows it."""
    defs = schema()["$defs"]

    def kind(node: dict[str, Any]) -> str:
        if "$ref" in node:
            return kind(defs[node["$ref"].rsplit("/", 1)[-1]])
        if "enum" in node:
            return ", ".join(f"`{v}`" for v in node["enum"])
        if node["type"] == "array":
            return f"list of {node['items']['type']}s"
        if "minimum" in node:
            return f"{node['type']} ({node['minimum']}..{node['maximum']})"
        if "maxLength" in node:
            return f"{node['type']} (at most {node['maxLength']} characters)"
        return str(node["type"])

    def leaves(properties: dict[str, Any], prefix: str = "") -> dict[str, tuple[str, str]]:
        found: dict[str, tuple[str, str]] = {}
        for key, node in properties.items():
            if node.get("type") == "object":
                found |= leaves(node["properties"], f"{prefix}{key}.")
            else:
                found[prefix + key] = (kind(node), node.get("description", ""))
        return found

    return leaves(schema()["properties"])


def test_spark_yml_reference_matches_the_schema() -> None:
    rows = table((DOCS / "configuration.md").read_text(), "## `.github/spark.yml`")
    documented = {row[0].strip("`"): (row[1], row[3]) for row in rows}
    assert documented == schema_rows()


def test_config_examples_are_valid_and_the_defaults_are_the_defaults() -> None:
    defaults, typical = re.findall(r"```yaml\n(.*?)```", (DOCS / "configuration.md").read_text(), re.DOTALL)
    written = parse_config(defaults)
    assert written.ok and written.config == parse_config("").config
    example = parse_config(typical)
    assert example.ok, example.errors
    assert example.config.min_severity == "medium" and example.config.fix_permission == "maintain"


@pytest.mark.parametrize("page", [*(DOCS / page for page in PAGES), README])
def test_every_spark_command_parses(page: Path) -> None:
    parser = build_parser()
    commands = [line for line in code_lines(page.read_text()) if line.startswith("spark ")]
    for line in commands:
        parser.parse_args(shlex.split(line, comments=True)[1:])  # argparse exits on anything it does not know


def test_doc_links_point_at_existing_pages() -> None:
    for page in PAGES:
        for target in re.findall(r"\]\(([\w-]+\.md)", (DOCS / page).read_text()):
            assert (DOCS / target).is_file(), f"{page} links to missing {target}"
    for target in re.findall(r"\]\(([\w/.-]+\.md)", README.read_text()):
        assert (ROOT / target).is_file(), f"README links to missing {target}"


def test_operations_shows_the_queues_with_spark_queues(redis_server: PrivateRedis) -> None:
    url = redis_url(redis_server, RedisDb.RQ_INFO)
    conn = redis.Redis.from_url(url)
    conn.flushdb()
    Queue("spark-review", connection=conn).enqueue("workers.jobs.review", pr={}, trigger="opened")
    lines = code_lines((DOCS / "operations.md").read_text())
    # Not `rq info` in a code block: without REDIS_URL it reads another Redis than Spark's.
    assert not [line for line in lines if line.startswith("rq ")]
    line = next(line for line in lines if line.startswith("spark queues"))
    argv = shlex.split(line, comments=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "SPARK_"))} | {"REDIS_URL": url}
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "--env-file", os.devnull, *argv[1:]],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=env,
        cwd=ROOT,
    )
    assert re.search(r"spark-review\s+1\b", result.stdout), result.stdout
    assert "spark-interactive" in result.stdout
    conn.flushdb()
