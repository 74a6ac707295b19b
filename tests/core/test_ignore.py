"""Skip rules: defaults, configured include/exclude globs with gitignore semantics, binary and size."""

from __future__ import annotations

import pytest

from bot.core.ignore import DEFAULT_MAX_BYTES, IgnoreGlobs, skip_reason


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
    got = skip_reason(path, is_binary=False, size=100)
    if reason is None:
        assert got is None
    else:
        assert got is not None and got.startswith(reason), got


def test_binary_and_size() -> None:
    """Binary files and files over the size limit are skipped before any glob is consulted."""
    assert skip_reason("src/app.py", is_binary=True, size=10) == "binary file"
    too_big = skip_reason("src/app.py", is_binary=False, size=DEFAULT_MAX_BYTES + 1)
    assert too_big is not None and "too large" in too_big
    assert skip_reason("src/app.py", is_binary=False, size=DEFAULT_MAX_BYTES) is None
    assert skip_reason("src/app.py", is_binary=False, size=None) is None
    small_limit = IgnoreGlobs(max_bytes=10)
    assert skip_reason("src/app.py", is_binary=False, size=11, globs=small_limit) is not None


GLOBS = IgnoreGlobs(
    include=("src/**", "lib/", "vendor/**", "*.md", "# a comment", ""),
    exclude=("src/legacy/", "**/*_test.py", "!src/legacy/keep.py", "!vendor/ours/", "", "# note"),
)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("src/app.py", None),
        ("src/deep/er/app.py", None),
        ("lib/x/y.rb", None),
        ("README.md", None),
        ("docs/guide.md", None),
        ("tests/test_app.py", "not matched by the configured include globs"),
        ("app.py", "not matched by the configured include globs"),
        ("src/legacy/old.py", "excluded by the configured glob 'src/legacy/'"),
        ("src/legacy/keep.py", None),
        ("src/pkg/app_test.py", "excluded by the configured glob '**/*_test.py'"),
        ("vendor/ours/x.go", None),
        ("vendor/theirs/x.go", "vendored (vendor/)"),
        ("src/package-lock.json", "lockfile (package-lock.json)"),
    ],
)
def test_configured_globs(path: str, expected: str | None) -> None:
    """Include limits, exclude adds skips, and "!" re-includes a default skip; gitignore ``**`` semantics."""
    assert skip_reason(path, is_binary=False, size=1, globs=GLOBS) == expected


def test_later_lines_win() -> None:
    """The last matching line decides, so a "!" line re-includes a file even below an excluded directory."""
    assert skip_reason("src/legacy/keep.py", is_binary=False, size=1, globs=GLOBS) is None
    reversed_order = IgnoreGlobs(exclude=("!src/legacy/keep.py", "src/legacy/*"))
    assert skip_reason("src/legacy/keep.py", is_binary=False, size=1, globs=reversed_order) is not None
    assert skip_reason("src/legacy/old.py", is_binary=False, size=1, globs=reversed_order) is not None


def test_plain_glob_list_means_extra_excludes() -> None:
    """A bare list of globs is read as extra exclude globs on top of the defaults."""
    assert (
        skip_reason("docs/a.md", is_binary=False, size=1, globs=["docs/"])
        == "excluded by the configured glob 'docs/'"
    )
    assert skip_reason("yarn.lock", is_binary=False, size=1, globs=()) == "lockfile (*.lock)"
