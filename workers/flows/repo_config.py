"""Load a repository's ``.github/spark.yml`` through the GitHub adapter, following Probot's conventions.

A repository without its own file falls back to its organisation's ``.github`` repository: a second read that
waited for the first. Where this process last found no file of the repository's own (``_WITHOUT_OWN``, a
small bounded memory), both are read at once; the repository's read still decides, so a file added since is
used at once, and the org's read is only spent where it was needed last time.
"""

from __future__ import annotations

import contextvars
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

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
    org = f"{owner}/.github"
    # Its own tasks wait on nothing: a caller on the flows' pool may wait for them.
    org_read = (
        _ORG_READS.submit(contextvars.copy_context().run, _read, gh, org, CONFIG_PATH, None)
        if _lacks_own(repo, base_ref)
        else None
    )
    try:
        text = _read(gh, repo, CONFIG_PATH, base_ref)
    except Unreadable as exc:
        # A symlink, a submodule or a huge file where the config should be: said, and the defaults used.
        return ConfigResult(parse_config("").config, (ConfigError(source, None, f"{exc.reason}; not read"),))
    _note_own(repo, base_ref, text is not None)
    if text is None:
        text = org_read.result() if org_read is not None else _read(gh, org, CONFIG_PATH, None)
        source = f"{org}:{CONFIG_PATH}"
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


# (repository, base branch) pairs whose last load found no file of their own, most recent last.
_WITHOUT_OWN: OrderedDict[tuple[str, str], None] = OrderedDict()
_WITHOUT_OWN_MAX = 4096
_LOCK = threading.Lock()
_ORG_READS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="spark-config")


def _lacks_own(repo: str, base_ref: str) -> bool:
    with _LOCK:
        return (repo, base_ref) in _WITHOUT_OWN


def _note_own(repo: str, base_ref: str, has_own: bool) -> None:
    with _LOCK:
        if has_own:
            _WITHOUT_OWN.pop((repo, base_ref), None)
            return
        _WITHOUT_OWN[(repo, base_ref)] = None
        _WITHOUT_OWN.move_to_end((repo, base_ref))
        while len(_WITHOUT_OWN) > _WITHOUT_OWN_MAX:
            _WITHOUT_OWN.popitem(last=False)


def _read(gh: GitHubPort, repo: str, path: str, ref: str | None) -> str | None:
    try:
        return gh.file_text(repo, path, ref) if ref else gh.file_text(repo, path, "HEAD")
    except GitHubError as exc:
        # A repository the installation cannot see is the same, for config purposes, as no file at all.
        if exc.status in (403, 404):
            return None
        raise
