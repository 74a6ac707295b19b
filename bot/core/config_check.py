"""Checking one ``.github/spark.yml`` against its JSON schema: each problem with its line and what happens
instead (the key is dropped, its default used), with a "did you mean" for a misspelt key or value."""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, cast

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError


@dataclass(frozen=True, slots=True)
class ConfigError:
    """One problem in a config file: where it is and what is wrong."""

    source: str
    line: int | None
    problem: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        return f"{where}: {self.problem}"


@cache
def schema() -> dict[str, Any]:
    """Return the JSON schema of ``.github/spark.yml`` (package data)."""
    text = resources.files("bot.core").joinpath("spark.schema.json").read_text(encoding="utf-8")
    return cast(dict[str, Any], json.loads(text))


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(schema())


def check(data: Any, node: yaml.Node, source: str) -> tuple[Any, list[ConfigError]]:
    """Return ``data`` without each key a problem is about, and the problems (with lines, in file order).

    ``node`` is the document's YAML node (for lines); ``data`` what it constructs. What remains is
    validated again: dropping a key never adds a problem, so this ends (the bound is a guard).
    """
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
    return data, sorted(set(errors), key=lambda e: (e.line or 0, e.problem))


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
