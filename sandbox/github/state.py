"""In-memory GitHub state: git objects with real SHA-1s, repositories, pull requests, conversations."""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import subprocess
import tempfile
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

Side = Literal["LEFT", "RIGHT"]

# git's tree entry modes (https://git-scm.com/docs/git-fast-import#_filemodify).
FILE_MODE, EXECUTABLE_MODE, SYMLINK_MODE, SUBMODULE_MODE, TREE_MODE = (
    "100644",
    "100755",
    "120000",
    "160000",
    "40000",
)


@dataclass(frozen=True)
class Symlink:
    """A symbolic link to seed or push: git stores the target path as the blob of a 120000 entry."""

    target: str


@dataclass(frozen=True)
class Submodule:
    """A submodule to seed or push: a 160000 tree entry naming a commit of another repository."""

    url: str
    commit: str


FileChanges = Mapping[str, str | bytes | Symlink | Submodule | None]
Entry = tuple[str, str]  # (mode, sha) of a tree entry

# GitHub's per-file diff limits (repository-limits page, "Diff limits"): past them the `patch` is left out.
MAX_FILE_DIFF_LINES = 20_000
MAX_FILE_DIFF_BYTES = 500 * 1024

# GitHub's permission ladder; a higher index includes everything below it.
PERMISSION_LEVELS = ("none", "read", "triage", "write", "maintain", "admin")


class StateError(Exception):
    """A request GitHub would refuse: carries the HTTP status and GitHub's message."""

    def __init__(self, status: int, message: str, errors: list[object] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors or []


def utcnow() -> str:
    """Return the current time in GitHub's ISO-8601 form (second precision, Z suffix)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def as_bytes(content: str | bytes) -> bytes:
    """Encode text as UTF-8; bytes pass through."""
    return content.encode("utf-8") if isinstance(content, str) else content


@dataclass
class Commit:
    """A git commit object plus GitHub's verification flag."""

    sha: str
    tree: str
    parents: list[str]
    message: str
    author: str
    email: str
    date: str
    verified: bool


@dataclass
class Hunk:
    """One `@@` hunk of a file diff with the line numbers it makes commentable on each side."""

    header: str
    lines: list[str]
    left: set[int] = field(default_factory=set)
    right: set[int] = field(default_factory=set)


@dataclass
class FileDiff:
    """The change of one path between two trees, in GitHub's `files` vocabulary."""

    path: str
    status: str  # added | removed | modified
    old_sha: str | None
    new_sha: str | None
    additions: int
    deletions: int
    hunks: list[Hunk]
    binary: bool
    old_mode: str | None = None
    new_mode: str | None = None

    @property
    def hunks_text(self) -> str:
        """Return the file's hunks as `git diff` prints them (no ---/+++ header)."""
        return "\n".join(h.header + "\n" + "\n".join(h.lines) for h in self.hunks)

    @property
    def patch(self) -> str | None:
        """Return GitHub's per-file `patch`: None for binary files and for diffs over the per-file limits.

        "No single file's diff may exceed 20,000 lines that you can load or 500 KB of raw diff data"
        (https://docs.github.com/repositories/creating-and-managing-repositories/repository-limits).
        """
        if self.binary:
            return None
        text = self.hunks_text
        if sum(len(h.lines) + 1 for h in self.hunks) > MAX_FILE_DIFF_LINES or len(text) > MAX_FILE_DIFF_BYTES:
            return None
        return text

    def hunk_of(self, line: int, side: Side) -> int | None:
        """Return the index of the hunk that makes ``line`` commentable on ``side``, if any."""
        for index, hunk in enumerate(self.hunks):
            if line in (hunk.right if side == "RIGHT" else hunk.left):
                return index
        return None


# git's own diff, with its defaults (Myers, the indent heuristic, 3 lines of context, the default hunk
# headings), run without any user or system configuration: GitHub computes its diffs with git.
_GIT_DIFF = ("git", "diff", "--no-index", "--no-color", "--no-ext-diff", "--unified=3", "--", "a", "b")
_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def git_hunks(old: bytes, new: bytes) -> tuple[bool, list[Hunk]]:
    """Return (binary, hunks) of two file contents as `git diff` computes them."""
    if not old or not new:
        # An added or deleted file is all added or all removed lines: what git prints, without a process.
        text = new or old
        lines = text.decode("utf-8", "replace").split("\n")
        if b"\0" in text[:8000]:
            return True, []
        count = len(lines) - (1 if text.endswith(b"\n") else 0)
        sign, span = (
            ("+", f"-0,0 +1{'' if count == 1 else f',{count}'}")
            if new
            else (
                "-",
                f"-1{'' if count == 1 else f',{count}'} +0,0",
            )
        )
        body = [sign + line for line in lines[:count]]
        if not text.endswith(b"\n"):
            body.append("\\ No newline at end of file")
        return False, _parse_hunks([f"@@ {span} @@", *body])
    with tempfile.TemporaryDirectory(prefix="sandbox-diff-") as tmp:
        Path(tmp, "a").write_bytes(old)
        Path(tmp, "b").write_bytes(new)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
        env["GIT_CONFIG_GLOBAL"] = os.devnull
        done = subprocess.run(_GIT_DIFF, cwd=tmp, env=env, capture_output=True, check=False)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"git diff failed: {done.stderr.decode(errors='replace')}")
    out = done.stdout.decode("utf-8", "replace")
    if "\nBinary files " in "\n" + out and "\n@@ " not in "\n" + out:
        return True, []
    lines = out.split("\n")
    first = next((i for i, line in enumerate(lines) if line.startswith("@@ ")), len(lines))
    body = lines[first:]
    if body and body[-1] == "":
        body.pop()  # the newline that ends git's output
    return False, _parse_hunks(body)


def _parse_hunks(lines: list[str]) -> list[Hunk]:
    """Read `@@` hunks, recording which line numbers each makes commentable on each side."""
    hunks: list[Hunk] = []
    old = new = 0
    for line in lines:
        header = _HUNK_HEADER.match(line)
        if header is not None:
            hunks.append(Hunk(header=line, lines=[]))
            old, new = int(header.group(1)), int(header.group(3))
            continue
        hunk = hunks[-1]
        hunk.lines.append(line)
        if line.startswith("-"):
            hunk.left.add(old)
            old += 1
        elif line.startswith("+"):
            hunk.right.add(new)
            new += 1
        elif line.startswith(" "):
            hunk.left.add(old)
            hunk.right.add(new)
            old, new = old + 1, new + 1
    return hunks


class GitStore:
    """Content-addressed blobs, trees and commits whose SHA-1s are exactly git's."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.trees: dict[str, list[tuple[str, str, str]]] = {}  # sha -> [(mode, name, sha)]
        self.commits: dict[str, Commit] = {}
        self._diffs: dict[tuple[str, str], list[FileDiff]] = {}
        self._blob_diffs: dict[tuple[str, str], tuple[bool, list[Hunk]]] = {}

    @staticmethod
    def _hash(kind: str, body: bytes) -> str:
        return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).hexdigest()

    def put_blob(self, content: bytes) -> str:
        """Store a blob and return its git SHA-1."""
        sha = self._hash("blob", content)
        self.blobs[sha] = content
        return sha

    def put_tree(self, entries: list[tuple[str, str, str]]) -> str:
        """Store a tree of (mode, name, sha) entries, sorted as git sorts them, and return its SHA-1."""
        ordered = sorted(entries, key=lambda e: e[1] + ("/" if e[0] == "40000" else ""))
        body = b"".join(f"{mode} {name}\0".encode() + bytes.fromhex(sha) for mode, name, sha in ordered)
        sha = self._hash("tree", body)
        self.trees[sha] = ordered
        return sha

    def put_commit(
        self, tree: str, parents: list[str], message: str, author: str, email: str, verified: bool
    ) -> Commit:
        """Store a commit (author = committer) and return it."""
        date = utcnow()
        stamp = f"{author} <{email}> {int(datetime.now(UTC).timestamp())} +0000"
        text = f"tree {tree}\n" + "".join(f"parent {p}\n" for p in parents)
        text += f"author {stamp}\ncommitter {stamp}\n\n{message}"
        sha = self._hash("commit", text.encode())
        commit = Commit(sha, tree, list(parents), message, author, email, date, verified)
        self.commits[sha] = commit
        return commit

    def build_tree(self, files: dict[str, bytes]) -> str:
        """Write nested trees for a flat {path: content} map and return the root tree SHA."""
        return self.build_tree_from_shas({p: self.put_blob(c) for p, c in files.items()})

    def build_tree_from_shas(self, files: Mapping[str, str | Entry]) -> str:
        """Write nested trees for a flat {path: blob sha, or (mode, sha)} map and return the root tree SHA."""
        children: dict[str, dict[str, str | Entry]] = {}
        entries: list[tuple[str, str, str]] = []
        for path, value in files.items():
            mode, sha = value if isinstance(value, tuple) else (FILE_MODE, value)
            head, _, rest = path.partition("/")
            if rest:
                children.setdefault(head, {})[rest] = (mode, sha)
            else:
                entries.append((mode, head, sha))
        entries += [(TREE_MODE, name, self.build_tree_from_shas(sub)) for name, sub in children.items()]
        return self.put_tree(entries)

    def entries(self, tree_sha: str, prefix: str = "") -> dict[str, Entry]:
        """Return {path: (mode, sha)} for every non-tree entry under a tree (files, symlinks, submodules)."""
        out: dict[str, Entry] = {}
        for mode, name, sha in self.trees[tree_sha]:
            if mode == TREE_MODE:
                out.update(self.entries(sha, prefix + name + "/"))
            else:
                out[prefix + name] = (mode, sha)
        return out

    def flatten(self, tree_sha: str) -> dict[str, str]:
        """Return {path: blob sha} for every blob under a tree (files and symlinks; not submodules)."""
        return {path: sha for path, (mode, sha) in self.entries(tree_sha).items() if mode != SUBMODULE_MODE}

    def entries_at(self, commit_sha: str) -> dict[str, Entry]:
        """Return {path: (mode, sha)} of a commit's tree."""
        return self.entries(self.commits[commit_sha].tree)

    def files_at(self, commit_sha: str) -> dict[str, str]:
        """Return {path: blob sha} of a commit's tree (files and symlinks; not submodules)."""
        return self.flatten(self.commits[commit_sha].tree)

    def ancestors(self, sha: str) -> list[str]:
        """Return the commit and all its ancestors, newest first (breadth-first)."""
        order: list[str] = []
        seen: set[str] = set()
        queue = deque([sha])
        while queue:
            current = queue.popleft()
            if current in seen or current not in self.commits:
                continue
            seen.add(current)
            order.append(current)
            queue.extend(self.commits[current].parents)
        return order

    def merge_base(self, a: str, b: str) -> str | None:
        """Return the newest common ancestor of two commits."""
        theirs = set(self.ancestors(b))
        return next((c for c in self.ancestors(a) if c in theirs), None)

    def diff(self, old_commit: str, new_commit: str) -> list[FileDiff]:
        """Diff two commits file by file, sorted by path (cached: commits are immutable)."""
        key = (old_commit, new_commit)
        if key not in self._diffs:
            self._diffs[key] = self._diff(old_commit, new_commit)
        return self._diffs[key]

    def content(self, entry: Entry | None) -> bytes:
        """Return what git diffs for a tree entry: a blob's bytes, or a submodule's "Subproject commit"."""
        if entry is None:
            return b""
        mode, sha = entry
        return f"Subproject commit {sha}\n".encode() if mode == SUBMODULE_MODE else self.blobs[sha]

    def _hunks(self, old: Entry | None, new: Entry | None) -> tuple[bool, list[Hunk]]:
        """Return (binary, hunks) for two tree entries, cached: a push re-diffs only the files it changed."""
        key = (old[1] if old else "", new[1] if new else "")
        if key not in self._blob_diffs:
            self._blob_diffs[key] = git_hunks(self.content(old), self.content(new))
        return self._blob_diffs[key]

    def _diff(self, old_commit: str, new_commit: str) -> list[FileDiff]:
        old, new = self.entries_at(old_commit), self.entries_at(new_commit)
        result: list[FileDiff] = []
        for path in sorted(set(old) | set(new)):
            a, b = old.get(path), new.get(path)
            if a == b:
                continue
            binary, hunks = self._hunks(a, b)
            status = "added" if a is None else "removed" if b is None else "modified"
            adds = sum(1 for h in hunks for line in h.lines if line.startswith("+"))
            dels = sum(1 for h in hunks for line in h.lines if line.startswith("-"))
            result.append(
                FileDiff(
                    path,
                    status,
                    a[1] if a else None,
                    b[1] if b else None,
                    adds,
                    dels,
                    hunks,
                    binary,
                    a[0] if a else None,
                    b[0] if b else None,
                )
            )
        return result


@dataclass
class Repo:
    """A repository: refs into the shared git store, its installation and collaborators."""

    id: int
    owner: str
    name: str
    owner_type: str
    private: bool
    default_branch: str
    installation_id: int | None
    refs: dict[str, str] = field(default_factory=dict)  # branch -> commit sha
    collaborators: dict[str, str] = field(default_factory=dict)
    parent: str | None = None  # full name of the upstream when this is a fork

    @property
    def full_name(self) -> str:
        """Return owner/name."""
        return f"{self.owner}/{self.name}"


@dataclass
class PullRequest:
    """A pull request between a head branch (maybe in a fork) and a base branch."""

    id: int
    number: int
    repo: str
    head_repo: str
    head_ref: str
    base_ref: str
    base_sha: str
    title: str
    body: str | None
    author: str
    draft: bool
    maintainer_can_modify: bool
    state: str = "open"
    created_at: str = field(default_factory=utcnow)
    updated_at: str = field(default_factory=utcnow)


@dataclass
class IssueComment:
    """A comment in a PR's conversation."""

    id: int
    repo: str
    number: int
    body: str
    author: str
    created_at: str = field(default_factory=utcnow)
    updated_at: str = field(default_factory=utcnow)


@dataclass
class ReviewComment:
    """An inline review comment; replies share the root's thread."""

    id: int
    repo: str
    number: int
    review_id: int | None
    path: str
    commit_id: str
    body: str
    author: str
    line: int
    side: str
    start_line: int | None
    start_side: str | None
    diff_hunk: str
    in_reply_to_id: int | None = None
    created_at: str = field(default_factory=utcnow)


@dataclass
class Review:
    """A submitted review (its inline comments are ReviewComments with this review_id)."""

    id: int
    repo: str
    number: int
    body: str
    event: str
    commit_id: str
    author: str
    submitted_at: str = field(default_factory=utcnow)


@dataclass
class Thread:
    """A review thread (GraphQL `PullRequestReviewThread`), rooted at one review comment."""

    id: int
    root_comment_id: int
    resolved: bool = False
    resolved_by: str | None = None


@dataclass
class Reaction:
    """An emoji reaction on an issue comment or a review comment."""

    id: int
    subject: str  # "issue_comment" | "review_comment"
    subject_id: int
    content: str
    author: str
    created_at: str = field(default_factory=utcnow)


@dataclass
class CheckRun:
    """A check run on a head SHA."""

    id: int
    repo: str
    head_sha: str
    name: str
    status: str
    conclusion: str | None
    output: dict[str, object]
    actions: list[dict[str, str]]
    external_id: str | None
    details_url: str | None
    started_at: str = field(default_factory=utcnow)
    completed_at: str | None = None
    # Another App's run (an Actions job's is "github-actions"); None is the App the sandbox serves.
    app_slug: str | None = None
    annotations: list[dict[str, object]] = field(default_factory=list)


@dataclass
class WorkflowRun:
    """One run of a workflow on a head SHA."""

    id: int
    repo: str
    name: str
    path: str
    head_sha: str
    head_branch: str
    event: str
    status: str = "completed"
    conclusion: str | None = None
    created_at: str = field(default_factory=utcnow)
    run_attempt: int = 1


@dataclass
class WorkflowJob:
    """One job of a workflow run; its check run has the same id, as on GitHub."""

    id: int
    run_id: int
    repo: str
    name: str
    head_sha: str
    head_branch: str
    conclusion: str | None
    steps: list[dict[str, object]]
    log: bytes
    # Past the log retention period GitHub answers 410 Gone for the log.
    log_expired: bool = False
    started_at: str = field(default_factory=utcnow)
    completed_at: str = field(default_factory=utcnow)


REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")


class State:
    """Everything the sandbox knows, guarded by one lock (requests are short, contention is low)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.git = GitStore()
        self._ids = itertools.count(1000)
        self.users: dict[str, int] = {}
        self.installations: dict[int, str] = {}  # id -> account login
        self.repos: dict[str, Repo] = {}
        self.pulls: dict[tuple[str, int], PullRequest] = {}
        self.issue_numbers: dict[str, itertools.count[int]] = {}
        self.issue_comments: dict[int, IssueComment] = {}
        self.review_comments: dict[int, ReviewComment] = {}
        self.reviews: dict[int, Review] = {}
        self.threads: dict[int, Thread] = {}
        self.reactions: dict[int, Reaction] = {}
        self.check_runs: dict[int, CheckRun] = {}
        self.workflow_runs: dict[int, WorkflowRun] = {}
        self.jobs: dict[int, WorkflowJob] = {}
        # An installation's granted permissions (the App's manifest set unless a test narrows them).
        self.permissions: dict[int, dict[str, str]] = {}
        self.submodule_urls: dict[str, str] = {}  # commit sha -> URL (git keeps it in .gitmodules)
        # The App Manifest flow's one-time codes: code -> (expiry, manifest).
        self.manifest_codes: dict[str, tuple[float, dict[str, object]]] = {}

    def next_id(self) -> int:
        """Return a fresh id (unique across every kind of object, like GitHub's database ids)."""
        return next(self._ids)

    def user_id(self, login: str) -> int:
        """Return the id of a user, creating the account on first sight."""
        with self.lock:
            if login not in self.users:
                self.users[login] = self.next_id()
            return self.users[login]

    def repo(self, full_name: str) -> Repo:
        """Return a repository or raise GitHub's 404."""
        repo = self.repos.get(full_name.lower())
        if repo is None:
            raise StateError(404, "Not Found")
        return repo

    def pull(self, full_name: str, number: int) -> PullRequest:
        """Return a pull request or raise GitHub's 404."""
        pr = self.pulls.get((self.repo(full_name).full_name, number))
        if pr is None:
            raise StateError(404, "Not Found")
        return pr

    def head_sha(self, pr: PullRequest) -> str:
        """Return the current tip of the PR's head branch."""
        return self.repo(pr.head_repo).refs[pr.head_ref]

    def pr_diff(self, pr: PullRequest) -> list[FileDiff]:
        """Return the PR's files: head against its merge base with the base branch."""
        head = self.head_sha(pr)
        base = self.git.merge_base(head, self.repo(pr.repo).refs[pr.base_ref]) or pr.base_sha
        return self.git.diff(base, head)

    def resolve_ref(self, repo: Repo, ref: str) -> str:
        """Resolve a branch name, `heads/x`, `refs/heads/x` or a (full) commit SHA to a commit SHA."""
        name = ref.removeprefix("refs/").removeprefix("heads/")
        if name in repo.refs:
            return repo.refs[name]
        if ref == "HEAD":
            # As in git (and GitHub's ``?ref=HEAD``): the default branch's tip.
            return repo.refs[repo.default_branch]
        if ref in self.git.commits:
            return ref
        matches = [s for s in self.git.commits if len(ref) >= 7 and s.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        raise StateError(404, "No commit found for the ref " + ref)

    def commit_files(
        self,
        repo: Repo,
        branch: str,
        files: FileChanges,
        message: str,
        author: str,
        email: str,
        verified: bool,
    ) -> Commit:
        """Commit file changes (None deletes) on top of a branch and move the branch."""
        with self.lock:
            parent = repo.refs.get(branch)
            current = dict(self.git.entries_at(parent)) if parent else {}
            for path, content in files.items():
                if content is None:
                    current.pop(path, None)
                elif isinstance(content, Symlink):
                    current[path] = (SYMLINK_MODE, self.git.put_blob(content.target.encode()))
                elif isinstance(content, Submodule):
                    current[path] = (SUBMODULE_MODE, content.commit)
                    self.submodule_urls[content.commit] = content.url
                else:
                    # A write replaces a symlink or submodule with a regular file; an executable stays one.
                    kept = current.get(path, (FILE_MODE, ""))[0]
                    mode = kept if kept == EXECUTABLE_MODE else FILE_MODE
                    current[path] = (mode, self.git.put_blob(as_bytes(content)))
            tree = self.git.build_tree_from_shas(current)
            commit = self.git.put_commit(tree, [parent] if parent else [], message, author, email, verified)
            repo.refs[branch] = commit.sha
            return commit

    def permission(self, repo: Repo, login: str) -> str:
        """Return a user's effective permission on a repository (the owner is admin)."""
        if login == repo.owner:
            return "admin"
        if login in repo.collaborators:
            return repo.collaborators[login]
        return "read" if not repo.private else "none"
