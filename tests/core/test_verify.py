"""Syntax verification of edited files: every checked language passes good text and catches broken text."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.verify import CHECKED_LANGUAGES, language_of, verify

# (path, valid text, broken text, line of the breakage)
CASES = [
    ("pkg/mod.py", "def f(x):\n    return x + 1\n", "def f(x):\n    return (x + 1\n\nprint(2)\n", 2),
    ("stubs/mod.pyi", "def f(x: int) -> int: ...\n", "def f(x: int) -> int\n", 1),
    ("data.json", '{"a": [1, 2], "b": null}\n', '{\n  "a": [1, 2],\n  "b": nul\n}\n', 3),
    ("ci.yaml", "a:\n  - 1\n  - 2\nb: {c: d}\n", "a:\n  - 1\n b: 2\n", 3),
    ("pyproject.toml", '[tool]\nname = "x"\n', '[tool]\nname = "x"\nname = "y"\n', 3),
    (
        "web/app.js",
        "export function f(a) { return a * 2; }\n",
        "export function f(a) {\n  return a * ;\n}\n",
        2,
    ),
    ("web/app.mjs", "const x = async () => { await 1; };\n", "const x = async () => { await ; \n", 1),
    ("web/app.ts", "export const x: number = 1;\n", "export const x: = 1;\n", 1),
    ("web/App.tsx", "export const A = () => <div>{1}</div>;\n", "export const A = () => <div>{1</div>;\n", 1),
    (
        "cmd/main.go",
        "package main\n\nfunc main() {\n\tprintln(1)\n}\n",
        "package main\n\nfunc main() {\n\tprintln(1\n}\n",
        4,
    ),
    ("src/lib.rs", "fn main() {\n    let x = 1;\n}\n", "fn main() {\n    let x = 1\n}\n", 2),
    ("A.java", "class A {\n  int f() { return 1; }\n}\n", "class A {\n  int f() { return 1 }\n}\n", 2),
    ("src/a.c", "int main(void) {\n  return 0;\n}\n", "int main(void) {\n  return 0\n}\n", 2),
    (
        "src/a.cpp",
        "#include <vector>\nint f() { std::vector<int> v; return 0; }\n",
        "int f() { return 0 \n",
        1,
    ),
    ("lib/a.rb", "def f(x)\n  x + 1\nend\n", "def f(x)\n  x + 1\n", 1),
]


@pytest.mark.parametrize(("path", "good", "bad", "line"), CASES, ids=[c[0] for c in CASES])
def test_each_language(path: str, good: str, bad: str, line: int) -> None:
    """Valid text passes as checked; broken text fails with a message and a line near the breakage."""
    ok = verify(path, good)
    assert ok.ok and ok.checked, ok
    assert ok.language == language_of(path)
    broken = verify(path, bad)
    assert not broken.ok and broken.checked, broken
    assert broken.line is not None and abs(broken.line - line) <= 1, broken
    assert broken.message and f"line {broken.line}" in broken.message


def test_every_checked_language_has_a_case() -> None:
    """The advertised list is exactly what the table exercises."""
    assert {language_of(path) for path, *_ in CASES} == set(CHECKED_LANGUAGES)


@pytest.mark.parametrize("path", ["README.md", "Makefile", "script.sh", "noext", "style.css"])
def test_unknown_language_is_unchecked_not_passed(path: str) -> None:
    """No parser means checked=False with a message that says so."""
    result = verify(path, "anything at all {{{")
    assert result.checked is False
    assert result.language is None
    assert "not checked" in result.message


def test_yaml_with_custom_tags_and_documents() -> None:
    """CloudFormation-style tags and multi-document YAML are valid YAML."""
    text = "Resources:\n  B:\n    Value: !Ref Thing\n    List: !Split [',', 'a,b']\n---\nsecond: doc\n"
    assert verify("stack.yml", text).ok


def test_before_and_after() -> None:
    """A file already broken before the edit is not blamed on it; a file the edit broke is."""
    broken = "def f(:\n    pass\n"
    still = verify("a.py", broken + "x = 1\n", before=broken)
    assert still.ok and still.preexisting and still.checked
    assert "did not parse before the edit" in still.message
    blamed = verify("a.py", broken, before="def f():\n    pass\n")
    assert not blamed.ok and not blamed.preexisting
    fine = verify("a.py", "x = 1\n", before=broken)
    assert fine.ok and not fine.preexisting


def test_python_edge_cases() -> None:
    """NUL bytes fail cleanly; invalid escapes (a warning, not an error) pass."""
    assert not verify("a.py", "x = 1\x00\n").ok
    assert verify("a.py", 'x = "\\d"\n').ok


def test_real_repository_files_pass() -> None:
    """This repository's own Python, TOML and YAML files all verify (no false alarms on real files)."""
    root = Path(__file__).resolve().parents[2]
    paths = [*sorted((root / "bot").rglob("*.py"))[:40], root / "pyproject.toml"]
    paths += sorted(root.glob("**/*.yml"))[:10]
    for path in paths:
        if ".venv" in path.parts:
            continue
        result = verify(path.name, path.read_text(encoding="utf-8"))
        assert result.ok and result.checked, (path.name, result)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([path for path, *_ in CASES] + ["x.md"]), st.text(max_size=200))
def test_property_verify_never_raises(path: str, text: str) -> None:
    """Arbitrary text gets a verdict (with a line when it fails), never an exception."""
    result = verify(path, text, before=text[::-1])
    assert isinstance(result.ok, bool)
    assert result.message
