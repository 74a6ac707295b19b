"""Path globs, matched by pathspec with gitignore's rules: the files a review skips and why, and the paths
``.github/spark.yml`` selects. The core's only glob matcher."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import pathspec

# Files whose review is noise: what tools write, not what people write. Each group's reason is shown to users.
DEFAULT_SKIP_GLOBS: dict[str, tuple[str, ...]] = {
    "lockfile": (
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lockb",
        "poetry.lock",
        "Pipfile.lock",
        "uv.lock",
        "pdm.lock",
        "Cargo.lock",
        "go.sum",
        "composer.lock",
        "Gemfile.lock",
        "mix.lock",
        "pubspec.lock",
        "Podfile.lock",
        "packages.lock.json",
        "flake.lock",
        "*.lock",
    ),
    "generated": (
        "*_pb2.py",
        "*_pb2_grpc.py",
        "*_pb2.pyi",
        "*.pb.go",
        "*.pb.cc",
        "*.pb.h",
        "*.generated.*",
        "*.g.dart",
        "*.freezed.dart",
        "*.designer.cs",
        "__generated__/",
        "*.snap",
        "*.map",
    ),
    "vendored": ("vendor/", "third_party/", "third-party/", "node_modules/", "bower_components/", ".yarn/"),
    "build output": ("dist/", ".next/", "__pycache__/", "*.pyc", "*.class", "*.o", "*.a"),
    "minified": ("*.min.js", "*.min.css", "*.min.mjs", "*-min.js", "*.bundle.js"),
    "image": (
        "*.png",
        "*.jpg",
        "*.jpeg",
        "*.gif",
        "*.bmp",
        "*.ico",
        "*.webp",
        "*.avif",
        "*.tiff",
        "*.svg",
        "*.psd",
    ),
    "binary": (
        "*.pdf",
        "*.zip",
        "*.tar",
        "*.gz",
        "*.tgz",
        "*.bz2",
        "*.xz",
        "*.7z",
        "*.jar",
        "*.war",
        "*.whl",
        "*.so",
        "*.dylib",
        "*.dll",
        "*.exe",
        "*.bin",
        "*.wasm",
        "*.woff",
        "*.woff2",
        "*.ttf",
        "*.otf",
        "*.eot",
        "*.mp3",
        "*.mp4",
        "*.mov",
        "*.wav",
        "*.avi",
        "*.sqlite",
        "*.db",
        "*.parquet",
        "*.pkl",
        "*.npy",
    ),
}

# The largest file Spark reads to review or fix it.
DEFAULT_MAX_BYTES = 1_000_000


@lru_cache(maxsize=64)
def _spec(globs: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    """Compile gitignore globs once per distinct list; a glob gitignore refuses (``\\``) matches nothing."""
    # pathspec raises a ValueError for such a glob (GitWildMatchPatternError, GitIgnorePatternError in 1.x).
    return pathspec.GitIgnoreSpec.from_lines(tuple(glob for glob in globs if _valid(glob)))


@lru_cache(maxsize=256)
def _valid(glob: str) -> bool:
    try:
        pathspec.GitIgnoreSpec.from_lines((glob,))
    except ValueError:
        return False
    return True


def _rooted(globs: Sequence[str]) -> tuple[str, ...]:
    """Return ``globs`` anchored at the repository root (gitignore matches a glob without ``/`` anywhere)."""
    return tuple(glob if glob.startswith("/") else "/" + glob for glob in globs)


def selects(path: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    """Return whether ``path`` passes the configured include and exclude globs.

    Each glob is matched from the repository root: ``*`` and ``?`` stay within a directory, ``**`` spans
    directories (``*.py`` is a file at the root, ``**/*.py`` one at any depth), a directory covers its files.
    """
    if include and not _spec(_rooted(include)).match_file(path):
        return False
    return not (exclude and _spec(_rooted(exclude)).match_file(path))


# Defaults match case-insensitively (LOGO.PNG is an image too).
_DEFAULTS: tuple[tuple[str, str], ...] = tuple(
    (glob.lower(), reason) for reason, globs in DEFAULT_SKIP_GLOBS.items() for glob in globs
)


@lru_cache(maxsize=4096)
def skip_reason(path: str, *, is_binary: bool) -> str | None:
    """Return why ``path`` is never reviewed, whatever the configuration (binary, a default glob), or None."""
    if is_binary:
        return "binary file"
    default = _spec(tuple(glob for glob, _ in _DEFAULTS)).check_file(path.lower())
    if default.include and default.index is not None:
        glob, reason = _DEFAULTS[default.index]
        return f"{reason} ({glob})"
    return None
