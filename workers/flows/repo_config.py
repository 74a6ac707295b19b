"""Load a repository's ``.github/spark.yml`` through the GitHub adapter, following Probot's conventions."""

from __future__ import annotations

from bot.adapters.github_port import GitHubError, GitHubPort, Unreadable
from bot.core.config import (
    CONFIG_PATH,
    ConfigError,
    ConfigResult,
    chain_error,
    extends_target,
    merge_results,
    parse_config,
)


def load_repo_config(gh: GitHubPort, repo: str, base_ref: str) -> ConfigResult:
    """Return the effective config: the base branch's file, else the org's ``.github``, with ``_extends``.

    Read from the base branch, never the pull request's head, so a pull request cannot change its own rules.
    """
    owner = repo.split("/", 1)[0]
    source = f"{repo}:{CONFIG_PATH}"
    try:
        text = _read(gh, repo, CONFIG_PATH, base_ref)
    except Unreadable as exc:
        # A symlink, a submodule or a huge file where the config should be: said, and the defaults used.
        return ConfigResult(parse_config("").config, (ConfigError(source, None, f"{exc.reason}; not read"),))
    if text is None:
        text = _read(gh, f"{owner}/.github", CONFIG_PATH, None)
        source = f"{owner}/.github:{CONFIG_PATH}"
    if text is None:
        return ConfigResult(parse_config("").config)
    return _resolve(gh, parse_config(text, source), source, owner, [source])


def _resolve(gh: GitHubPort, result: ConfigResult, source: str, owner: str, chain: list[str]) -> ConfigResult:
    if result.extends is None:
        return result
    target = extends_target(result.extends, owner)
    if target is None:
        error = ConfigError(source, None, f"_extends: {result.extends!r} is not owner/repo[:path]")
        return ConfigResult(result.config, (*result.errors, error), result.data)
    name = f"{target[0]}:{target[1]}"
    stop = chain_error(chain, name, source)
    if stop is not None:
        return ConfigResult(result.config, (*result.errors, stop), result.data)
    text = _read(gh, target[0], target[1], None)
    if text is None:
        error = ConfigError(source, None, f"_extends: {name} was not found (is the App installed there?)")
        return ConfigResult(result.config, (*result.errors, error), result.data)
    base = _resolve(gh, parse_config(text, name), name, target[0].split("/", 1)[0], [*chain, name])
    return merge_results(base, result)


def _read(gh: GitHubPort, repo: str, path: str, ref: str | None) -> str | None:
    try:
        return gh.file_text(repo, path, ref) if ref else gh.file_text(repo, path, "HEAD")
    except GitHubError as exc:
        # A repository the installation cannot see is the same, for config purposes, as no file at all.
        if exc.status in (403, 404):
            return None
        raise
