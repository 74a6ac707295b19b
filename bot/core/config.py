"""``.github/spark.yml``: the per-repository settings, validated against a JSON schema with line numbers.

Resolution (done by the GitHub adapter, which fetches the texts; everything here is pure):

1. ``.github/spark.yml`` on the pull request's *base* branch, never its head, so a PR cannot change its own
   rules;
2. if the repository has none, ``.github/spark.yml`` in the organisation's ``.github`` repository;
3. a file with ``_extends: owner/repo[:path]`` (Probot's convention) is laid over the file it names
   (``merge_results(base, override)``), followed at most ``MAX_EXTENDS_DEPTH`` levels; a target already in
   the chain is a cycle and is refused with an error.

A file that is not YAML is reported (file, line, problem) and the defaults are used instead. In a YAML file,
one bad key or value drops only that key: it is reported with its line, a "did you mean" for a misspelt key or
value, and the default used instead, and the rest of the file still applies (``config_check.py``). The schema
has no keys for endpoints, URLs or credentials: an unknown key is reported, never honoured.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import yaml

from bot.core import ignore
from bot.core.config_check import ConfigError, check, schema
from bot.core.policy import Permission
from bot.core.reasoning import TASKS, Effort, Task
from bot.core.render import code
from bot.core.types import Severity

CONFIG_PATH = ".github/spark.yml"
CiFix = Literal["off", "offer", "auto"]
# The merge gate (bot.core.gate): off, or fail Spark's check run on unresolved high-severity findings.
Gate = Literal["off", "high"]
# Probot follows `_extends` once; a few levels allow org -> team -> repo layering without loops.
MAX_EXTENDS_DEPTH = 3
# A config file is a few hundred bytes; anything this large is a mistake or an attack on the parser.
MAX_CONFIG_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class RepoConfig:
    """The effective settings for one repository; every field has the default used when the file is absent."""

    auto_review: bool = True
    review_drafts: bool = False
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_inline_comments: int = 20
    min_severity: Severity = "low"
    # Free text from the repository: given to the model only as quoted data.
    instructions: str = ""
    # None: the operator's default (Settings.spark_model_fast/_deep, spark_review_debounce_seconds).
    model_fast: str | None = None
    model_deep: str | None = None
    debounce_seconds: float | None = None
    # `/spark review` runs each user may ask for on one pull request a day (each: a model call per file).
    review_budget: int = 5
    # The merge gate: "high" fails Spark's check run while a high-severity finding stands unresolved.
    gate: Gate = "off"
    fix_permission: Permission = "write"
    # A fix the fast model could not make after its retry goes to the deep model once.
    escalate: bool = True
    # Write a summary into each new pull request's description, as `/spark describe` does.
    describe_on_open: bool = False
    dry_run: bool = False
    # `/spark ask` and replies in Spark's threads: commands per hour per user and per pull request.
    ask_user_budget: int = 20
    ask_pr_budget: int = 60
    # Answer humans' replies in Spark's own review threads (dismissals included).
    thread_chat: bool = True
    # A failed check on the head: "off", "offer" (a Fix CI button, /spark fix ci), "auto" (fixed once a head).
    ci_fix: CiFix = "offer"
    # The checks Spark may act on (names with wildcards); empty: every check.
    ci_checks: tuple[str, ...] = ()
    # Reasoning effort per task the repository chose; a task absent here takes the operator's default.
    reasoning: tuple[tuple[Task, Effort], ...] = ()

    def efforts(self, defaults: Mapping[Task, Effort]) -> dict[Task, Effort]:
        """Return the effort per task: the repository's where it chose one, else ``defaults``."""
        return {**defaults, **dict(self.reasoning)}

    def selects(self, path: str) -> bool:
        """Return whether ``path`` passes the include/exclude globs (``ignore.selects``: from the root)."""
        return ignore.selects(path, self.include, self.exclude)


@dataclass(frozen=True, slots=True)
class ConfigResult:
    """A parsed file: the config to use, its problems, its valid data (for merging) and its ``_extends``."""

    config: RepoConfig
    errors: tuple[ConfigError, ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict)
    extends: str | None = None

    @property
    def ok(self) -> bool:
        """Return whether the file was valid (its settings are in effect)."""
        return not self.errors


def parse_config(text: str, source: str = CONFIG_PATH) -> ConfigResult:
    """Parse and validate one config file; on any error return the defaults and every problem and line."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_CONFIG_BYTES:
        return _invalid([ConfigError(source, None, f"file is larger than {MAX_CONFIG_BYTES // 1024} KB")])
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        # A parser that runs off the end reports the line after the last one; point at the last real line.
        line = min(mark.line + 1, max(1, len(text.rstrip().splitlines()))) if mark else None
        return _invalid([ConfigError(source, line, f"YAML syntax: {problem}")])
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        return _invalid(
            [ConfigError(source, line, f"not valid text: character {exc.character!r} is not allowed")]
        )
    except yaml.YAMLError as exc:
        return _invalid([ConfigError(source, None, f"YAML syntax: {exc}")])
    if data is None:
        return ConfigResult(RepoConfig())
    assert node is not None
    # YAML 1.1 reads a bare `off` as false.
    ci = data.get("ci") if isinstance(data, dict) else None
    if isinstance(ci, dict) and ci.get("fix") is False:
        ci["fix"] = "off"
    review = data.get("review") if isinstance(data, dict) else None
    if isinstance(review, dict) and review.get("gate") is False:
        review["gate"] = "off"
    data, errors = check(data, node, source)
    mapping = cast(dict[str, Any], data) if isinstance(data, dict) else {}
    extends = mapping.get("_extends")
    return ConfigResult(build_config(mapping), tuple(errors), mapping, extends)


def build_config(data: Mapping[str, Any]) -> RepoConfig:
    """Return the ``RepoConfig`` for schema-valid ``data``; absent keys keep their defaults."""
    review = data.get("review", {})
    paths = review.get("paths", {})
    model = data.get("model", {})
    debounce = review.get("debounce_seconds")
    reasoning = data.get("reasoning", {})
    defaults = RepoConfig()
    return RepoConfig(
        auto_review=review.get("auto", defaults.auto_review),
        review_drafts=review.get("drafts", defaults.review_drafts),
        include=tuple(paths.get("include", ())),
        exclude=tuple(paths.get("exclude", ())),
        max_inline_comments=review.get("max_inline_comments", defaults.max_inline_comments),
        min_severity=review.get("min_severity", defaults.min_severity),
        instructions=review.get("instructions", defaults.instructions),
        model_fast=model.get("fast"),
        model_deep=model.get("deep"),
        debounce_seconds=float(debounce) if debounce is not None else None,
        review_budget=review.get("command_budget", defaults.review_budget),
        gate=review.get("gate", defaults.gate),
        fix_permission=data.get("fix", {}).get("permission", defaults.fix_permission),
        escalate=data.get("fix", {}).get("escalate", defaults.escalate),
        describe_on_open=data.get("describe", {}).get("on_open", defaults.describe_on_open),
        dry_run=data.get("dry_run", defaults.dry_run),
        ask_user_budget=data.get("ask", {}).get("user_budget", defaults.ask_user_budget),
        ask_pr_budget=data.get("ask", {}).get("pr_budget", defaults.ask_pr_budget),
        thread_chat=data.get("ask", {}).get("thread_chat", defaults.thread_chat),
        reasoning=tuple((task, reasoning[task]) for task in TASKS if task in reasoning),
        ci_fix=data.get("ci", {}).get("fix", defaults.ci_fix),
        ci_checks=tuple(data.get("ci", {}).get("checks", defaults.ci_checks)),
    )


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge two config mappings: ``override`` wins key by key; lists are replaced, not concatenated.

    ``_extends`` of either side is dropped: it has been followed by the time the files are merged.
    """
    merged = {k: v for k, v in base.items() if k != "_extends"}
    for key, value in override.items():
        if key == "_extends":
            continue
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def merge_results(base: ConfigResult, override: ConfigResult) -> ConfigResult:
    """Lay ``override`` (the file that says ``_extends``) over ``base``; errors of both are kept.

    An invalid file contributes nothing but its errors, so the valid one (or the defaults) stays in effect.
    """
    data = merge(base.data, override.data)
    return ConfigResult(build_config(data), base.errors + override.errors, data, None)


def extends_target(raw: str, owner: str | None = None) -> tuple[str, str] | None:
    """Return ``("owner/repo", path)`` that ``_extends: raw`` names, or ``None`` when it is malformed.

    ``repo`` alone means a repository of ``owner`` (the extending repository's owner); the path defaults to
    ``.github/spark.yml``. Paths that climb (``..``) or are absolute are malformed.
    """
    match = _EXTENDS.fullmatch(raw.strip())
    if match is None:
        return None
    repo_owner, repo, path = match.group("owner") or owner, match.group("repo"), match.group("path")
    if repo_owner is None or repo in (".", ".."):
        return None
    path = path or CONFIG_PATH
    if path.startswith("/") or ".." in path.split("/"):
        return None
    return f"{repo_owner}/{repo}", path


def chain_error(chain: Sequence[str], target: str, source: str) -> ConfigError | None:
    """Return why following ``_extends`` from ``source`` to ``target`` must stop (cycle, depth), or ``None``.

    ``chain`` holds the ``owner/repo:path`` of every file already read, in order.
    """
    if target in chain:
        return ConfigError(source, None, f"_extends cycle: {' -> '.join([*chain, target])}")
    if len(chain) > MAX_EXTENDS_DEPTH:
        return ConfigError(source, None, f"_extends goes deeper than {MAX_EXTENDS_DEPTH} levels; stopped")
    return None


def describe(config: RepoConfig) -> str:
    """Render the effective config as a Markdown list for ``/spark help`` and the check run."""

    def show(values: tuple[str, ...], empty: str) -> str:
        return ", ".join(code(v) for v in values) if values else empty

    instructions = f"{len(config.instructions)} characters" if config.instructions else "none"
    rows = [
        ("automatic review", "on" if config.auto_review else "off"),
        ("review drafts", "yes" if config.review_drafts else "no"),
        ("paths included", show(config.include, "all")),
        ("paths excluded", show(config.exclude, "none")),
        ("max inline comments", str(config.max_inline_comments)),
        ("minimum severity", config.min_severity),
        ("fast model", code(config.model_fast) if config.model_fast else "server default"),
        ("deep model", code(config.model_deep) if config.model_deep else "server default"),
        (
            "push debounce",
            f"{config.debounce_seconds:g} s" if config.debounce_seconds is not None else "server default",
        ),
        ("`/spark review` runs per user and pull request a day", str(config.review_budget)),
        (
            "merge gate",
            "fails while a high-severity finding is unresolved" if config.gate == "high" else "off",
        ),
        ("who may run `/spark fix`", f"{config.fix_permission} permission or higher"),
        ("deep model when the fast one fails a fix", "yes" if config.escalate else "no"),
        ("summary in the description of new pull requests", "yes" if config.describe_on_open else "no"),
        ("dry run", "yes" if config.dry_run else "no"),
        ("`/spark ask` and thread replies per user an hour", str(config.ask_user_budget)),
        ("`/spark ask` and thread replies per pull request an hour", str(config.ask_pr_budget)),
        ("answers in Spark's review threads", "on" if config.thread_chat else "off"),
        (
            "failed checks",
            {"off": "ignored", "offer": "a Fix CI offer", "auto": "fixed automatically"}[config.ci_fix],
        ),
        ("checks Spark may act on", show(config.ci_checks, "all")),
        (
            "reasoning effort",
            ", ".join(f"{task} {effort}" for task, effort in config.reasoning) or "server default",
        ),
        ("extra review instructions", instructions),
    ]
    return "\n".join(f"- {name}: {value}" for name, value in rows)


_EXTENDS = re.compile(
    r"(?:(?P<owner>[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38})/)?"
    r"(?P<repo>[A-Za-z0-9._-]{1,100})"
    r"(?::(?P<path>[A-Za-z0-9._/-]{1,200}\.ya?ml))?"
)


def _invalid(errors: list[ConfigError]) -> ConfigResult:
    return ConfigResult(RepoConfig(), tuple(errors))


__all__ = [
    "CONFIG_PATH",
    "MAX_EXTENDS_DEPTH",
    "ConfigError",
    "ConfigResult",
    "RepoConfig",
    "build_config",
    "chain_error",
    "describe",
    "extends_target",
    "merge",
    "merge_results",
    "parse_config",
    "schema",
]
