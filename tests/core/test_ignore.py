"""Globs with gitignore semantics: the default skips and binary files, and the configured paths."""

from __future__ import annotations

import pytest

from bot.core.ignore import selects, skip_reason


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("src/app.py", None),
        ("README.md", None),
        ("build/lib.py", None),
        ("package-lock.json", "lockfile"),
        ("web/yarn.lock", "lockfile"),
        ("go.sum", "lockfile"),
        ("deep/nested/Cargo.lock", "lockfile"),
        ("api/v1/user_pb2.py", "generated"),
        ("proto/user.pb.go", "generated"),
        ("src/schema.generated.ts", "generated"),
        ("vendor/github.com/x/y.go", "vendored"),
        ("a/b/node_modules/left-pad/index.js", "vendored"),
        ("third_party/lib.c", "vendored"),
        ("static/app.min.js", "minified"),
        ("static/app.min.css", "minified"),
        ("img/logo.png", "image"),
        ("img/LOGO.PNG", "image"),
        ("docs/diagram.svg", "image"),
        ("release/app.zip", "binary"),
        ("fonts/a.woff2", "binary"),
        ("dist/bundle.js", "build output"),
        ("vendor.py", None),
        ("src/vendors/x.py", None),
        ("src/minify.js", None),
    ],
)
def test_default_skips(path: str, reason: str | None) -> None:
    """Each default group skips its files with a named reason; ordinary sources are reviewed."""
    got = skip_reason(path, is_binary=False)
    if reason is None:
        assert got is None
    else:
        assert got is not None and got.startswith(reason), got


def test_binary() -> None:
    """Binary files are skipped before any glob is consulted."""
    assert skip_reason("src/app.py", is_binary=True) == "binary file"
    assert skip_reason("src/app.py", is_binary=False) is None


@pytest.mark.parametrize(
    ("include", "exclude", "path", "selected"),
    [
        (("src/",), (), "src/deep/a.py", True),  # a directory covers its files
        (("docs",), (), "docs/index.md", True),
        ((), ("/docs/**",), "docs/index.md", False),  # a leading / changes nothing: globs start at the root
        ((), ("\\",), "a.py", True),  # a glob gitignore refuses matches nothing
        (("\\", "*.py"), (), "a.py", True),
    ],
)
def test_selects_from_the_root(
    include: tuple[str, ...], exclude: tuple[str, ...], path: str, selected: bool
) -> None:
    """Configured globs are gitignore globs anchored at the repository root (more in test_config.py)."""
    assert selects(path, include, exclude) is selected
