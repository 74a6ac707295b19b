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
value, and the default used instead, and the rest of the file still applies. The schema has no keys for
endpoints, URLs or credentials: an unknown key is reported, never honoured.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, cast

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from bot.core import ignore
from bot.core.policy import Permission
from bot.core.render import code
from bot.core.types import Severity

CONFIG_PATH = ".github/spark.yml"
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

    def selects(self, path: str) -> bool:
        """Return whether ``path`` passes the include/exclude globs (``ignore.selects``: from the root)."""
        return ignore.selects(path, self.include, self.exclude)


@dataclass(frozen=True, slots=True)
class ConfigError:
    """One problem in a config file: where it is and what is wrong."""

    source: str
    line: int | None
    problem: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        return f"{where}: {self.problem}"


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


@cache
def schema() -> dict[str, Any]:
    """Return the JSON schema of ``.github/spark.yml`` (package data)."""
    text = resources.files("bot.core").joinpath("spark.schema.json").read_text(encoding="utf-8")
    return cast(dict[str, Any], json.loads(text))


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(schema())


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
    # Each problem drops the key it is about; what remains is validated again (dropping a key never adds
    # a problem, so this ends; the bound is a guard).
    errors: list[ConfigError] = []
    found = list(_duplicate_keys(node, [], source))
    for _ in range(MAX_PRUNING_ROUNDS):
        found += [p for error in _validator().iter_errors(data) for p in _explain(error, node, source)]
        found += _non_finite(data, [], node, source)
        if not found:
            break
        for path, error in found:
            data = _without(data, path)
            errors.append(_with_consequence(error, path))
        found = []
    else:
        data = {}
    errors = sorted(set(errors), key=lambda e: (e.line or 0, e.problem))
    mapping = cast(dict[str, Any], data) if isinstance(data, dict) else {}
    extends = mapping.get("_extends")
    return ConfigResult(build_config(mapping), tuple(errors), mapping, extends)


MAX_PRUNING_ROUNDS = 5
# What a dropped key falls back to, as the user would write it (for "the default used instead").
_DEFAULT_SHOWN: dict[str, str] = {
    "review": "the default review settings",
    "review.auto": "true",
    "review.drafts": "false",
    "review.paths": "every file",
    "review.paths.include": "every file",
    "review.paths.exclude": "none",
    "review.max_inline_comments": "20",
    "review.min_severity": "low",
    "review.instructions": "none",
    "review.debounce_seconds": "the server's default",
    "review.command_budget": "5",
    "model": "the server's models",
    "model.fast": "the server's fast model",
    "model.deep": "the server's deep model",
    "fix": "the default fix settings",
    "fix.permission": "write",
    "fix.escalate": "true",
    "describe": "the default describe settings",
    "describe.on_open": "false",
    "dry_run": "false",
    "ask": "the default ask settings",
    "ask.user_budget": "20",
    "ask.pr_budget": "60",
    "ask.thread_chat": "true",
    "_extends": "no inheritance",
}


def _key_path(path: Sequence[Any]) -> list[Any]:
    """Return a value's path up to its last mapping key: a bad list item drops the whole list."""
    keys = [i for i, step in enumerate(path) if not isinstance(step, int)]
    return list(path[: keys[-1] + 1]) if keys else []


def _with_consequence(error: ConfigError, path: Sequence[str | int]) -> ConfigError:
    """Say what happens instead: an unknown key is ignored; a bad value gives way to the default."""
    if error.problem.startswith("unknown key"):
        return ConfigError(error.source, error.line, f"{error.problem}; ignored")
    where = ".".join(str(step) for step in path)
    if not path:
        return ConfigError(error.source, error.line, f"{error.problem}; using the defaults")
    default = _DEFAULT_SHOWN.get(where, "the default")
    return ConfigError(error.source, error.line, f"{error.problem}; {where} uses {default} instead")


def _without(data: Any, path: Sequence[str | int]) -> Any:
    """Return ``data`` without the key at ``path``, copying only the mappings along the path (aliases stay
    shared, so a document of aliases is never expanded)."""
    if not path:
        return {}
    if not isinstance(data, dict) or path[0] not in data:
        return data
    copy = dict(data)
    if len(path) == 1:
        del copy[path[0]]
    else:
        copy[path[0]] = _without(copy[path[0]], path[1:])
    return copy


def build_config(data: Mapping[str, Any]) -> RepoConfig:
    """Return the ``RepoConfig`` for schema-valid ``data``; absent keys keep their defaults."""
    review = data.get("review", {})
    paths = review.get("paths", {})
    model = data.get("model", {})
    debounce = review.get("debounce_seconds")
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
        fix_permission=data.get("fix", {}).get("permission", defaults.fix_permission),
        escalate=data.get("fix", {}).get("escalate", defaults.escalate),
        describe_on_open=data.get("describe", {}).get("on_open", defaults.describe_on_open),
        dry_run=data.get("dry_run", defaults.dry_run),
        ask_user_budget=data.get("ask", {}).get("user_budget", defaults.ask_user_budget),
        ask_pr_budget=data.get("ask", {}).get("pr_budget", defaults.ask_pr_budget),
        thread_chat=data.get("ask", {}).get("thread_chat", defaults.thread_chat),
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
        ("who may run `/spark fix`", f"{config.fix_permission} permission or higher"),
        ("deep model when the fast one fails a fix", "yes" if config.escalate else "no"),
        ("summary in the description of new pull requests", "yes" if config.describe_on_open else "no"),
        ("dry run", "yes" if config.dry_run else "no"),
        ("`/spark ask` and thread replies per user an hour", str(config.ask_user_budget)),
        ("`/spark ask` and thread replies per pull request an hour", str(config.ask_pr_budget)),
        ("answers in Spark's review threads", "on" if config.thread_chat else "off"),
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


def _node_at(node: yaml.Node, path: Sequence[str | int]) -> tuple[yaml.Node, yaml.Node | None]:
    """Return the value node at ``path`` and, for a mapping entry, its key node (for the key's line)."""
    key_node: yaml.Node | None = None
    for step in path:
        if isinstance(node, yaml.MappingNode):
            for k, v in reversed(node.value):  # PyYAML keeps the last duplicate, so look from the end
                if isinstance(k, yaml.ScalarNode) and k.value == step:
                    key_node, node = k, v
                    break
            else:
                break
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
            key_node, node = None, node.value[step]
        else:
            break
    return node, key_node


def _explain(
    error: ValidationError, root: yaml.Node, source: str
) -> Iterator[tuple[list[str | int], ConfigError]]:
    path = list(error.absolute_path)
    where = ".".join(str(p) for p in path) or "top level"
    node, _ = _node_at(root, path)
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        known = set(cast(Mapping[str, Any], error.schema).get("properties", {}))
        for key in error.instance:
            if key not in known:
                _, key_node = _node_at(root, [*path, key])
                line = key_node.start_mark.line + 1 if key_node is not None else node.start_mark.line + 1
                options = ", ".join(sorted(known))
                name = repr(key)
                if not isinstance(key, str):  # YAML 1.1 reads unquoted on/off/yes/no and digits as values
                    name += " (not a name: quote it if it is one)"
                problem = f"unknown key {name} in {where}{_did_you_mean(key, known)} (known keys: {options})"
                yield [*path, key], ConfigError(source, line, problem)
        return
    yield _key_path(path), ConfigError(source, node.start_mark.line + 1, f"{where}: {_problem(error)}")


def _did_you_mean(value: object, options: Iterable[object]) -> str:
    """Return `` (did you mean 'x'?)`` for a near miss among ``options``, else ''."""
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value.lower(), [str(o) for o in options], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _problem(error: ValidationError) -> str:
    if error.validator == "enum":
        choices = cast(list[Any], error.validator_value)
        hint = _did_you_mean(error.instance, choices)
        return f"{error.instance!r} is not one of: {', '.join(str(c) for c in choices)}{hint}"
    if error.validator == "type":
        return f"expected {error.validator_value}, got {type(error.instance).__name__} {error.instance!r}"[
            :200
        ]
    if error.validator == "maxLength":
        return f"longer than {error.validator_value} characters"
    if error.validator == "maxItems":
        return f"more than {error.validator_value} entries"
    if error.validator == "pattern" and error.absolute_path and error.absolute_path[-1] == "_extends":
        return f"{error.instance!r} is not owner/repo[:path.yml] or repo"
    return str(error.message)[:200]


def _non_finite(
    data: object, path: list[str | int], root: yaml.Node, source: str, seen: set[int] | None = None
) -> list[tuple[list[str | int], ConfigError]]:
    # JSON Schema's minimum/maximum let NaN through (every comparison with it is false); YAML can spell it.
    if isinstance(data, float) and not math.isfinite(data):
        node, _ = _node_at(root, path)
        where = ".".join(str(p) for p in path)
        problem = f"{where}: {data!r} is not a finite number"
        return [(_key_path(path), ConfigError(source, node.start_mark.line + 1, problem))]
    seen = set() if seen is None else seen
    if not isinstance(data, dict | list) or id(data) in seen:
        return []  # aliases share objects: visit each once
    seen.add(id(data))
    items = data.items() if isinstance(data, dict) else enumerate(data)
    return [
        e
        for k, v in items
        if isinstance(k, str | int)
        for e in _non_finite(v, [*path, k], root, source, seen)
    ]


def _duplicate_keys(
    node: yaml.Node, path: list[str | int], source: str, seen: set[int] | None = None
) -> Iterator[tuple[list[str | int], ConfigError]]:
    # Aliases make the node tree a DAG; visiting each node once keeps a "billion laughs" file linear.
    seen = set() if seen is None else seen
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        keys: set[str] = set()
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in keys:
                    # Which of the two was meant is unknowable: the key is dropped, not the last one kept.
                    error = ConfigError(source, key.start_mark.line + 1, f"duplicate key {key.value!r}")
                    yield [*path, key.value], error
                keys.add(key.value)
                yield from _duplicate_keys(value, [*path, key.value], source, seen)
            else:
                yield from _duplicate_keys(value, path, source, seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _duplicate_keys(item, [*path, index], source, seen)


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
