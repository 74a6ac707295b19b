"""Replay real commits of public Python projects through the whole stack: ``/spark fix``, review suggestions.

Each picked commit changes one Python file. Its hunks become the model's answer in six variants (exact
hunks; minimal unique context; prose and fences around the blocks in reverse order, the file named in three
layouts; trailing whitespace dropped and indentation drifted; one wrong block then a retry that corrects it;
two wrong blocks then a retry that corrects only one), and each variant is sent through the local GitHub, the
local model and a real ``spark worker`` process, with the file both inside and outside the pull request's
diff. The committed file is compared byte for byte with the real commit. Then each commit's hunks come back
as review findings on a pull request that adds the lines they change: the suggestions must sit on lines of
the diff and, committed as GitHub commits a batch, reproduce the real file.

First, without the stack, each commit's message whose words mention paths, URLs or names becomes a
``/spark fix`` request naming a file the commit changed (``path: subject and first paragraph``), judged by the
core's target choice against the commit's diff and the repository's files at it, as the fix flow does before
any model call: the requests refused there are counted by reason (the figure: refusals of requests that name
an existing file Spark may edit), with the names the reply would say were not taken for files.
``--requests-only`` stops there.

The material is read at run time from git directories (a clone or a bare mirror) named by ``--repo`` or by
``SPARK_BENCH_REPOS`` (paths separated by ``os.pathsep``); nothing fetched is kept in this repository. Without
material the benchmark says so and exits 0. docs/benchmarks.md says how to get it.

    SPARK_BENCH_REPOS=/src/click:/src/requests python -m bench commit_replay
    python -m bench.commit_replay --repo /src/click --per-repo 10
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from bot.core.diff import parse_diff
from bot.core.policy import check_target_path
from bot.core.targets import choose_targets
from bot.redis_server import PrivateRedis
from bot.settings import Settings
from sandbox import scenario as scenarios
from sandbox.cerebras import Script
from sandbox.stack import Stack, start_stack, wait_for_jobs

ENV = "SPARK_BENCH_REPOS"
# What a commit may be to be replayed: one modified Python file, small enough to read in a review.
MAX_FILE_BYTES = 40_000
MAX_CHANGED_LINES = 40
MAX_HUNKS = 5
LOG_DEPTH = 1500
OWNER = "replay"
USER = "alice"
FIX_CONFIG = "review:\n  auto: false\nfix:\n  escalate: false\n"
REVIEW_CONFIG = "review:\n  max_inline_comments: 50\n"
# Where the pull request differs from its base when the target file is in the diff: the PR drops this line.
DIFF_LINE = "# replay: a line the pull request removes\n"
VARIANTS = (
    ("exact", "exact hunks"),
    ("minimal", "minimal unique context"),
    ("prose", "prose + fences, reversed"),
    ("drift", "whitespace dropped, indent drift"),
    ("retry", "one wrong block, retry fixes it"),
    ("partial", "two wrong blocks, retry fixes one"),
)
SETUPS = (("in", "in diff"), ("out", "outside diff"))
# Each wrong commit or suggestion, named for the report (printed after the stack stops).
NOTES: list[str] = []


@dataclass(frozen=True, slots=True)
class Case:
    """One real commit that modified one Python file: the file before and after it."""

    project: str
    sha: str
    path: str
    before: str
    after: str

    @property
    def key(self) -> str:
        """Return a short unique name for the case."""
        return f"{self.project}-{self.sha[:10]}"


@dataclass(frozen=True, slots=True)
class Block:
    """One SEARCH/REPLACE pair, as lists of lines with their endings."""

    search: tuple[str, ...]
    replace: tuple[str, ...]


# ---- material ---------------------------------------------------------------------------------------------


def git(git_dir: Path, *args: str) -> bytes:
    """Run one git command against ``git_dir`` and return its output."""
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True, timeout=120
    ).stdout


def git_dir_of(path: Path) -> Path:
    """Return the git directory of a clone (its .git) or of a bare repository/mirror (itself)."""
    return path / ".git" if (path / ".git").exists() else path


def load_cases(paths: Sequence[Path], per_repo: int) -> list[Case]:
    """Return up to ``per_repo`` replayable commits from each repository, newest first."""
    cases: list[Case] = []
    for path in paths:
        gdir = git_dir_of(path)
        project = path.name if path.name not in ("repo", ".git") else path.parent.name.split("+")[-1]
        shas = git(gdir, "log", "--no-merges", f"-n{LOG_DEPTH}", "--format=%H", "--", "*.py").decode().split()
        found = 0
        for sha in shas:
            case = _case(gdir, project, sha)
            if case is not None:
                cases.append(case)
                found += 1
                if found == per_repo:
                    break
    return cases


def _case(gdir: Path, project: str, sha: str) -> Case | None:
    status = (
        git(gdir, "diff-tree", "-r", "--no-commit-id", "--name-status", f"{sha}^", sha).decode().split("\n")
    )
    changes = [line.split("\t") for line in status if line]
    if len(changes) != 1 or changes[0][0] != "M" or not changes[0][1].endswith(".py"):
        return None
    path = changes[0][1]
    try:
        before = git(gdir, "show", f"{sha}^:{path}").decode("utf-8")
        after = git(gdir, "show", f"{sha}:{path}").decode("utf-8")
    except (subprocess.CalledProcessError, UnicodeDecodeError):
        return None
    if len(before.encode()) > MAX_FILE_BYTES or "\r" in before + after or before == after:
        return None
    if not before.endswith("\n") or not after.endswith("\n") or DIFF_LINE in before:
        return None
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    changed = sum(max(i2 - i1, j2 - j1) for _, i1, i2, j1, j2 in _changes(old, new))
    if not 0 < changed <= MAX_CHANGED_LINES or len(hunk_blocks(old, new)) > MAX_HUNKS:
        return None
    return Case(project, sha, path, before, after)


# ---- answers from hunks -----------------------------------------------------------------------------------


def _changes(old: Sequence[str], new: Sequence[str]) -> list[tuple[str, int, int, int, int]]:
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return [op for op in matcher.get_opcodes() if op[0] != "equal"]


def _occurrences(lines: Sequence[str], window: Sequence[str]) -> int:
    """Count places ``window`` occurs in ``lines``, comparing stripped lines (as a tolerant rung would)."""
    want = [w.strip() for w in window]
    stripped = [line.strip() for line in lines]
    n = len(want)
    return sum(stripped[i : i + n] == want for i in range(len(stripped) - n + 1))


def _blocks(old: Sequence[str], new: Sequence[str], context: int) -> list[Block] | None:
    """Return blocks for every change with ``context`` lines around it, widened until each is unique.

    Blocks that touch are merged. ``None`` when some block cannot be made unique (SEARCH/REPLACE cannot
    express the change).
    """
    equal: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, _ in matcher.get_opcodes():
        if tag == "equal":
            equal.update({i: j1 + i - i1 for i in range(i1, i2)})
    spans: list[list[int]] = []
    for _, i1, i2, j1, j2 in _changes(old, new):
        top, bottom, j_top, j_bottom = i1, i2, j1, j2
        for _ in range(context):
            if top - 1 in equal:
                top, j_top = top - 1, j_top - 1
            if bottom in equal:
                bottom, j_bottom = bottom + 1, j_bottom + 1
        if top == bottom and top - 1 not in equal and bottom not in equal:
            return None
        if top == bottom:  # an insertion needs one line to anchor it
            if top - 1 in equal:
                top, j_top = top - 1, j_top - 1
            else:
                bottom, j_bottom = bottom + 1, j_bottom + 1
        spans.append([top, bottom, j_top, j_bottom])
    merged = _merge(spans)
    while True:
        widened = False
        for span in merged:
            top, bottom, j_top, j_bottom = span
            if _occurrences(old, old[top:bottom]) == 1:
                continue
            if top - 1 in equal:
                span[0], span[2], widened = top - 1, j_top - 1, True
            elif bottom in equal:
                span[1], span[3], widened = bottom + 1, j_bottom + 1, True
            else:
                return None
        if not widened:
            break
        merged = _merge(merged)
    return [Block(tuple(old[a:b]), tuple(new[c:d])) for a, b, c, d in merged]


def _merge(spans: list[list[int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for span in sorted(spans):
        if out and span[0] <= out[-1][1]:
            last = out[-1]
            out[-1] = [last[0], max(last[1], span[1]), last[2], max(last[3], span[3])]
        else:
            out.append(list(span))
    return out


def hunk_blocks(old: Sequence[str], new: Sequence[str]) -> list[Block]:
    """Return the commit's hunks (3 lines of context) as blocks, widened where a hunk is not unique."""
    return _blocks(old, new, 3) or []


def render(path: str, blocks: Sequence[Block], *, fenced: bool = False) -> str:
    """Return an answer of SEARCH/REPLACE blocks for ``path`` (in fences after prose when ``fenced``)."""
    out = []
    for number, block in enumerate(blocks, start=1):
        body = (
            "<<<<<<< SEARCH\n"
            + "".join(block.search)
            + "=======\n"
            + "".join(block.replace)
            + ">>>>>>> REPLACE\n"
        )
        if fenced:
            # The layouts models use to name the file: a path line above the fence, the fence's info
            # string, a comment line inside the fence.
            fence = (
                f"{path}\n```python\n{body}```",
                f"```python:{path}\n{body}```",
                f"```python\n# {path}\n{body}```",
            )[(number - 1) % 3]
            out.append(f"Change {number} of {len(blocks)}, in `{path}`:\n\n{fence}\n")
        else:
            out.append(f"{path}\n{body}")
    text = "\n".join(out)
    return f"Here is the change.\n\n{text}\nThat is all." if fenced else text


def drifted(block: Block) -> Block:
    """Return the block as a careless model writes it: trailing whitespace gone, indentation shifted left."""
    kept = set(block.search)
    lines = [line for line in block.search if line.strip()]
    shift = min((len(line) - len(line.lstrip(" ")) for line in lines), default=0)

    def fix(line: str, strip: bool) -> str:
        text = line.rstrip() if strip else line.rstrip("\n")
        cut = min(shift, len(text) - len(text.lstrip(" ")))
        return text[cut:] + "\n"

    return Block(tuple(fix(s, True) for s in block.search), tuple(fix(r, r in kept) for r in block.replace))


def misquoted(block: Block) -> Block:
    """Return the block with its SEARCH misquoted (a line the file does not have)."""
    search = list(block.search)
    index = next((i for i, line in enumerate(search) if line.strip()), 0)
    line = search[index]
    indent = line[: len(line) - len(line.lstrip())]
    search[index] = f"{indent}misquoted_{line.lstrip()}"
    return Block(tuple(search), block.replace)


def answers(case: Case, variant: str) -> tuple[list[str], bool] | None:
    """Return the model's answers (first, then the retry) for a variant and whether a commit is expected.

    ``None`` when the variant does not apply to the case (one block cannot make "two wrong blocks") or the
    change cannot be said as unique SEARCH/REPLACE blocks.
    """
    old, new = case.before.splitlines(keepends=True), case.after.splitlines(keepends=True)
    blocks = _blocks(old, new, 3)
    if blocks is None:
        return None
    path = case.path
    if variant == "exact":
        return [render(path, blocks)], True
    if variant == "minimal":
        minimal = _blocks(old, new, 0)
        return ([render(path, minimal)], True) if minimal is not None else None
    if variant == "prose":
        return [render(path, blocks[::-1], fenced=True)], True
    if variant == "drift":
        return [render(path, [drifted(b) for b in blocks])], True
    if variant == "retry":
        wrong = len(blocks) // 2
        first = [misquoted(b) if i == wrong else b for i, b in enumerate(blocks)]
        return [render(path, first), render(path, [blocks[wrong]])], True
    if variant == "partial":
        if len(blocks) < 2:
            return None
        first = [misquoted(b) if i < 2 else b for i, b in enumerate(blocks)]
        return [render(path, first), render(path, [blocks[0]])], False
    raise ValueError(variant)


# ---- the stack --------------------------------------------------------------------------------------------


def scenario_yaml() -> str:
    """Return a minimal scenario (the stack needs one); the benchmark's repositories are made per case."""
    document = {
        "name": "commit-replay",
        "repository": {"owner": OWNER, "name": "seed", "files": {"README.md": "seed\n"}},
        "pull_request": {"title": "Seed", "author": USER, "head_branch": "seed", "files": {"a.txt": "a\n"}},
        "collaborators": {USER: "write"},
        "events": [{"wait": 0}],
        "model": {"speed": {"ttft_ms": 1, "tokens_per_second": 200000}, "replies": []},
    }
    return yaml.safe_dump(document, sort_keys=False)


@contextlib.contextmanager
def quiet(stack: Stack) -> Iterator[None]:
    """Make changes on the local GitHub without webhooks (history, not events)."""
    stack.github.faults.webhooks_enabled = False
    try:
        yield
    finally:
        stack.github.faults.webhooks_enabled = True


def head_bytes(stack: Stack, repo: str, number: int, path: str) -> tuple[str, bytes | None]:
    """Return the pull request's head SHA and the file's bytes there."""
    state = stack.github.state
    sha = stack.github.head_sha(repo, number)
    blob = state.git.files_at(sha).get(path)
    return sha, None if blob is None else state.git.blobs[blob]


@dataclass
class Tally:
    """Outcomes of one variant in one setup."""

    cases: int = 0
    exact: int = 0
    refused: int = 0
    wrong: int = 0
    skipped: int = 0
    refused_as_expected: int = 0


def replay_fixes(stack: Stack, cases: Sequence[Case], installation: int) -> dict[tuple[str, str], Tally]:
    """Run every variant of every case in both setups; return the tallies and print each wrong commit."""
    gh, model = stack.github, stack.model
    assert model is not None
    tallies = {(v, s): Tally() for v, _ in VARIANTS for s, _ in SETUPS}
    for case in cases:
        for setup, _ in SETUPS:
            repo = f"{OWNER}/{case.key}-{setup}"
            base = case.before + DIFF_LINE if setup == "in" else case.before
            with quiet(stack):
                gh.create_repo(
                    repo, {case.path: base, ".github/spark.yml": FIX_CONFIG}, installation_id=installation
                )
                gh.add_collaborator(repo, USER, "write")
                head = {case.path: case.before} if setup == "in" else {"NOTES.md": "notes\n"}
                number = gh.open_pull_request(repo, "replay", head, title=f"Replay {case.key}", author=USER)
            for variant, _ in VARIANTS:
                tally = tallies[(variant, setup)]
                made = answers(case, variant)
                if made is None:
                    tally.skipped += 1
                    continue
                replies, expect_commit = made
                tally.cases += 1
                with quiet(stack):
                    if head_bytes(stack, repo, number, case.path)[1] != case.before.encode():
                        gh.push(repo, "replay", {case.path: case.before}, message="Reset", author=USER)
                start_sha, _ = head_bytes(stack, repo, number, case.path)
                instruction = f"{case.path}: replay {case.key} {variant} {setup}"
                model.clear_scripts()
                model.add_scripts(
                    Script(reply, name=f"{variant}-{n}", path=case.path, command=f"fix {instruction}")
                    for n, reply in enumerate(replies)
                )
                gh.comment(repo, number, f"/spark fix {instruction}", author=USER)
                settled = wait_for_jobs(stack, timeout=120)
                ran = [j for j in settled["jobs"] if j["func"] == "workers.jobs.command"]
                if len(ran) != 1 or ran[0]["status"] != "finished":
                    raise RuntimeError(f"{case.key} {variant} {setup}: the fix job did not run: {ran}")
                end_sha, data = head_bytes(stack, repo, number, case.path)
                if end_sha == start_sha:
                    tally.refused += 1
                    tally.refused_as_expected += not expect_commit
                elif data == case.after.encode() and _only_changed(
                    stack, repo, start_sha, end_sha, case.path
                ):
                    tally.exact += 1
                else:
                    tally.wrong += 1
                    NOTES.append(f"  wrong commit: {case.key} {case.path} variant={variant} setup={setup}")
    return tallies


def _only_changed(stack: Stack, repo: str, start: str, end: str, path: str) -> bool:
    git = stack.github.state.git
    before, after = git.files_at(start), git.files_at(end)
    return {p for p in set(before) | set(after) if before.get(p) != after.get(p)} == {path}


# ---- review suggestions -----------------------------------------------------------------------------------


@dataclass
class ReviewTally:
    """What the review of the replayed hunks posted and whether it reproduces the commits."""

    cases: int = 0
    findings: int = 0
    suggestions: int = 0
    on_valid_lines: int = 0
    # Suggestions that, committed alone, change the file only as the commit does.
    faithful: int = 0
    reproduced: int = 0
    wrong: int = 0


SUGGESTION = re.compile(r"^(`{3,}|~{3,})suggestion[^\n]*\n(.*?)^\1\s*$", re.S | re.M)


def review_base(old: Sequence[str], new: Sequence[str]) -> str:
    """Return a base without the lines each change touches (and a neighbour each side): the PR adds them."""
    drop: set[int] = set()
    for _, i1, i2, _, _ in _changes(old, new):
        drop.update(range(max(0, i1 - 1), min(len(old), i2 + 1)))
    return "".join(line for i, line in enumerate(old) if i not in drop)


def right_lines(base: str, head: str) -> set[int]:
    """Return the head's line numbers GitHub lets a review comment on (hunk lines, 3 lines of context)."""
    old, new = base.splitlines(keepends=True), head.splitlines(keepends=True)
    lines: set[int] = set()
    for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(3):
        lines.update(range(group[0][3] + 1, group[-1][4] + 1))
    return lines


def replay_reviews(stack: Stack, cases: Sequence[Case], installation: int) -> ReviewTally:
    """Post each case's hunks as review findings; check the suggestions' lines and what they commit."""
    gh, model = stack.github, stack.model
    assert model is not None
    tally = ReviewTally()
    for case in cases:
        old, new = case.before.splitlines(keepends=True), case.after.splitlines(keepends=True)
        blocks = _blocks(old, new, 0)
        if blocks is None:
            continue
        tally.cases += 1
        tally.findings += len(blocks)
        repo = f"{OWNER}/{case.key}-review"
        base = review_base(old, new)
        findings = "\n".join(
            f"### FINDING: medium: replayed hunk {n}\nThe commit changes these lines.\n"
            + render(case.path, [b])
            for n, b in enumerate(blocks, start=1)
        )
        model.clear_scripts()
        model.add_scripts([Script(findings, name=f"review-{case.key}", path=case.path)])
        with quiet(stack):
            gh.create_repo(
                repo, {case.path: base, ".github/spark.yml": REVIEW_CONFIG}, installation_id=installation
            )
            gh.add_collaborator(repo, USER, "write")
        gh.open_pull_request(
            repo, "replay", {case.path: case.before}, title=f"Replay {case.key}", author=USER
        )
        settled = wait_for_jobs(stack, timeout=120)
        if not settled["jobs"] or any(j["status"] != "finished" for j in settled["jobs"]):
            raise RuntimeError(f"{case.key}: the review did not run: {settled['jobs']}")
        comments = [c for c in gh.review_comments(repo, 1) if c["user"]["login"] == gh.bot_login]
        valid = right_lines(base, case.before)
        edits = []
        for comment in comments:
            match = SUGGESTION.search(comment["body"])
            if match is None:
                continue
            tally.suggestions += 1
            start, end = comment.get("start_line") or comment["line"], comment["line"]
            if comment["side"] == "RIGHT" and set(range(start, end + 1)) <= valid:
                tally.on_valid_lines += 1
            edit = (start, end, match.group(2).splitlines(keepends=True))
            tally.faithful += _is_partial_of(case, committed(case.before, [edit]))
            edits.append(edit)
        result = committed(case.before, edits)
        if result == case.after:
            tally.reproduced += 1
        elif edits and not _is_partial_of(case, result):
            tally.wrong += 1
            NOTES.append(f"  wrong suggestions: {case.key} {case.path}")
    return tally


def committed(text: str, edits: Sequence[tuple[int, int, list[str]]]) -> str:
    """Return ``text`` once GitHub commits the suggestions as a batch (each replaces its lines)."""
    lines = text.splitlines(keepends=True)
    for start, end, replacement in sorted(edits, reverse=True):
        lines[start - 1 : end] = replacement
    return "".join(lines)


def _is_partial_of(case: Case, result: str) -> bool:
    """Return whether ``result`` lies on a shortest edit path from the commit's parent to the commit.

    Then every line the suggestions changed is changed as the commit changes it, and nothing else changed.
    """
    before, after = case.before.splitlines(keepends=True), case.after.splitlines(keepends=True)
    got = result.splitlines(keepends=True)
    return _distance(before, got) + _distance(got, after) == _distance(before, after)


def _distance(a: Sequence[str], b: Sequence[str]) -> int:
    """Return the number of lines deleted plus inserted by a shortest line diff from ``a`` to ``b``."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    x, y = a[head : len(a) - tail], b[head : len(b) - tail]
    row = [0] * (len(y) + 1)
    for item in x:  # longest common subsequence, one row at a time
        previous = 0
        for j, other in enumerate(y, start=1):
            previous, row[j] = row[j], previous + 1 if item == other else max(row[j], row[j - 1])
    return len(x) + len(y) - 2 * row[-1]


# ---- report -----------------------------------------------------------------------------------------------


def report(
    cases: Sequence[Case], tallies: dict[tuple[str, str], Tally], review: ReviewTally, seconds: float
) -> str:
    """Return the figures: per variant and setup, then the totals against the targets."""
    projects = Counter(c.project for c in cases)
    lines = [
        f"commit replay: {len(cases)} single-file commits ("
        + ", ".join(f"{p} {n}" for p, n in sorted(projects.items()))
        + f"), {sum(t.cases for t in tallies.values())} fixes through the stack in {seconds:.0f} s",
        f"  {'variant':34} {'setup':12} {'cases':>5} {'exact':>6} {'refused':>8} {'wrong/partial':>14} "
        f"{'n/a':>4}",
    ]
    for variant, label in VARIANTS:
        for setup, where in SETUPS:
            t = tallies[(variant, setup)]
            lines.append(
                f"  {label:34} {where:12} {t.cases:5} {t.exact:6} {t.refused:8} {t.wrong:14} {t.skipped:4}"
            )
    lines.append(
        "  n/a: the variant does not fit the commit (one block makes no two wrong ones) or no unique"
    )
    lines.append("  SEARCH block can express the change")
    for setup, where in SETUPS:
        expressible = [tallies[(v, setup)] for v, _ in VARIANTS if v != "partial"]
        total = sum(t.cases for t in expressible)
        exact = sum(t.exact for t in expressible)
        rate = 100 * exact / total if total else 0.0
        lines.append(
            f"  {where}: byte-exact {exact}/{total} ({rate:.1f}%) of the cases SEARCH/REPLACE can express"
        )
    partial = [tallies[("partial", s)] for s, _ in SETUPS]
    lines.append(
        f"  two wrong blocks, one corrected: refused {sum(t.refused_as_expected for t in partial)}"
        f"/{sum(t.cases for t in partial)} (nothing may be committed)"
    )
    lines.append(f"  wrong or partial commits: {sum(t.wrong for t in tallies.values())}")
    lines += NOTES
    lines.append(
        f"review: {review.cases} commits, {review.findings} hunks as findings -> {review.suggestions} "
        f"suggestions ({review.findings - review.suggestions} findings kept no suggestion), "
        f"{review.on_valid_lines} on lines of the diff, {review.faithful} reproduce their part of the "
        f"commit; "
        f"committed as a batch they reproduce {review.reproduced}/{review.cases} files; "
        f"files with a wrong suggestion: {review.wrong}"
    )
    return "\n".join(lines)


def material(argv_repos: Sequence[str]) -> list[Path]:
    """Return the git directories given by ``--repo`` or ``SPARK_BENCH_REPOS`` that exist."""
    named = list(argv_repos) or [p for p in os.environ.get(ENV, "").split(os.pathsep) if p]
    return [Path(p) for p in named if Path(p).exists()]


# A message worth replaying as a request: it mentions a path, URL, anchor, issue, code or a dotted name.
_MENTIONS = re.compile(r"[/#`]|\w\.\w")
# Refusal reasons, by the words of the reply (bot/core/targets.py, bot/core/policy.py).
_REASONS = (
    ("no such file at the head", "no such file"),
    ("a bare name of several files", "names several files"),
    ("a workflow", "workflow"),
    ("outside the repository", "absolute"),
    ("outside the repository", "segments"),
    ("a binary file", "binary"),
    ("excluded by the config", "excluded"),
)


# Reasons that refuse a request for a file Spark may not edit, not for a word.
_MAY_NOT_EDIT = frozenset(("a workflow", "a binary file", "excluded by the config"))


@dataclass(frozen=True, slots=True)
class Request:
    """A commit message replayed as ``/spark fix target: message`` on the commit's diff and files."""

    project: str
    sha: str
    instruction: str
    diff: str
    tree: tuple[str, ...]


def load_requests(paths: Sequence[Path], per_repo: int) -> list[Request]:
    """Return up to ``per_repo`` requests from each repository: messages that mention paths, URLs or names."""
    requests: list[Request] = []
    for path in paths:
        gdir = git_dir_of(path)
        project = path.name if path.name not in ("repo", ".git") else path.parent.name.split("+")[-1]
        log = git(gdir, "log", "--no-merges", f"-n{LOG_DEPTH}", "--format=%H%x00%B%x1e").decode(
            errors="replace"
        )
        found = 0
        for entry in log.split("\x1e"):
            sha, _, message = entry.strip().partition("\x00")
            paragraphs = [p.strip() for p in message.strip().split("\n\n") if p.strip()]
            if not sha or not paragraphs:
                continue
            said = " ".join(paragraphs[:2])[:500]
            if not _MENTIONS.search(said) or said.lower().startswith(("merge", "bump", "release")):
                continue
            status = git(gdir, "diff-tree", "-r", "--no-commit-id", "--name-status", f"{sha}^", sha).decode()
            modified = [
                line.split("\t")[1]
                for line in status.splitlines()
                if line.startswith("M\t") and check_target_path(line.split("\t")[1]) is None
            ]
            if not modified:
                continue
            diff = git(gdir, "diff", f"{sha}^", sha).decode(errors="replace")
            tree = tuple(git(gdir, "ls-tree", "-r", "--name-only", sha).decode().splitlines())
            requests.append(Request(project, sha, f"{modified[0]}: {said}", diff, tree))
            found += 1
            if found == per_repo:
                break
    return requests


def replay_requests(requests: Sequence[Request]) -> str:
    """Judge each request as the fix flow does before the model; return the report of refusals and notes."""
    refused: Counter[str] = Counter()
    noted: Counter[str] = Counter()
    examples: dict[str, str] = {}
    went, with_notes, needless = 0, 0, 0
    for request in requests:
        diff = parse_diff(request.diff)
        early = choose_targets(request.instruction, diff)
        tree = request.tree if early.unresolved else None
        choice = choose_targets(request.instruction, diff, tree=tree) if tree is not None else early
        if choice.refused:
            # Refused although it names an existing file Spark may edit: a word vetoed it.
            needless += any(_reason(r.reason) not in _MAY_NOT_EDIT for r in choice.refused)
            for r in choice.refused:
                reason = _reason(r.reason)
                refused[reason] += 1
                examples.setdefault(reason, f"{request.project} {request.sha[:10]}: {r.written!r}")
            continue
        went += 1
        with_notes += bool(choice.not_files)
        noted.update(_reason(r.reason) for r in choice.not_files)
    refusals = len(requests) - went
    projects = Counter(r.project for r in requests)
    lines = [
        f"request replay: {len(requests)} `/spark fix` requests from commit messages that mention paths, "
        f"URLs or names ({', '.join(f'{p} {n}' for p, n in projects.items())}), each naming a file its "
        "commit changed",
        f"  refused before the model was asked: {refusals} of {len(requests)}"
        + (f" ({100 * refusals / len(requests):.1f} %)" if requests else ""),
    ]
    lines += [f"    - {reason}: {n} (e.g. {examples[reason]})" for reason, n in refused.most_common()]
    lines.append(
        f"  refused although they name an existing file Spark may edit (for names that are not one file): "
        f"{needless}"
    )
    lines.append(
        f"  went ahead: {went}; {with_notes} with names the reply says it did not take for files"
        + (": " + ", ".join(f"{reason} {n}" for reason, n in noted.most_common()) if noted else "")
    )
    return "\n".join(lines)


def _reason(text: str) -> str:
    return next((name for name, words in _REASONS if words in text), "other: " + text[:60])


def main(argv: Sequence[str] | None = None) -> int:
    """Replay the commits and print the figures (or say why there is nothing to replay)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.commit_replay", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--repo", action="append", default=[], help="a git clone or mirror (repeatable)")
    parser.add_argument("--per-repo", type=int, default=15, help="commits to replay from each repository")
    parser.add_argument(
        "--requests-per-repo",
        type=int,
        default=300,
        help="commit messages to replay as requests, per repository",
    )
    parser.add_argument(
        "--requests-only", action="store_true", help="replay the messages as requests only (no stack)"
    )
    args = parser.parse_args(argv if argv is not None else [])
    NOTES.clear()
    paths = material(args.repo)
    if not paths:
        print(f"commit replay: skipped, no material (set {ENV} or pass --repo; see docs/benchmarks.md)")
        return 0
    print(replay_requests(load_requests(paths, args.requests_per_repo)))
    if args.requests_only:
        return 0
    cases = load_cases(paths, args.per_repo)
    if not cases:
        print(
            "commit replay: skipped, no replayable single-file Python commit in " + ", ".join(map(str, paths))
        )
        return 0
    began = time.monotonic()
    scenario = scenarios.parse(scenario_yaml(), source="<commit replay>")
    with (
        contextlib.redirect_stdout(sys.__stdout__),
        PrivateRedis() as server,
        tempfile.TemporaryDirectory(prefix="spark-replay-") as tmp,
    ):
        # Hundreds of fixes a minute under one installation: far over GitHub's content-creation limits and
        # Spark's own write budget, which this benchmark (correctness, not pacing) lifts on both sides.
        env = {"REDIS_URL": server.url, "SPARK_REVIEW_DEBOUNCE_SECONDS": "0"}
        base = Settings.load(env, env_file=None)
        stack = start_stack(scenario, base, Path(tmp), unlimited_writes=True)
        try:
            installation = stack.github.state.repo(f"{OWNER}/seed").installation_id
            assert installation is not None
            tallies = replay_fixes(stack, cases, installation)
            review = replay_reviews(stack, cases, installation)
        finally:
            stack.close()
    print(report(cases, tallies, review, time.monotonic() - began))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
