"""The web package and the metrics module import each other in one direction only."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def module_imports(package: str) -> dict[str, set[str]]:
    """Return each module of ``package`` with the modules of ``package`` it imports at module level.

    Imports under an ``if`` (``TYPE_CHECKING`` ones included) count; imports inside functions (lazy) do not.
    """
    files = {}
    for path in (ROOT / package).rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        files[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        found: set[str] = set()
        for top in ast.parse(path.read_text()).body:
            for node in [top, *(top.body if isinstance(top, ast.If) else [])]:
                if isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module:
                    found.add(node.module)
                    found.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {other for other in found if other in files and other != name}
    return graph


def cycle_from(graph: dict[str, set[str]]) -> list[str]:
    """Return one import cycle of ``graph`` (its modules in order), or ``[]`` when there is none."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str]:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return []
        for other in sorted(graph[name]):
            found = visit(other, [*path, name])
            if found:
                return found
        done.add(name)
        return []

    for name in sorted(graph):
        found = visit(name, [])
        if found:
            return found
    return []


def test_cycle_finder_sees_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycle_from(graph) == ["a", "b", "c", "a"]
    assert cycle_from({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("package", ["bot", "workers"])
def test_no_import_cycle(package: str) -> None:
    assert cycle_from(module_imports(package)) == []


def test_metrics_module_does_not_import_flask() -> None:
    # Workers record metrics too: the metric families must not pull in the web framework.
    code = "import sys, bot.metrics; print('flask' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_command_line_imports_no_metrics_before_choosing_their_store() -> None:
    # prometheus-client picks its value store at import: `spark serve --workers N` must set the shared
    # directory before any module that records a metric is imported (else each process's samples are lost).
    code = "import sys, bot.cli.main; print('prometheus_client' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
