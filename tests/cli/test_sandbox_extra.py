"""The sandbox is an install extra: the product never imports it, and its commands say how to install it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli.main import COMMANDS, SANDBOX_COMMANDS, SANDBOX_INSTALL, SANDBOX_MODULES

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("bot", "workers")


def run_without(blocked: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``spark *argv`` in a fresh interpreter where importing ``blocked`` fails as if it were absent."""
    # A None entry in sys.modules makes `import blocked` raise ModuleNotFoundError (the import system's rule).
    code = (
        "import sys\n"
        f"sys.modules[{blocked!r}] = None\n"
        "from bot.cli.main import main\n"
        f"sys.exit(main(['--env-file', {os.devnull!r}, *{list(argv)!r}]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CEREBRAS_", "SPARK_"))}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("blocked", "argv"),
    [("graphql", ["demo", "--list"]), ("sandbox", ["demo"]), ("graphql", ["sandbox"])],
)
def test_a_sandbox_command_without_the_extra_says_how_to_install_it(blocked: str, argv: list[str]) -> None:
    done = run_without(blocked, *argv)
    assert done.returncode == 2, done.stderr
    assert SANDBOX_INSTALL in done.stderr
    assert f"({blocked} is missing)" in done.stderr
    assert "Traceback" not in done.stderr


def test_with_the_extra_the_same_command_runs() -> None:
    # The block above is what makes the command fail: unblocked, it lists the scenarios.
    done = run_without("no_such_module_blocked", "demo", "--list")
    assert done.returncode == 0, done.stderr
    assert "python-bug-fix" in done.stdout


def test_a_missing_module_elsewhere_is_not_blamed_on_the_extra() -> None:
    # Only the sandbox's commands and modules get the install hint; any other missing module is a real bug.
    done = run_without("granian", "serve")
    assert done.returncode != 2 or SANDBOX_INSTALL not in done.stderr
    assert "ModuleNotFoundError" in done.stderr


def test_only_the_command_table_names_the_sandbox() -> None:
    named = {name for name, (target, _) in COMMANDS.items() if target.split(".")[0] in SANDBOX_MODULES}
    assert named == SANDBOX_COMMANDS


def imports_of(path: Path) -> set[str]:
    """Return the top-level package of every import in ``path``, lazy ones (inside functions) included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def test_import_finder_sees_lazy_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from sandbox.github import GitHubSandbox\n    import graphql.language\n")
    assert imports_of(module) == {"sandbox", "graphql"}


@pytest.mark.parametrize("package", PRODUCT)
def test_the_product_imports_neither_the_sandbox_nor_graphql(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(imports_of(path) & SANDBOX_MODULES)
        for path in sorted((ROOT / package).rglob("*.py"))
        if imports_of(path) & SANDBOX_MODULES
    }
    assert offenders == {}


def test_every_product_module_imports_without_the_extra() -> None:
    # The image carries bot/ and workers/ only: every module of theirs must import with both absent.
    code = (
        "import importlib, pathlib, sys\n"
        "sys.modules['sandbox'] = sys.modules['graphql'] = None\n"
        f"for package in {PRODUCT!r}:\n"
        "    for path in sorted(pathlib.Path(package).rglob('*.py')):\n"
        "        importlib.import_module('.'.join(path.with_suffix('').parts).removesuffix('.__init__'))\n"
        "print('imported')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "imported", done.stderr
