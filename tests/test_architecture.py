"""docs/architecture.md against the tree: every module named in its place, every path it names real."""

from __future__ import annotations

import re
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
