"""Syntax checks of an edited file before anything is committed or suggested.

Python is compiled with ``ast``; JSON, YAML and TOML are loaded; other languages are parsed with tree-sitter
grammars. A language without a parser is reported as unchecked, never as a pass. Given the file before the
edit, a file that did not parse before is compared by tree-sitter error nodes (Python and JSON-with-comments
too), so an edit never adds syntax errors; and Python must not use a name pyflakes finds undefined that was
defined before the edit.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import tomllib
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import PurePosixPath
from typing import Any

import tree_sitter
import tree_sitter_c
import tree_sitter_cpp
import tree_sitter_go
import tree_sitter_java
import tree_sitter_javascript
import tree_sitter_json
import tree_sitter_python
import tree_sitter_ruby
import tree_sitter_rust
import tree_sitter_typescript
import yaml
from pyflakes import checker as pyflakes_checker
from pyflakes import messages as pyflakes_messages

# Extension -> language. Names match CHECKED_LANGUAGES.
_EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".json": "json",
    ".ipynb": "json",
    ".yml": "yaml",
    ".yaml": "yaml",
    ".toml": "toml",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "cpp",  # C++ grammar reads C headers too; a C header in a C++ project is the common case
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".rb": "ruby",
}
_FILENAMES: dict[str, str] = {"Pipfile": "toml", "Cargo.lock": "toml", "Gemfile": "ruby", "Rakefile": "ruby"}

# tree-sitter language -> the grammar wheel's function returning its language pointer.
_GRAMMARS: dict[str, Callable[[], object]] = {
    "javascript": tree_sitter_javascript.language,
    "typescript": tree_sitter_typescript.language_typescript,
    "tsx": tree_sitter_typescript.language_tsx,
    "go": tree_sitter_go.language,
    "rust": tree_sitter_rust.language,
    "java": tree_sitter_java.language,
    "c": tree_sitter_c.language,
    "cpp": tree_sitter_cpp.language,
    "ruby": tree_sitter_ruby.language,
}
# Grammars that only compare error nodes before and after an edit (their strict parser decides otherwise);
# tree-sitter's JSON grammar reads comments, so a tsconfig.json with comments is compared as such.
_COMPARE_GRAMMARS: dict[str, Callable[[], object]] = {
    "python": tree_sitter_python.language,
    "json": tree_sitter_json.language,
}

CHECKED_LANGUAGES: tuple[str, ...] = ("python", "json", "yaml", "toml", *_GRAMMARS)


@dataclass(frozen=True, slots=True)
class Verification:
    """The outcome of a syntax check; ``checked`` is False when no parser covers the language."""

    ok: bool
    language: str | None
    checked: bool
    message: str
    line: int | None = None
    # True when the file already failed to parse before the edit, so the failure is not the edit's.
    preexisting: bool = False


def language_of(path: str) -> str | None:
    """Return the language checked for ``path`` (by file name, then extension), or ``None``."""
    pure = PurePosixPath(path)
    return _FILENAMES.get(pure.name) or _EXTENSIONS.get(pure.suffix.lower())


def _check_python(text: str) -> tuple[str, int | None] | None:
    with warnings.catch_warnings():
        # Invalid escape sequences warn at compile time; they are the author's business, not a syntax error.
        warnings.simplefilter("ignore")
        try:
            compile(text, "<edited>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as exc:
            return f"{type(exc).__name__}: {exc.msg}", exc.lineno
        except ValueError as exc:  # e.g. NUL bytes
            return str(exc), None
    return None


def _check_json(text: str) -> tuple[str, int | None] | None:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"invalid JSON: {exc.msg}", exc.lineno
    return None


class _TolerantLoader(yaml.SafeLoader):
    """Safe YAML loader that accepts unknown tags (CloudFormation's !Ref, Home Assistant's !secret)."""


def _any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_scalar(node)  # type: ignore[arg-type]


_TolerantLoader.add_multi_constructor("!", _any_tag)


def _check_yaml(text: str) -> tuple[str, int | None] | None:
    try:
        for _ in yaml.load_all(text, Loader=_TolerantLoader):
            pass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        return f"invalid YAML: {problem}", mark.line + 1 if mark is not None else None
    except yaml.YAMLError as exc:
        return f"invalid YAML: {exc}", None
    return None


_TOML_LINE = re.compile(r"\(at line (\d+), column \d+\)")


def _check_toml(text: str) -> tuple[str, int | None] | None:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_LINE.search(str(exc))
        return f"invalid TOML: {exc}", int(found.group(1)) if found else None
    return None


@cache
def _parser(language: str) -> tree_sitter.Parser:
    """Build (once) a tree-sitter parser for ``language`` from its grammar wheel."""
    grammar = _GRAMMARS.get(language) or _COMPARE_GRAMMARS[language]
    return tree_sitter.Parser(tree_sitter.Language(grammar()))


def _first_error(root: tree_sitter.Node) -> tree_sitter.Node | None:
    """Return the first ERROR or MISSING node in document order, descending only into subtrees with errors."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            return node
        stack.extend(reversed([child for child in node.children if child.has_error or child.is_missing]))
    return None


def _tree_sitter_check(language: str) -> Callable[[str], tuple[str, int | None] | None]:
    def check(text: str) -> tuple[str, int | None] | None:
        tree = _parser(language).parse(text.encode("utf-8", "surrogatepass"))
        if not tree.root_node.has_error:
            return None
        node = _first_error(tree.root_node)
        if node is None:
            return f"{language} syntax error", None
        line = node.start_point.row + 1
        if node.is_missing:
            return f"{language} syntax error: missing {node.type!r}", line
        snippet = text.encode("utf-8", "surrogatepass")[node.start_byte : node.end_byte][:40]
        return f"{language} syntax error near {snippet.decode('utf-8', 'replace')!r}", line

    return check


_CHECKS: dict[str, Callable[[str], tuple[str, int | None] | None]] = {
    "python": _check_python,
    "json": _check_json,
    "yaml": _check_yaml,
    "toml": _check_toml,
    **{language: _tree_sitter_check(language) for language in _GRAMMARS},
}


def _verify_one(path: str, text: str) -> Verification:
    language = language_of(path)
    if language is None:
        return Verification(True, None, False, f"no parser for {PurePosixPath(path).name!r}; not checked")
    try:
        problem = _CHECKS[language](text)
    except (ImportError, OSError, ValueError) as exc:
        return Verification(
            True, language, False, f"the {language} parser is unavailable ({exc}); not checked"
        )
    if problem is None:
        return Verification(True, language, True, f"{language} parses")
    message, line = problem
    where = f" (line {line})" if line is not None else ""
    return Verification(False, language, True, f"{message}{where}", line)


def _syntax_errors(language: str | None, text: str) -> Counter[str] | None:
    """Return the tree-sitter error and missing nodes of ``text`` by their text, or None without a grammar."""
    if language not in _GRAMMARS and language not in _COMPARE_GRAMMARS:
        return None
    data = text.encode("utf-8", "surrogatepass")
    errors: Counter[str] = Counter()
    stack = [_parser(language).parse(data).root_node]
    while stack:
        node = stack.pop()
        if node.is_missing:
            errors[f"missing {node.type!r}"] += 1
        elif node.is_error:
            snippet = " ".join(data[node.start_byte : node.end_byte].decode("utf-8", "replace").split())
            errors[f"unexpected {snippet[:60]!r}"] += 1
        else:
            stack.extend(child for child in node.children if child.has_error or child.is_missing)
    return errors


# pyflakes' answer for texts checked lately, by digest: a review judges each finding of a file against the
# same text before the edit, and its safe fixes once more (bounded; the sets are small).
_UNDEFINED: dict[bytes, frozenset[str] | None] = {}
_UNDEFINED_MAX = 256


def _undefined_names(text: str) -> frozenset[str] | None:
    """Return the names pyflakes finds used but defined nowhere in ``text``, or None if it does not parse."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    if digest in _UNDEFINED:
        return _UNDEFINED[digest]
    names = _pyflakes_undefined(text)
    while len(_UNDEFINED) >= _UNDEFINED_MAX:
        _UNDEFINED.pop(next(iter(_UNDEFINED), b""), None)
    _UNDEFINED[digest] = names
    return names


def _pyflakes_undefined(text: str) -> frozenset[str] | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = pyflakes_checker.Checker(tree, filename="<edited>", withDoctest=False)
    return frozenset(
        str(message.message_args[0])
        for message in found.messages
        if isinstance(message, pyflakes_messages.UndefinedName)
    )


def _new_undefined(after: Verification, text: str, before: str) -> Verification:
    """Refuse a Python edit that uses names defined nowhere in the file that were not undefined before."""
    now = _undefined_names(text)
    was = _undefined_names(before)
    if now is None or was is None or not now - was:
        return after
    names = ", ".join(sorted(now - was))
    return Verification(
        False,
        "python",
        True,
        f"the edit uses names defined nowhere in the file: {names} (a half-done rename or a removed helper?)",
    )


def verify(path: str, text: str, *, before: str | None = None) -> Verification:
    """Check that the edited ``text`` parses; given ``before``, only problems the edit added count.

    A file that did not parse before is compared by syntax error nodes where a grammar can (else reported as
    not checked); a Python edit must not leave a name undefined that pyflakes did not flag before.
    """
    after = _verify_one(path, text)
    if before is None:
        return after
    if after.ok:
        return _new_undefined(after, text, before) if after.language == "python" and after.checked else after
    previous = _verify_one(path, before)
    if previous.ok:
        return after
    was, now = _syntax_errors(after.language, before), _syntax_errors(after.language, text)
    if was is None or now is None:
        return replace(
            after,
            ok=True,
            checked=False,
            preexisting=True,
            message=f"not checked: it did not parse before the edit either ({previous.message})",
        )
    added = now - was
    if added:
        return replace(
            after,
            message="the edit adds syntax errors to a file that already had some: "
            + ", ".join(sorted(added)),
        )
    return replace(
        after,
        ok=True,
        preexisting=True,
        message=f"it did not parse before the edit either ({previous.message}); the edit adds no syntax "
        "error",
    )
