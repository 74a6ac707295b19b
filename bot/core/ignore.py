"""Which files a review or fix skips, and why: defaults plus configured globs, with gitignore semantics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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

DEFAULT_MAX_BYTES = 1_000_000


@dataclass(frozen=True, slots=True)
class IgnoreGlobs:
    """Configured gitignore-style globs: ``exclude`` skips (``!glob`` re-includes), ``include`` limits."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_bytes: int = DEFAULT_MAX_BYTES


def _patterns(lines: Sequence[str]) -> tuple[str, ...]:
    """Drop blank and comment lines, so a match's index is a position in what remains."""
    return tuple(line for line in lines if line.strip() and not line.lstrip().startswith("#"))


@lru_cache(maxsize=64)
def _spec(lines: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    """Compile gitignore lines once per distinct configuration."""
    return pathspec.GitIgnoreSpec.from_lines(lines)


# Defaults match case-insensitively (LOGO.PNG is an image too); configured globs keep gitignore's case rules.
_DEFAULTS: tuple[tuple[str, str], ...] = tuple(
    (glob.lower(), reason) for reason, globs in DEFAULT_SKIP_GLOBS.items() for glob in globs
)


def skip_reason(
    path: str, *, is_binary: bool, size: int | None, globs: IgnoreGlobs | Sequence[str] | None = None
) -> str | None:
    """Return why ``path`` is skipped (binary, too large, a default or configured glob), else ``None``.

    ``size`` may be unknown (``None``); ``globs`` may be a plain list of extra exclude globs.
    """
    if globs is None or not isinstance(globs, IgnoreGlobs):
        globs = IgnoreGlobs(exclude=tuple(globs or ()))
    if is_binary:
        return "binary file"
    if size is not None and size > globs.max_bytes:
        return f"too large ({size:,} bytes; the limit is {globs.max_bytes:,})"
    include = _patterns(globs.include)
    if include and not _spec(include).match_file(path):
        return "not matched by the configured include globs"
    exclude = _patterns(globs.exclude)
    configured = _spec(exclude).check_file(path) if exclude else None
    if configured is not None and configured.include is not None and configured.index is not None:
        # The configuration has the last word: "!vendor/" re-includes what a default skipped.
        return (
            f"excluded by the configured glob {exclude[configured.index]!r}" if configured.include else None
        )
    default = _spec(tuple(glob for glob, _ in _DEFAULTS)).check_file(path.lower())
    if default.include and default.index is not None:
        glob, reason = _DEFAULTS[default.index]
        return f"{reason} ({glob})"
    return None
