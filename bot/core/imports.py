"""Whether a file imports the module another file is: the evidence that a name it uses means that file's.

The index matches names, not types: ``parse`` in one file may be any of the repository's ``parse``. A file
that imports the module of the changed file (or is in its Go package) almost surely means that module's
definition; one whose language states its imports and that imports neither the module nor a package holding
it almost surely means another. Read from the file's text with the import forms of Python, JavaScript and
TypeScript, and Go; other languages say nothing (:data:`UNKNOWN`).
"""

from __future__ import annotations

import posixpath
import re
from functools import cache

# How surely a file's uses of a name mean the changed file's definition, best first.
IMPORTS = 0  # imports that module (or, in Go, is in its package or imports it)
PACKAGE = 1  # imports a package (a directory, its index or __init__) that holds the module
UNKNOWN = 2  # cannot tell: a language whose imports are not read, or an import not resolvable here
ELSEWHERE = 3  # imports neither: its uses mean something else

_PYTHON = (".py", ".pyi")
_SCRIPT = (".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs")
# Each pattern starts with a literal word (no ``^``, no alternation), which the regex engine finds fast in a
# long file; an import shown in a docstring counts too.
_PY_FROM = re.compile(r"from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(?:\(([^)]*)\)|((?:[^\n\\]|\\\n)*))")
_PY_IMPORT = re.compile(
    r"import[ \t]+([\w.]+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*[\w.]+(?:[ \t]+as[ \t]+\w+)?)*)"
)
_JS_SPECS = (
    re.compile(r"""from[ \t]*['"]([^'"\n]+)['"]"""),
    re.compile(r"""import[ \t]*\(?[ \t]*['"]([^'"\n]+)['"]"""),
    re.compile(r"""require[ \t]*\([ \t]*['"]([^'"\n]+)['"]"""),
)
_GO_BLOCK = re.compile(r"^import[ \t]*\(([^)]*)\)", re.MULTILINE)
_GO_SINGLE = re.compile(r'^import[ \t]+(?:[\w.]+[ \t]+)?"([^"\n]+)"', re.MULTILINE)
_GO_PATH = re.compile(r'"([^"\n]+)"')
_GO_PACKAGE = re.compile(r"^package[ \t]+(\w+)", re.MULTILINE)
# Go's imports come before its first other declaration: only the text above it is read.
_GO_DECLARATION = re.compile(r"^(?:func|type|var|const)\b", re.MULTILINE)


def evidence(path: str, text: str, target: str, target_text: str = "") -> int:
    """Return how surely the uses of a name in ``path`` (``text``) mean a definition of ``target``.

    ``target_text`` (the target's text) names a Go package whose directory is the repository's root.
    """
    kind, other = _family(path), _family(target)
    if kind is None or kind != other:
        return UNKNOWN
    if kind == "python":
        return _python(path, text, target)
    if kind == "script":
        return _script(path, text, target)
    return _go(path, text, target, target_text)


def _family(path: str) -> str | None:
    lowered = path.lower()
    if lowered.endswith(_PYTHON):
        return "python"
    if lowered.endswith(_SCRIPT):
        return "script"
    return "go" if lowered.endswith(".go") else None


def _best(found: list[int], default: int) -> int:
    return min(found, default=default)


@cache
def _python_module(path: str) -> str:
    """Return ``path`` as a module's slash path: no extension, a package's ``__init__`` its directory."""
    stem = path.rsplit(".", 1)[0]
    return stem[: -len("/__init__")] if stem.endswith("/__init__") else stem


def _python(path: str, text: str, target: str) -> int:
    module = _python_module(target)
    found: list[int] = []
    for dots, name, grouped, inline in _PY_FROM.findall(text):
        imported = grouped or inline
        base = name.replace(".", "/")
        members = [m.split()[0] for m in re.split(r"[,\\\n]", imported) if m.split()]
        if dots:
            here = posixpath.dirname(path)
            for _ in range(len(dots) - 1):
                here = posixpath.dirname(here)
            resolved = posixpath.join(here, base) if base else here
            found += [_relative(c, module) for c in (resolved, *(f"{resolved}/{m}" for m in members))]
        else:
            found += [_absolute(c, module) for c in (base, *(f"{base}/{m}" for m in members))]
    for group in _PY_IMPORT.findall(text):
        found += [_absolute(p.split()[0].replace(".", "/"), module) for p in group.split(",") if p.split()]
    return _best(found, ELSEWHERE)


def _relative(candidate: str, module: str) -> int:
    """Return IMPORTS when the resolved ``candidate`` is ``module``, PACKAGE for a directory above it."""
    if candidate == module:
        return IMPORTS
    return PACKAGE if candidate and module.startswith(candidate + "/") else ELSEWHERE


def _absolute(candidate: str, module: str) -> int:
    """Like :func:`_relative` for an absolute import, which names the module from some root (``src/``)."""
    if not candidate:
        return ELSEWHERE
    if module == candidate or module.endswith("/" + candidate):
        return IMPORTS
    above = "/" + posixpath.dirname(module) + "/"
    return PACKAGE if ("/" + candidate + "/") in above else ELSEWHERE


def _script_module(path: str) -> str:
    stem = path
    for ext in (".d.ts", *_SCRIPT):
        if stem.lower().endswith(ext):
            stem = stem[: -len(ext)]
            break
    return stem


def _script(path: str, text: str, target: str) -> int:
    module = _script_module(target)
    index_dir = module[: -len("/index")] if module.endswith("/index") else None
    found: list[int] = []
    unresolved = False
    for spec in (spec for pattern in _JS_SPECS for spec in pattern.findall(text)):
        if not spec.startswith("."):
            unresolved = True  # a package or a path alias: it may be this repository's own
            continue
        resolved = _script_module(posixpath.normpath(posixpath.join(posixpath.dirname(path), spec)))
        if resolved in (module, index_dir) or resolved.removesuffix("/index") == module:
            found.append(IMPORTS)
        elif module.startswith(resolved.removesuffix("/index") + "/"):
            found.append(PACKAGE)
    return _best(found, UNKNOWN if unresolved else ELSEWHERE)


def _go(path: str, text: str, target: str, target_text: str) -> int:
    folder = posixpath.dirname(target)
    if posixpath.dirname(path) == folder:
        return IMPORTS
    declared = _GO_DECLARATION.search(text)
    header = text[: declared.start()] if declared else text
    specs = _GO_SINGLE.findall(header)
    for block in _GO_BLOCK.findall(header):
        specs += _GO_PATH.findall(block)
    if folder:
        matches = [s for s in specs if s == folder or s.endswith("/" + folder)]
    else:
        package = _GO_PACKAGE.search(target_text)
        matches = [s for s in specs if package is not None and s.rsplit("/", 1)[-1] == package.group(1)]
    return IMPORTS if matches else ELSEWHERE
