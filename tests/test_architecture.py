"""docs/architecture.md against the tree: every module named in its place, every path it names real."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("bot", "workers", "sandbox")
# Entries start at an indent of a few levels; wrapped descriptions start at the description column.
_ENTRY = re.compile(r"^(?P<indent> {0,12})(?P<name>[\w.-]+/?)(?:\s{2,}|$)")


def documented_tree() -> set[str]:
    """Return the repository paths the doc's tree block names (directories end with '/')."""
    text = DOC.read_text()
    block = text[text.index("```\napp.py") + 4 :]
    block = block[: block.index("```\n")]
    paths: set[str] = set()
    parents: list[str] = []
    for line in block.splitlines():
        match = _ENTRY.match(line)
        if match is None:
            continue
        depth = len(match["indent"]) // 2
        del parents[depth:]
        path = "".join(parents) + match["name"]
        paths.add(path)
        if path.endswith("/"):
            parents.append(match["name"])
    return paths


def test_the_tree_names_every_module_in_its_place() -> None:
    named = {path for path in documented_tree() if path.endswith(".py") and path.startswith(PACKAGES)}
    actual = {
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if path.name != "__init__.py"
    }
    assert sorted(actual - named) == [], "modules missing from docs/architecture.md"
    assert sorted(named - actual) == [], "docs/architecture.md names modules that do not exist"


def test_every_path_the_doc_names_exists() -> None:
    missing = [path for path in documented_tree() if not (ROOT / path.rstrip("/")).exists()]
    quoted = re.findall(r"`((?:bot|workers|sandbox|tests|bench|deploy|docs)/[\w./-]+)`", DOC.read_text())
    missing += [path for path in quoted if not (ROOT / path).exists()]
    assert missing == []


# Where GitHub's comment-posting calls may appear in workers/ besides the one reply (workers/reply.py).
REPLY_CALLS = {"comment", "upsert_comment", "reply_to_review_comment"}
NOT_COMMAND_REPLIES = {
    "workers/recorder.py": "implements the port: it records each write and passes it on",
    "workers/oneshot.py": "`spark review --fix` writes the request comment a fix then replies to",
    "workers/flows/safe_fixes.py": "the check run's button is no command: its reply is one per head",
    "workers/flows/ci.py": "a failed check is no command: each of its notices is said once, on its own key",
}


def test_each_registered_command_lives_in_its_own_module() -> None:
    from workers.commands import REGISTERED

    homes = {}
    for command in REGISTERED:
        module = command.run.__module__
        # workers.commands.<name> or, for a large command, a module of its package workers.commands.<name>.
        home = ".".join(module.split(".")[:3])
        assert home.startswith("workers.commands."), (command.name, module)
        assert getattr(sys.modules[home], "COMMAND", None) is command, (command.name, home)
        homes[command.name] = home
    assert len(set(homes.values())) == len(homes), homes


def test_there_is_one_reply_implementation() -> None:
    posting: dict[str, list[str]] = {}
    for path in sorted((ROOT / "workers").rglob("*.py")):
        name = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in REPLY_CALLS
            ):
                posting.setdefault(name, []).append(f"{node.func.attr} (line {node.lineno})")
    assert "workers/reply.py" in posting
    others = {path: calls for path, calls in posting.items() if path != "workers/reply.py"}
    assert sorted(set(others) - set(NOT_COMMAND_REPLIES)) == [], others


def test_the_flows_import_no_command() -> None:
    # Commands build on the flows (and the registry imports every command): the other way round is a cycle.
    for path in sorted((ROOT / "workers" / "flows").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("workers.commands"), (path.name, node.module)


def test_test_modules_share_stories_through_tests_stories_only() -> None:
    # A test module imported by another runs its tests' module-level code twice and hides where a story lives.
    borrowed = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if module and module.startswith("tests.") and module.rsplit(".", 1)[-1].startswith("test_"):
                borrowed.append(f"{path.relative_to(ROOT)}: {module}")
    assert borrowed == []
