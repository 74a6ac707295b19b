"""The GitHub port: the flows call exactly its methods; the client and the dry-run recorder implement each."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from bot.adapters.github import Installation
from bot.adapters.github_port import GitHubPort
from bot.adapters.redacting import RedactingPort
from workers.recorder import RecordingInstallation

ROOT = Path(__file__).resolve().parents[2]
# Where the flows' GitHub calls are made: flows, commands, memory, the reply, the job entry points, and the
# repository index they make ready.
FLOW_SOURCES = [
    *(
        path
        for folder in ("flows", "commands", "memory")
        for path in sorted((ROOT / "workers" / folder).rglob("*.py"))
    ),
    ROOT / "workers" / "reply.py",
    ROOT / "workers" / "jobs.py",
    ROOT / "bot" / "index" / "warm.py",
]
PORT_CALLS = sorted(name for name in vars(GitHubPort) if not name.startswith("_"))
# What the flows read of the job's RedactingPort itself (the secret values it learned): no GitHub call.
REDACTING_PORT_OWN = {"secrets"}


def _is_client(node: ast.expr) -> bool:
    """Return whether ``node`` names the flow's GitHub client: ``gh``, ``run.gh`` or ``ctx.github``."""
    if isinstance(node, ast.Name):
        return node.id == "gh"
    if isinstance(node, ast.Attribute):
        if node.attr == "gh":
            return True
        base = node.value
        owner = (
            base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
        )
        return node.attr == "github" and owner == "ctx"
    return False


def flow_calls() -> set[str]:
    """Return every attribute the flows use on their GitHub client."""
    used: set[str] = set()
    for path in FLOW_SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and _is_client(node.value):
                used.add(node.attr)
    return used


def test_the_port_lists_exactly_the_calls_the_flows_make() -> None:
    assert sorted(flow_calls() - REDACTING_PORT_OWN) == PORT_CALLS


def test_the_scan_sees_a_call_outside_the_port() -> None:
    source = "def f(ctx, run, gh):\n    ctx.github.requester\n    run.gh.raw\n    gh.pull(1)\n"
    used = {
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and _is_client(node.value)
    }
    assert used == {"requester", "raw", "pull"}


def test_flows_import_the_port_not_the_client() -> None:
    for path in FLOW_SOURCES:
        modules = {
            node.module
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module
        }
        modules |= {
            alias.name
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Import)
            for alias in node.names
        }
        wrong = sorted(
            m for m in modules if m == "github" or m.startswith("github.") or m == "bot.adapters.github"
        )
        assert wrong == [], f"{path.relative_to(ROOT)} imports {wrong}"


@pytest.mark.parametrize("implementation", [Installation, RecordingInstallation, RedactingPort])
@pytest.mark.parametrize("name", PORT_CALLS)
def test_each_implementation_has_the_port_signature(implementation: type, name: str) -> None:
    expected = inspect.getattr_static(GitHubPort, name)
    actual = inspect.getattr_static(implementation, name)
    if isinstance(expected, property):
        assert isinstance(actual, property)
        return
    assert inspect.signature(actual) == inspect.signature(expected)


def test_only_the_adapter_imports_pygithub() -> None:
    """The web process, the intake, the CLI and the workers reach GitHub through the adapter only."""
    outside = [
        path
        for package in ("bot", "workers")
        for path in sorted((ROOT / package).rglob("*.py"))
        if (ROOT / "bot" / "adapters") not in path.parents
    ]
    offenders = []
    for path in outside:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "github"]
    assert offenders == []
