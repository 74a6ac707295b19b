"""The stories several test modules share: repositories, their files, scripted model answers, and the
helpers that read what Spark did to them. A test module imports them from here, never from another one."""

from __future__ import annotations

import base64
import html
import logging
import os
import re
import signal
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cmarkgfm
import redis
import structlog
import yaml
from cmarkgfm.cmark import Options
from github import Github
from rq import Queue
from rq.job import Job
from structlog.testing import capture_logs

from bot.adapters.github_port import PullInfo
from bot.cli.main import COMMANDS, build_parser
from bot.core.anchors import (
    read_suggestion,
)
from bot.core.diff import parse_diff
from bot.core.types import FileDiff
from sandbox import scenario as scenarios
from sandbox.scenario import SAFE_DUMPER, Event, Scene
from sandbox.stack import (
    Stack,
    collect_outcome,
    fire,
    stack_env,
    start_worker,
    wait_for_jobs,
    wait_for_worker,
)
from tests.intake.expectations import INTERACTIVE, REVIEW

# The calculator: `/spark fix` of src/calc.py's average, and what GitHub shows after.
REPO = "acme/calculator"

PATH = "src/calc.py"

BASE = '''"""Small arithmetic helpers."""


def add(a: float, b: float) -> float:
    """Return the sum of a and b."""
    return a + b
'''

HEAD = (
    BASE
    + '''

def average(values: list[float]) -> float:
    """Return the arithmetic mean of values."""
    return sum(values) / (len(values) - 1)
'''
)

BUG = "    return sum(values) / (len(values) - 1)\n"

FIXED = "    return sum(values) / len(values)\n"

FIX_ANSWER = f"{PATH}\n<<<<<<< SEARCH\n{BUG}=======\n{FIXED}>>>>>>> REPLACE\n"


def answer(search: str, replace: str) -> str:
    """Return a SEARCH/REPLACE answer for ``src/calc.py``."""
    return f"{PATH}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def fix_story(
    events: list[dict[str, Any]],
    replies: list[dict[str, Any]],
    *,
    collaborators: dict[str, str] | None = None,
    speed: Mapping[str, float] | None = None,
    fork: dict[str, Any] | None = None,
    head: str = HEAD,
    config: str | None = None,
) -> str:
    """Return scenario YAML: Alice's calculator PR (opened quietly) and the given events and replies."""
    files = {PATH: BASE}
    if config is not None:
        files[".github/spark.yml"] = config
    pull_request: dict[str, Any] = {
        "title": "Add an average helper",
        "author": "alice",
        "head_branch": "average",
        "files": {PATH: head},
    }
    if fork:
        pull_request["fork"] = fork
    document: dict[str, Any] = {
        "name": "fix-story",
        "repository": {"owner": "acme", "name": "calculator", "files": files},
        "pull_request": pull_request,
        "collaborators": collaborators or {"alice": "write"},
        "events": events,
        "model": {"speed": dict(speed or {"ttft_ms": 20, "tokens_per_second": 20000}), "replies": replies},
    }
    return yaml.dump(document, Dumper=SAFE_DUMPER, sort_keys=False)


def comment(body: str, by: str = "alice") -> dict[str, Any]:
    """Return a PR conversation comment event."""
    return {"comment": {"by": by, "body": body}}


FIX = [comment("/spark fix average divides by the wrong count")]

FIX_SCRIPT = {"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER}


def run_all(stack: Stack) -> dict[str, Any]:
    """Fire every event of the stack's scenario in order and return the outcome; no job may fail."""
    for event in stack.scenario.events:
        step = fire(stack, event)
        assert [j for j in step.jobs if j["status"] != "finished"] == []
    return collect_outcome(stack)


def bot_comments(outcome: dict[str, Any]) -> list[str]:
    """Return the bodies of the App's PR conversation comments."""
    return [c["body"] for c in outcome["comments"] if c["by_app"]]


def user_comment_ids(stack: Stack) -> list[int]:
    """Return the ids of the users' (not the App's) conversation comments, oldest first."""
    gh = stack.github
    return [c["id"] for c in gh.issue_comments(REPO, 1) if c["user"]["login"] != gh.bot_login]


def reactions_by_app(stack: Stack, comment_id: int) -> list[str]:
    """Return the App's reactions on a comment, oldest first."""
    gh = stack.github
    return [content for content, login in gh.reactions(comment_id) if login == gh.bot_login]


def head_file(stack: Stack) -> str:
    """Return ``src/calc.py`` at the PR's head."""
    pull = stack.github.pull(REPO, 1)
    text = stack.github.file_at(pull["head"]["repo"]["full_name"], pull["head"]["sha"], PATH)
    assert text is not None
    return text


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    """Poll ``condition`` until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for a condition"
        time.sleep(0.005)


# A slow stream (~2,000 tokens at 400 tok/s: about five seconds) that a cancel must cut short.
SLOW_FIX = {"ttft_ms": 50, "tokens_per_second": 400, "chunk_tokens": 4}

LONG_FIX_ANSWER = answer(
    BUG, FIXED + "".join(f"    # padding line {n:04d} to make the stream long\n" for n in range(180))
)


def streaming(stack: Stack, index: int) -> Callable[[], bool]:
    def check() -> bool:
        assert stack.model is not None
        requests = stack.model.requests
        return len(requests) >= index and requests[index - 1].chunks_sent > 2

    return check


# The loader: reviews of config.py's findings, on a stack shared by a module.
REVIEW_PLACEHOLDER = """
name: review-e2e-placeholder
repository: {owner: placeholder, name: none, files: {README.md: "hi\\n"}}
pull_request: {title: t, author: bob, head_branch: b, files: {README.md: "hello\\n"}}
events: [{wait: 0}]
"""

# Where each stack's model log stood when the current test seeded its scenario.
_first_request: dict[int, int] = {}


def review_use(stack: Stack, source: str | dict[str, Any]) -> Scene:
    """Seed the stack's local GitHub with a scenario (a bundled name, YAML text or a dict) and its replies."""
    if isinstance(source, dict):
        scenario = scenarios.parse(yaml.dump(source, Dumper=SAFE_DUMPER, sort_keys=False), source="<test>")
    elif "\n" in source:
        scenario = scenarios.parse(textwrap.dedent(source), source="<test>")
    else:
        scenario = scenarios.load(source)
    stack.scenario = scenario
    stack._scene = scenarios.apply(scenario, stack.github)
    assert stack.model is not None
    stack.model.add_scripts(scenario.scripts)
    _first_request[id(stack)] = len(stack.model.requests)
    return stack._scene


def review_act(stack: Stack, kind: str, **data: Any) -> dict[str, Any]:
    """Make one event happen and wait until every job it caused has ended; return what settled."""
    stack.scene.act(Event(kind, data))
    settled = wait_for_jobs(stack, timeout=60)
    failed = [j for j in settled["jobs"] if j["status"] != "finished"]
    assert not failed, failed
    return settled


def review_results(stack: Stack, settled: dict[str, Any]) -> dict[str, list[Any]]:
    """Return each job function's return values, in the order the jobs were queued."""
    out: dict[str, list[Any]] = {}
    for info in settled["jobs"]:
        job = Job.fetch(info["id"], connection=stack.redis)
        out.setdefault(info["func"].rsplit(".", 1)[-1], []).append(job.return_value())
    return out


def reviews(stack: Stack) -> list[dict[str, Any]]:
    """Return Spark's reviews of the pull request with their inline comments (a user's reply is one too)."""
    found = stack.github.reviews(stack.scene.repo, stack.scene.pr_number)
    return [r for r in found if r["user"]["login"] == stack.github.bot_login]


def checks(stack: Stack) -> list[dict[str, Any]]:
    """Return the repository's check runs, oldest first."""
    return stack.github.check_runs(stack.scene.repo)


def head(stack: Stack) -> str:
    """Return the pull request's head SHA."""
    return stack.github.head_sha(stack.scene.repo, stack.scene.pr_number)


def pr_key(stack: Stack) -> str:
    """Return the Redis key part naming the scene's pull request (as ``PullRequestRef.key`` does)."""
    installation = stack.github.state.repo(stack.scene.repo).installation_id
    return f"{installation}:{stack.scene.repo}#{stack.scene.pr_number}"


def model_requests(stack: Stack, path: str) -> list[Any]:
    """Return the local model's requests about ``path`` since the current test seeded its scenario."""
    assert stack.model is not None
    since = stack.model.requests[_first_request.get(id(stack), 0) :]
    return [r for r in since if any(path in str(m.get("content")) for m in r.messages)]


def review_story(
    repo: str,
    base: dict[str, str],
    head_files: dict[str, str],
    replies: list[dict[str, Any]],
    *,
    events: list[dict[str, Any]] | None = None,
    fork: dict[str, Any] | None = None,
    draft: bool = False,
) -> dict[str, Any]:
    """Return a scenario document: a repository, a PR changing some files, scripted model replies."""
    owner, name = repo.split("/")
    pr: dict[str, Any] = {
        "title": "Change things",
        "author": "bob",
        "head_branch": "feature",
        "files": head_files,
    }
    if fork:
        pr["fork"] = fork
    if draft:
        pr["draft"] = True
    return {
        "name": name,
        "repository": {"owner": owner, "name": name, "files": base},
        "pull_request": pr,
        "collaborators": {"bob": "write", "carol": "write"},
        "events": events if events is not None else [{"open": {}}],
        "model": {"replies": replies},
    }


def review_finding(severity: str, title: str, search: str, replace: str | None = None) -> str:
    """Return one ``### FINDING`` section of a review answer (a SEARCH/REPLACE block when ``replace``)."""
    text = f"### FINDING: {severity}: {title}\nWhy it matters.\n"
    if replace is None:
        return text + f"```\n{search}\n```\n"
    return text + f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


LOADER = '''"""Configuration loading."""

import json

DEFAULTS = {"debug": False}


def load(path):
    """Return the settings in the JSON file at path, over the defaults."""
    handle = open(path)
    try:
        data = json.load(handle)
    except:
        data = {}
    return {**DEFAULTS, **data}
'''

LOADER_BASE = LOADER.split("\n\n\ndef load")[0] + "\n"

BARE_EXCEPT = review_finding(
    "high", "bare except hides real errors", "    except:", "    except json.JSONDecodeError:"
)

UNCLOSED = review_finding(
    "medium",
    "file handle is never closed",
    "    return {**DEFAULTS, **data}",
    "    handle.close()\n    return {**DEFAULTS, **data}",
)

LOADER_FIXED = LOADER.replace("    except:", "    except json.JSONDecodeError:").replace(
    "    return {**DEFAULTS", "    handle.close()\n    return {**DEFAULTS"
)


def apply_as_github(text: str, comments: list[dict[str, Any]]) -> str:
    """Apply every suggestion the way GitHub's batch "Commit suggestions" does: replace exactly its lines."""
    lines = text.splitlines(keepends=True)
    for comment in sorted(comments, key=lambda c: c["line"], reverse=True):
        suggested = read_suggestion(comment["body"])
        assert suggested is not None, comment["body"]
        start = (comment.get("start_line") or comment["line"]) - 1
        lines[start : comment["line"]] = [row + "\n" for row in suggested]
    return "".join(lines)


def quiet(repo: str, replies: list[dict[str, Any]], **files: str) -> dict[str, Any]:
    """Return a story whose PR already exists (opened before the story, no review yet)."""
    base = {"app/config.py": LOADER_BASE, "app/other.py": "X = 1\n"}
    return review_story(repo, base, {"app/config.py": LOADER, **files}, replies, events=[{"wait": 0}])


# A pull request description and `/spark describe`'s scripted summaries.
AUTHOR_BODY = "Adds `average(values)` for the stats page.\r\n\r\nCloses #12 — *thanks*  \n"

SUMMARY_1 = (
    "Adds an `average` helper.\n\n**Changes**\n- `src/calc.py`: new `average`.\n\n"
    "**Worth a reviewer's look**\n- The divisor."
)


def described(events: list[dict[str, Any]], replies: list[dict[str, Any]], **options: Any) -> str:
    """Return the story's YAML with a pull request description the author wrote."""
    document = yaml.safe_load(fix_story(events, replies, **options))
    document["pull_request"]["body"] = AUTHOR_BODY
    return yaml.dump(document, Dumper=SAFE_DUMPER, sort_keys=False)


def describe_script(name: str, reply: str) -> dict[str, Any]:
    return {"name": name, "command": "describe", "reply": reply}


# Content GitHub serves its own way (forks, private heads, check-run buttons).
def content_story(
    repo: str,
    base: dict[str, Any],
    head_files: dict[str, Any],
    replies: list[dict[str, Any]] | None = None,
    fork: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Return a scenario document: a repository, a PR changing some files, scripted model replies.

    The module's tests share one local model, whose scripts match by path: each test names its own files.
    """
    owner, name = repo.split("/")
    pr: dict[str, Any] = {"title": "Change", "author": "bob", "head_branch": "feature", "files": head_files}
    if fork:
        pr["fork"] = fork
    return {
        "name": name,
        "repository": {"owner": owner, "name": name, "files": base},
        "pull_request": pr,
        "collaborators": {"bob": "write"},
        "events": [{"open": {}}],  # opened by the test (act "open"), not quietly by the seeding
        "model": {"replies": replies or []},
    }


def replies_to_spark(stack: Stack) -> list[str]:
    """Return the bodies of Spark's conversation comments on the scene's pull request."""
    comments = stack.github.issue_comments(stack.scene.repo, stack.scene.pr_number)
    return [c["body"] for c in comments if c["user"]["login"] == stack.github.bot_login]


def content_fix_reply(path: str, search: str, replace: str) -> dict[str, Any]:
    """Return a scripted answer to `/spark fix` about ``path``."""
    return {
        "path": path,
        "command": "fix",
        "reply": f"{path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n",
    }


def quiet_review(path: str) -> dict[str, Any]:
    """Return a review answer with no findings for every review request about ``path``."""
    return {"path": path, "reply": "NO_FINDINGS", "repeat": True}


def head_commits(stack: Stack) -> list[dict[str, Any]]:
    """Return the PR head branch's history, newest first."""
    return stack.github.commits(stack.scene.head_repo, stack.scenario.pull_request["head_branch"])


def check_summary(stack: Stack) -> str:
    """Return the summary of the newest "Spark" check run of the scene's repository."""
    runs = [r for r in stack.github.check_runs(stack.scene.repo) if r["name"] == "Spark"]
    return str(runs[-1]["output"]["summary"])


# A worker killed mid-fix, and the fix that must land exactly once.
# The fix script answers every request: a re-run after a kill asks the model again.
KILL_REPLIES = [{"name": "fix", "path": PATH, "command": "fix", "reply": FIX_ANSWER, "repeat": True}]

NO_REVIEW = "review:\n  auto: false\n"


def kill_worker(stack: Stack, killed: threading.Event) -> None:
    """SIGKILL the worker process (no cleanup, no requeue of its own) and note that it happened."""
    assert stack.worker is not None
    os.kill(stack.worker.pid, signal.SIGKILL)
    killed.set()


def recover(stack: Stack, killed: threading.Event) -> None:
    """Wait for the kill, reap the dead worker, start a new one and let it finish the recovered job."""
    assert killed.wait(30), "the kill point was never reached"
    assert stack.worker is not None
    stack.worker.wait(10)  # reaped: a zombie's pid still looks alive to the orphan check
    start_worker(stack, stack_env(stack.settings, stack.github, stack.model, stack.data_dir))
    wait_for_worker(stack)
    wait_for_jobs(stack, timeout=60)


# Real diffs (tests/fixtures/diffs) and a file's text at their head.
DIFFS = Path(__file__).resolve().parent / "fixtures" / "diffs"


def load(fixture: str) -> FileDiff:
    """Return the one file of a fixture diff."""
    return parse_diff((DIFFS / fixture).read_bytes()).files[0]


def head_text(file_diff: FileDiff, extra: int = 4, eol: str = "\n") -> str:
    """Return a head file consistent with ``file_diff``: hunk lines where it shows them, filler elsewhere."""
    known = {dl.new_no: dl for h in file_diff.hunks for dl in h.lines if dl.new_no is not None}
    last_line = next((n for n, dl in known.items() if dl.no_newline), None)
    total = last_line or max(known, default=0) + extra
    rows = []
    for number in range(1, total + 1):
        text = known[number].text if number in known else f"filler {number}"
        rows.append(text + ("" if number == last_line else eol))
    return "".join(rows)


# A same-repository pull request as the policy sees it.
SAME_REPO = PullInfo(
    number=1,
    title="t",
    body="",
    state="open",
    draft=False,
    author="alice",
    head_sha="a" * 40,
    head_ref="feature",
    head_repo="acme/app",
    base_sha="b" * 40,
    base_ref="main",
    base_repo="acme/app",
    maintainer_can_modify=False,
    default_branch="main",
)


# What GitHub's renderer makes live in posted text (mentions, references, tags).
# Tags Markdown itself produces; anything else in the HTML came from the text as raw HTML.
MARKDOWN_TAGS = frozenset(
    [
        "p",
        "br",
        "code",
        "pre",
        "em",
        "strong",
        "del",
        "ul",
        "ol",
        "li",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "blockquote",
        "hr",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "input",
        "sub",
    ]
)

# GitHub's mention: @login or @org/team, not after a word character or a backtick.
MENTION = re.compile(r"(?<![\w`])@[A-Za-z0-9](?:[A-Za-z0-9-]*)(?:/[\w.-]+)?")

ISSUE_REF = re.compile(r"(?<![\w&])#\d")


def render(markdown: str) -> str:
    """Return GitHub's HTML for ``markdown`` with raw HTML let through, so any that survives shows."""
    extensions = ["autolink", "table", "strikethrough", "tasklist"]
    return str(cmarkgfm.markdown_to_html_with_extensions(markdown, Options.CMARK_OPT_UNSAFE, extensions))


def live_problems(markdown: str) -> list[str]:
    """Return what would be live on GitHub in ``markdown``: mentions, images, HTML, links, markers."""
    out = render(markdown)
    problems = [f"tag <{t}>" for t in re.findall(r"<\s*/?\s*([A-Za-z][\w-]*)", out) if t not in MARKDOWN_TAGS]
    if "<!--" in out:
        problems.append("an HTML comment")
    # Text outside code: mentions and issue references link (and notify) there.
    outside = html.unescape(re.sub(r"<code>.*?</code>|<[^>]+>", " ", out, flags=re.DOTALL))
    problems += [f"mention {m}" for m in MENTION.findall(outside)]
    problems += [f"reference {m}" for m in ISSUE_REF.findall(outside)]
    if re.search(r"<!--\s*spark:", markdown):
        problems.append("a raw marker")
    return problems


# The deployment files and the spark command they run.
ROOT = Path(__file__).resolve().parents[1]

DEPLOY = ROOT / "deploy"


def spark_command(argv: list[str]) -> str:
    """Parse a deployment's command line with Spark's own parser; return the subcommand."""
    assert argv[0] == "spark", argv
    # A Procfile's ${PORT:-3000} is expanded by the platform's shell.
    args = build_parser().parse_args([arg.replace("${PORT:-3000}", "3000") for arg in argv[1:]])
    assert args.command in COMMANDS
    return str(args.command)


# A commit through the local GitHub's createCommitOnBranch.
COMMIT_OUTPUT = "commit { oid signature { isValid } } ref { name target { oid } }"


def commit_on_branch(
    client: Github, repo: str, branch: str, head: str, files: dict[str, str]
) -> dict[str, Any]:
    """Send createCommitOnBranch the way a bot does (PyGithub's named mutation); return its payload."""
    additions = [{"path": p, "contents": base64.b64encode(c.encode()).decode()} for p, c in files.items()]
    _, data = client.requester.graphql_named_mutation(
        "createCommitOnBranch",
        {
            "branch": {"repositoryNameWithOwner": repo, "branchName": branch},
            "expectedHeadOid": head,
            "message": {"headline": "Spark fix", "body": "Requested-by: a comment"},
            "fileChanges": {"additions": additions, "deletions": []},
        },
        COMMIT_OUTPUT,
    )
    return data


# GitHub's OpenAPI description: a response's schema and its required fields.
def missing_required(data: Any, schema: dict[str, Any], spec: dict[str, Any], path: str = "") -> list[str]:
    """Required properties (recursively) that ``data`` lacks under an OpenAPI schema."""
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    if data is None:
        return []
    missing: list[str] = []
    for part in schema.get("allOf", []):
        missing += missing_required(data, part, spec, path)
    if isinstance(data, dict):
        missing += [f"{path}.{key}" for key in schema.get("required", []) if key not in data]
        for key, sub in schema.get("properties", {}).items():
            if key in data:
                missing += missing_required(data[key], sub, spec, f"{path}.{key}")
    if isinstance(data, list) and "items" in schema:
        for index, item in enumerate(data[:3]):
            missing += missing_required(item, schema["items"], spec, f"{path}[{index}]")
    return missing


def response_schema(
    spec: dict[str, Any], path: str, method: str = "get", status: str = "200"
) -> dict[str, Any]:
    """The JSON schema of one operation's response."""
    response = spec["paths"][path][method]["responses"][status]
    while "$ref" in response:
        response = spec["components"]["responses"][response["$ref"].rsplit("/", 1)[-1]]
    schema: dict[str, Any] = response["content"]["application/json"]["schema"]
    return schema


# The intake's queues: what a delivery queued.
def queued_jobs(conn: redis.Redis) -> list[tuple[str, Job]]:
    """Return every queued job as (queue name, job)."""
    jobs = []
    for name in (INTERACTIVE, REVIEW):
        queue = Queue(name, connection=conn)
        jobs += [(name, job) for job in queue.get_jobs()]
    return jobs


@contextmanager
def captured_logs() -> Iterator[list[dict[str, Any]]]:
    """structlog's ``capture_logs`` at every level: a receiver a module started in this process (the sandbox
    stack's, at WARNING) leaves its level filter configured, which would drop the info events captured."""
    wrapper = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(wrapper_class=wrapper)
