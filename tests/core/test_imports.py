"""Import evidence: whether a file's uses of a name mean the changed file's definition (Python, JS/TS, Go)."""

from __future__ import annotations

import pytest

from bot.core.imports import ELSEWHERE, IMPORTS, PACKAGE, UNKNOWN, evidence


@pytest.mark.parametrize(
    ("path", "text", "target", "expected"),
    [
        # Python: relative and absolute imports of the module, of a package holding it, or of neither.
        ("click/core.py", "from .utils import make_str, echo\n", "click/utils.py", IMPORTS),
        ("click/core.py", "from . import utils\n", "click/utils.py", IMPORTS),
        ("click/core.py", "from ._compat import (\n    a,\n    b,\n)\n", "click/_compat.py", IMPORTS),
        ("click/core.py", "from .x import a, \\\n    b\n", "click/utils.py", ELSEWHERE),
        ("tests/test_u.py", "from click.utils import echo\n", "src/click/utils.py", IMPORTS),
        ("tests/test_u.py", "import click.utils as u\n", "src/click/utils.py", IMPORTS),
        ("tests/test_u.py", "import click\n", "src/click/utils.py", PACKAGE),
        ("tests/test_u.py", "from click import echo\n", "src/click/utils.py", PACKAGE),
        ("pkg/sub/a.py", "from ..headers import parse\n", "pkg/headers.py", IMPORTS),
        ("pkg/a.py", "from pkg import headers\n", "pkg/headers/__init__.py", IMPORTS),
        ("tests/test_u.py", "import os\nfrom json import loads\n", "src/click/utils.py", ELSEWHERE),
        # JavaScript and TypeScript: relative specifiers resolved; a package name cannot be told apart.
        ("src/a/b.ts", 'import { x } from "../core/schemas.js";\n', "src/core/schemas.ts", IMPORTS),
        ("src/a/b.ts", "export * from '../core';\n", "src/core/index.ts", IMPORTS),
        ("src/a/b.ts", 'import * as core from "../core/index.js";\n', "src/core/schemas.ts", PACKAGE),
        ("src/a/b.js", "const s = require('../core/schemas')\n", "src/core/schemas.ts", IMPORTS),
        ("src/a/b.ts", 'const m = await import("./lazy");\n', "src/a/lazy.tsx", IMPORTS),
        ("src/a/b.ts", 'import * as z from "zod";\n', "src/core/schemas.ts", UNKNOWN),
        ("src/a/b.ts", 'import { y } from "./y";\n', "src/core/schemas.ts", ELSEWHERE),
        # Go: the same directory is the same package; else the import path names the target's directory.
        ("cmd/x.go", "package cmd\n", "cmd/root.go", IMPORTS),
        (
            "doc/md.go",
            'package doc\n\nimport (\n\t"fmt"\n\tc "github.com/spf13/cobra/cmd"\n)\n',
            "cmd/root.go",
            IMPORTS,
        ),
        ("doc/md.go", 'package doc\n\nimport "github.com/spf13/cobra"\n', "command.go", IMPORTS),
        ("doc/md.go", 'package doc\n\nimport "fmt"\n', "command.go", ELSEWHERE),
        # Other languages, or two different ones, say nothing.
        ("src/lib.rs", "use crate::headers;\n", "src/headers.rs", UNKNOWN),
        ("web/app.ts", 'import x from "../api/headers";\n', "api/headers.py", UNKNOWN),
    ],
)
def test_import_evidence(path: str, text: str, target: str, expected: int) -> None:
    package = "package cobra\n" if target == "command.go" else ""
    assert evidence(path, text, target, package) == expected
