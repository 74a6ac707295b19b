"""Scenario files: a pull-request story for the sandbox, loaded from YAML, validated, and applied.

A scenario declares the repository's base files, the PR's head changes (files, or a unified diff), fork or
not, collaborators, the events to fire in order, the model's scripted replies, speed and faults, GitHub
latency and faults, and what a user should see afterwards. ``scenario.schema.json`` is the reference.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from sandbox.cerebras import Fault, FaultKind, ModelSandbox, Reasoning, Script, Speed
from sandbox.github import GitHubSandbox
from sandbox.github.actions import Job, Step
from sandbox.github.rules import BranchRules

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
DEFAULT_SCENARIO = "python-bug-fix"


class ScenarioError(Exception):
    """A scenario file that cannot be used, with a message naming the file, the place and the problem."""


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happens (``kind`` is one of ``EVENT_KINDS``); ``data`` holds its fields."""

    kind: str
    data: Mapping[str, Any]

    def describe(self) -> str:
        """Return a one-line human description."""
        if self.kind == "comment":
            return f"@{self.data['by']} comments {self.data['body']!r}"
        if self.kind == "push":
            who = f"@{self.data['by']} " if self.data.get("by") else ""
            return f"{who}pushes {', '.join(self.data['files'])}"
        if self.kind == "review_comment":
            where = f"{self.data['path']} line {self.data['line']}"
            return f"@{self.data['by']} comments on {where}: {self.data['body']!r}"
        if self.kind == "reply":
            return f"@{self.data['by']} replies in a review thread: {self.data['body']!r}"
        if self.kind == "wait":
            return f"wait for the queues (at least {self.data['seconds']:g} s)"
        if self.kind == "ci":
            jobs = ", ".join(job["name"] for job in self.data["jobs"])
            return f"the {self.data.get('workflow', 'CI')} workflow runs on the head ({jobs})"
        return {"open": "the pull request is opened", "close": "the pull request is closed"}[self.kind]


@dataclass(frozen=True, slots=True)
class Scenario:
    """A validated scenario: the raw document plus typed views of what the harness needs."""

    name: str
    description: str
    source: str
    data: Mapping[str, Any]
    base_files: Mapping[str, str]
    head_files: Mapping[str, str]
    events: tuple[Event, ...]
    scripts: tuple[Script, ...]
    speed: Speed
    model_faults: tuple[Fault, ...]
    reasoning: Reasoning = field(default_factory=Reasoning)
    expect: Mapping[str, Any] = field(default_factory=dict)

    @property
    def repository(self) -> Mapping[str, Any]:
        """Return the ``repository`` section."""
        return self.data["repository"]  # type: ignore[no-any-return]

    @property
    def pull_request(self) -> Mapping[str, Any]:
        """Return the ``pull_request`` section."""
        return self.data["pull_request"]  # type: ignore[no-any-return]

    @property
    def full_name(self) -> str:
        """Return ``owner/name`` of the base repository."""
        return f"{self.repository['owner']}/{self.repository['name']}"

    @property
    def default_branch(self) -> str:
        """Return the base branch name."""
        return str(self.repository.get("default_branch", "main"))

    @property
    def fork(self) -> Mapping[str, Any] | None:
        """Return the ``fork`` section, or None for a same-repository PR."""
        fork: Mapping[str, Any] | None = self.pull_request.get("fork")
        return fork

    @property
    def collaborators(self) -> Mapping[str, str]:
        """Return login -> permission on the base repository."""
        return dict(self.data.get("collaborators") or {})

    @property
    def github_latency(self) -> float:
        """Return seconds of latency to add to every GitHub API call."""
        return float(self.data.get("github", {}).get("latency_ms", 0)) / 1000

    @property
    def github_faults(self) -> list[Mapping[str, Any]]:
        """Return the GitHub fault injections as declared."""
        return list(self.data.get("github", {}).get("faults", []))

    def model_sandbox(self, **kwargs: Any) -> ModelSandbox:
        """Return an (unstarted) local Cerebras loaded with this scenario's scripts, speed and faults."""
        return ModelSandbox(
            self.scripts,
            speed=self.speed,
            reasoning=self.reasoning,
            faults=self.model_faults,
            label=self.name,
            **kwargs,
        )


@cache
def schema() -> dict[str, Any]:
    """Return the scenario JSON schema (package data)."""
    text = resources.files("sandbox").joinpath("scenario.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def bundled() -> list[Path]:
    """Return the scenario files that ship with Spark, sorted by name."""
    return sorted(SCENARIO_DIR.glob("*.yaml"))


def find(name_or_path: str | None) -> Path:
    """Return the file for a bundled scenario name, or the given path; the default when None."""
    if name_or_path is None:
        return SCENARIO_DIR / f"{DEFAULT_SCENARIO}.yaml"
    path = Path(name_or_path)
    if path.is_file():
        return path
    candidate = SCENARIO_DIR / f"{name_or_path.removesuffix('.yaml')}.yaml"
    if candidate.is_file():
        return candidate
    names = ", ".join(p.stem for p in bundled())
    raise ScenarioError(f"{name_or_path}: no such file or bundled scenario (bundled: {names})")


def load(name_or_path: str | Path | None = None) -> Scenario:
    """Read, validate and build a scenario from a file path or a bundled name."""
    path = find(str(name_or_path) if name_or_path is not None else None)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror}") from None
    return parse(text, source=str(path))


# libyaml's loader where PyYAML was built with it (its wheels are): the same documents, a tenth of the CPU.
SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SAFE_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def parse(text: str, source: str = "<scenario>") -> Scenario:
    """Validate YAML ``text`` against the schema and build a ``Scenario``; errors say where and what."""
    try:
        data = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{source}: not valid YAML: {exc}") from None
    validator = jsonschema.Draft202012Validator(schema())
    errors = [_explain(error) for error in validator.iter_errors(data)]
    if errors:
        node = yaml.compose(text, Loader=SAFE_LOADER)  # the lines, only when there is something to point at
        problems = [(_line_of(node, where) or 0, _json_path(where), message) for where, message in errors]
        lines = [
            f"line {line}, {path}: {message}" if line else f"{path}: {message}"
            for line, path, message in sorted(problems)
        ]
        raise ScenarioError(f"{source}: invalid scenario:\n  " + "\n  ".join(lines))
    return _build(data, source)


def _build(data: dict[str, Any], source: str) -> Scenario:
    base = dict(data["repository"]["files"])
    pr = data["pull_request"]
    head: dict[str, str] = dict(base)
    for path, content in (pr.get("files") or {}).items():
        if content is None:
            head.pop(path, None)
        else:
            head[path] = content
    if pr.get("diff"):
        try:
            head = apply_unified_diff(head, pr["diff"])
        except ValueError as exc:
            raise ScenarioError(f"{source}: pull_request.diff: {exc}") from None
    model = data.get("model") or {}
    speed = Speed(**model.get("speed", {}))
    thinking = model.get("reasoning", 0)
    reasoning = Reasoning.flat(thinking) if isinstance(thinking, int) else Reasoning(**thinking)
    scripts = tuple(Script(**reply) for reply in model.get("replies", []))
    faults = tuple(
        Fault(FaultKind(f["kind"]), **{k: v for k, v in f.items() if k != "kind"})
        for f in model.get("faults", [])
    )
    events = []
    for item in data["events"]:
        [(kind, value)] = item.items()
        events.append(Event(kind, {"seconds": value} if kind == "wait" else dict(value or {})))
    return Scenario(
        name=data["name"],
        description=data.get("description", "").strip(),
        source=source,
        data=data,
        base_files=base,
        head_files=head,
        events=tuple(events),
        scripts=scripts,
        speed=speed,
        model_faults=faults,
        reasoning=reasoning,
        expect=data.get("expect") or {},
    )


def apply_unified_diff(files: Mapping[str, str], diff: str) -> dict[str, str]:
    """Return ``files`` with a unified diff applied strictly (every context and removed line must match)."""
    try:
        patch = PatchSet(diff)
    except UnidiffParseError as exc:
        raise ValueError(f"cannot parse the diff: {exc}") from None
    if not patch:
        raise ValueError("the diff contains no file changes")
    result = dict(files)
    for patched in patch:
        path = patched.path
        if patched.is_added_file:
            old_lines: list[str] = []
        elif path not in result:
            raise ValueError(f"{path}: the diff changes a file the base does not have")
        else:
            old_lines = result[path].splitlines(keepends=True)
        if patched.is_removed_file:
            result.pop(path, None)
            continue
        out: list[str] = []
        cursor = 0  # index into old_lines
        for hunk in patched:
            start = max(hunk.source_start - 1, 0)
            if start < cursor:
                raise ValueError(f"{path}: hunks overlap at line {hunk.source_start}")
            out.extend(old_lines[cursor:start])
            cursor = start
            for line in hunk:
                if line.is_context or line.is_removed:
                    have = old_lines[cursor] if cursor < len(old_lines) else None
                    if have is None or have.rstrip("\r\n") != line.value.rstrip("\r\n"):
                        raise ValueError(
                            f"{path}: line {cursor + 1} is {have!r} but the diff expects {line.value!r}"
                        )
                    cursor += 1
                    if line.is_context:
                        out.append(have)
                elif line.is_added:
                    out.append(line.value)
        out.extend(old_lines[cursor:])
        result[path] = "".join(out)
    return result


EVENT_KINDS = ("open", "comment", "push", "review_comment", "reply", "close", "wait", "ci")


def _explain(error: jsonschema.ValidationError) -> tuple[list[str | int], str]:
    """Return where a schema error is and a message a person can act on (``oneOf`` errors are opaque)."""
    instance = error.instance
    if error.validator == "oneOf" and isinstance(instance, dict):
        kinds = [k for k in instance if k in EVENT_KINDS]
        if len(instance) != 1 or not kinds:
            keys = ", ".join(map(str, instance)) or "nothing"
            return list(
                error.absolute_path
            ), f"an event is exactly one of {', '.join(EVENT_KINDS)}; got {keys}"
        # Report what is wrong inside the branch this event chose.
        branch = [e for e in error.context or () if e.absolute_path and e.absolute_path[-1] == kinds[0]]
        if branch:
            best = jsonschema.exceptions.best_match(branch)
            return list(best.absolute_path), best.message
    return list(error.absolute_path), error.message


def _json_path(parts: Sequence[str | int]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _line_of(node: yaml.Node | None, parts: list[str | int]) -> int | None:
    """Return the 1-based line of the YAML node at ``parts`` (or its nearest existing parent)."""
    if node is None:
        return None
    for part in parts:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            child = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
        if child is None:
            break
        node = child
    return node.start_mark.line + 1


# --- applying a scenario to the local GitHub ------------------------------------------------------


@dataclass
class Scene:
    """A scenario applied to a local GitHub: where its repository and pull request live, and its actions."""

    scenario: Scenario
    github: GitHubSandbox
    repo: str
    pr_number: int = 0
    initial_head: str = ""

    def open_pull_request(self, *, webhooks: bool = True) -> int:
        """Push the head changes and open the PR (firing ``pull_request.opened`` if ``webhooks``)."""
        sc, gh, pr = self.scenario, self.github, self.scenario.pull_request
        changes: dict[str, str | bytes | None] = {
            p: c for p, c in sc.head_files.items() if sc.base_files.get(p) != c
        }
        changes.update({p: None for p in sc.base_files if p not in sc.head_files})
        gh.faults.webhooks_enabled = webhooks
        try:
            self.pr_number = gh.open_pull_request(
                self.repo,
                pr["head_branch"],
                changes,
                title=pr["title"],
                body=pr.get("body", ""),
                author=pr["author"],
                base=sc.default_branch,
                fork_owner=sc.fork["owner"] if sc.fork else None,
                maintainer_can_modify=bool(sc.fork and sc.fork.get("maintainer_can_modify")),
                draft=bool(pr.get("draft", False)),
            )
        finally:
            gh.faults.webhooks_enabled = True
        self.initial_head = gh.head_sha(self.repo, self.pr_number)
        return self.pr_number

    @property
    def head_repo(self) -> str:
        """Return the full name of the repository holding the head branch (the fork, for a fork PR)."""
        return str(self.github.pull(self.repo, self.pr_number)["head"]["repo"]["full_name"])

    def act(self, event: Event) -> None:
        """Make one event happen on the local GitHub, which fires the webhooks GitHub would."""
        gh, pr = self.github, self.scenario.pull_request
        if event.kind not in ("open", "wait") and not self.pr_number:
            raise ScenarioError(
                f"{self.scenario.source}: '{event.kind}' comes before the pull request is opened"
            )
        if event.kind == "open":
            self.open_pull_request(webhooks=True)
        elif event.kind == "comment":
            gh.comment(self.repo, self.pr_number, event.data["body"], author=event.data["by"])
        elif event.kind == "push":
            message = event.data.get("message") or "Update " + ", ".join(event.data["files"])
            author = event.data.get("by") or pr["author"]
            gh.push(
                self.head_repo, pr["head_branch"], dict(event.data["files"]), message=message, author=author
            )
        elif event.kind == "review_comment":
            d = event.data
            gh.review_comment(
                self.repo,
                self.pr_number,
                d["path"],
                d["line"],
                d["body"],
                author=d["by"],
                side=d.get("side", "RIGHT"),
                start_line=d.get("start_line"),
            )
        elif event.kind == "reply":
            gh.reply(
                self.repo,
                self.pr_number,
                self._thread_for(event),
                event.data["body"],
                author=event.data["by"],
            )
        elif event.kind == "close":
            gh.close_pull_request(self.repo, self.pr_number, author=pr["author"])
        elif event.kind == "wait":
            time.sleep(float(event.data["seconds"]))
        elif event.kind == "ci":
            self.run_ci(event.data)

    def run_ci(self, data: Mapping[str, Any]) -> list[int]:
        """Run the workflow on the pull request's current head: each job fails while its condition holds in
        the head's files (so a fix pushed since makes it pass); return the jobs' ids."""
        head = self.github.head_sha(self.repo, self.pr_number)
        jobs = []
        for spec in data["jobs"]:
            condition = spec["fails_while"]
            text = self.github.file_at(self.head_repo, head, condition["path"]) or ""
            failing = condition["contains"] in text
            output = spec["output"] if failing else spec.get("passing_output", "")
            steps = [
                Step("Run actions/checkout@v4"),
                Step(
                    f"Run {spec['command']}", output, "failure" if failing else "success", 1, spec["command"]
                ),
            ]
            jobs.append(Job(spec["name"], steps))
        return self.github.run_workflow(self.repo, head, jobs, name=data.get("workflow", "CI"))

    def _thread_for(self, event: Event) -> int:
        comments = self.github.review_comments(self.repo, self.pr_number)
        if event.data.get("to") == "last_by_app":
            comments = [c for c in comments if c["user"]["login"] == self.github.bot_login]
        if not comments:
            raise ScenarioError(f"{self.scenario.source}: nothing to reply to: {event.describe()}")
        # GitHub replies to a thread's first comment; a reply's own id is not a thread.
        return int(comments[-1].get("in_reply_to_id") or comments[-1]["id"])


def apply(scenario: Scenario, github: GitHubSandbox) -> Scene:
    """Seed a local GitHub with a scenario: installation, repository, collaborators, latency and faults.

    The pull request is opened by the scenario's ``open`` event; a scenario without one gets it opened
    here, quietly (no webhook), as history from before the story starts.
    """
    installation = github.create_installation(scenario.repository["owner"])
    repo = github.create_repo(
        scenario.full_name,
        dict(scenario.base_files),
        installation_id=installation,
        default_branch=scenario.default_branch,
        private=bool(scenario.repository.get("private", False)),
    )
    for login, permission in scenario.collaborators.items():
        github.add_collaborator(repo, login, permission)
    scene = Scene(scenario, github, repo)
    if not any(e.kind == "open" for e in scenario.events):
        scene.open_pull_request(webhooks=False)
    github.faults.latency = scenario.github_latency
    for guard in scenario.data.get("github", {}).get("branch_rules", []):
        rules = BranchRules(
            source=guard.get("source", "protection"),
            require_pull_request=bool(guard.get("require_pull_request", False)),
            required_signatures=bool(guard.get("required_signatures", False)),
            required_status_checks=tuple(guard.get("required_status_checks", ())),
            allowed_pushers=tuple(guard["allowed_pushers"]) if "allowed_pushers" in guard else None,
        )
        head_repo = f"{scenario.fork['owner']}/{scenario.repository['name']}" if scenario.fork else repo
        github.protect_branch(head_repo, guard["branch"], rules)
    for fault in scenario.github_faults:
        headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else {}
        message = "Injected by the sandbox scenario"
        if fault["status"] == 403 and headers:
            message = (
                "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
            )
        github.faults.inject(
            fault["status"],
            fault.get("method", "*"),
            fault.get("path", ".*"),
            fault.get("times", 1),
            headers,
            {"message": message, "documentation_url": "https://docs.github.com/rest"},
        )
    return scene


# --- expectations ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Check:
    """One expectation and whether the outcome met it."""

    name: str
    ok: bool
    detail: str


def check(expect: Mapping[str, Any], outcome: Mapping[str, Any]) -> list[Check]:
    """Compare a scenario's ``expect`` section with a demo outcome (the ``--json`` document)."""
    checks: list[Check] = []
    files = outcome.get("files", {})
    for spec in expect.get("files", []):
        ref, path = spec.get("ref", "head"), spec["path"]
        content = files.get(ref, {}).get(path)
        name = f"{ref}:{path}"
        if "equals" in spec:
            ok = content == spec["equals"]
            detail = "absent as expected" if ok and content is None else ("matches" if ok else "differs")
            checks.append(Check(f"{name} content", ok, detail))
        if "contains" in spec:
            ok = content is not None and spec["contains"] in content
            checks.append(Check(f"{name} contains {spec['contains']!r}", ok, "found" if ok else "not found"))
        if "lacks" in spec:
            ok = content is not None and spec["lacks"] not in content
            checks.append(Check(f"{name} lacks {spec['lacks']!r}", ok, "absent" if ok else "still present"))
    counts = {
        "new_commits": len(outcome.get("new_commits", [])),
        "reviews": len(outcome.get("reviews", [])),
        "review_comments": sum(len(r.get("comments", [])) for r in outcome.get("reviews", [])),
        "suggestions": sum(
            "```suggestion" in c.get("body", "")
            for r in outcome.get("reviews", [])
            for c in r.get("comments", [])
        ),
        "bot_comments": sum(bool(c.get("by_app")) for c in outcome.get("comments", [])),
        "resolved_threads": sum(bool(t.get("resolved")) for t in outcome.get("threads", [])),
    }
    for key, actual in counts.items():
        if key in expect:
            checks.append(Check(key, actual == expect[key], f"expected {expect[key]}, got {actual}"))
    bodies = "\n".join(
        [c.get("body", "") for c in outcome.get("comments", [])]
        + [r.get("body", "") for r in outcome.get("reviews", [])]
        + [c.get("body", "") for r in outcome.get("reviews", []) for c in r.get("comments", [])]
    )
    for text in expect.get("comments_contain", []):
        checks.append(
            Check(f"a comment says {text!r}", text in bodies, "found" if text in bodies else "not found")
        )
    description = str((outcome.get("pull_request") or {}).get("body") or "")
    for text in expect.get("description_contains", []):
        found = text in description
        checks.append(Check(f"the description says {text!r}", found, "found" if found else "not found"))
    outputs = "\n".join(
        f"{(run.get('output') or {}).get('title') or ''}\n{(run.get('output') or {}).get('summary') or ''}"
        for run in outcome.get("check_runs", [])
    )
    head = str((outcome.get("pull_request") or {}).get("head_sha") or "")
    latest = {
        run.get("name"): run.get("conclusion")
        for run in outcome.get("check_runs", [])
        if run.get("head_sha") == head
    }
    for name, conclusion in (expect.get("head_checks") or {}).items():
        got = latest.get(name)
        checks.append(
            Check(f"check {name} on the head", got == conclusion, f"expected {conclusion}, got {got}")
        )
    for text in expect.get("check_runs_contain", []):
        found = text in outputs
        checks.append(Check(f"a check run says {text!r}", found, "found" if found else "not found"))
    seen = {r.get("content") for r in outcome.get("reactions", [])}
    for content in expect.get("reactions", []):
        checks.append(
            Check(f"reaction {content}", content in seen, "present" if content in seen else "missing")
        )
    return checks
