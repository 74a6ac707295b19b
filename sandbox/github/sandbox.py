"""`GitHubSandbox`: the Python handle that seeds, drives, inspects and serves the local GitHub."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

from github import Auth, Github, GithubIntegration

from sandbox.github.actions import Job, run_workflow
from sandbox.github.auth import AppAuth, generate_private_key_pem
from sandbox.github.faults import Faults
from sandbox.github.rules import BranchRules
from sandbox.github.server import LoggedRequest, Server
from sandbox.github.service import CommentSpec, GitHub
from sandbox.github.shapes import Json, Shapes, node_id
from sandbox.github.state import PERMISSION_LEVELS, FileChanges, Repo, Side, State, StateError
from sandbox.github.webhooks import HookDelivery, Hookshot


class GitHubSandbox:
    """A local GitHub: REST + GraphQL on 127.0.0.1 for the real clients, methods for tests and the demo."""

    def __init__(
        self,
        webhook_url: str | None = None,
        webhook_secret: str = "sandbox-webhook-secret",
        app_id: int = 4242,
        app_slug: str = "spark",
        latency: float = 0.0,
        private_key_pem: str | None = None,
        events: Sequence[str] | None = None,
    ) -> None:
        self.app_id = app_id
        self.app_slug = app_slug
        self.private_key_pem = private_key_pem or generate_private_key_pem()
        self.state = State()
        self.faults = Faults(latency=latency)
        self.auth = AppAuth(app_id, self.private_key_pem)
        self.hookshot = Hookshot(webhook_url, webhook_secret, app_id)
        self._shapes = Shapes(self.state, "http://127.0.0.1", app_id, app_slug)
        if events is not None:
            # The App's subscription (its manifest's `default_events`); by default every event fired here.
            self._shapes.events = tuple(events)
        self.github = GitHub(self.state, self.auth, self._shapes, self.hookshot, self.faults, app_slug)
        self.server = Server(self.github)
        self.url = ""

    # ---- lifecycle ----------------------------------------------------------------------------------------

    def start(self, port: int = 0) -> str:
        """Start serving and delivering webhooks; return the base URL (PyGithub's `base_url`)."""
        bound = self.server.start(port=port)
        self.url = f"http://127.0.0.1:{bound}"
        self._shapes.api = self._shapes.html = self.url
        self.hookshot.start()
        return self.url

    def stop(self) -> None:
        """Stop the server and the webhook sender."""
        self.server.stop()
        self.hookshot.stop()

    def __enter__(self) -> GitHubSandbox:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ---- configuration ------------------------------------------------------------------------------------

    @property
    def webhook_secret(self) -> str:
        """The secret deliveries are signed with."""
        return self.hookshot.secret

    @property
    def webhook_url(self) -> str | None:
        """Where deliveries go (None: recorded, not sent)."""
        return self.hookshot.url

    @webhook_url.setter
    def webhook_url(self, url: str | None) -> None:
        self.hookshot.url = url

    @property
    def bot_login(self) -> str:
        """The App's bot account (`<slug>[bot]`), the author of everything the App posts."""
        return self.github.bot_login

    @property
    def token_ttl(self) -> float:
        """Seconds a newly minted installation token lives (GitHub: 3600)."""
        return self.auth.token_ttl

    @token_ttl.setter
    def token_ttl(self, seconds: float) -> None:
        self.auth.token_ttl = seconds

    def expire_tokens(self) -> None:
        """Make every installation token minted so far invalid now."""
        self.auth.expire_all()

    # ---- real clients pointed here ----------------------------------------------------------------------

    def integration(self) -> GithubIntegration:
        """A PyGithub `GithubIntegration` for this App (JWT auth), with no client-side throttling."""
        return GithubIntegration(
            auth=Auth.AppAuth(self.app_id, self.private_key_pem),
            base_url=self.url,
            seconds_between_requests=0,
            seconds_between_writes=0,
        )

    def client(self, installation_id: int) -> Github:
        """A PyGithub `Github` for one installation (token minted and refreshed by PyGithub itself)."""
        auth = Auth.AppAuth(self.app_id, self.private_key_pem).get_installation_auth(installation_id)
        return Github(auth=auth, base_url=self.url, seconds_between_requests=0, seconds_between_writes=0)

    # ---- seeding ------------------------------------------------------------------------------------------

    def create_installation(self, account: str) -> int:
        """Install the App on an account; return the installation id."""
        with self.state.lock:
            installation_id = self.state.next_id()
            self.state.installations[installation_id] = account
            return installation_id

    def create_repo(
        self,
        full_name: str,
        files: FileChanges,
        installation_id: int | None = None,
        default_branch: str = "main",
        private: bool = False,
        owner_type: str = "Organization",
    ) -> str:
        """Create a repository whose default branch has one commit with ``files``; return its full name."""
        owner, _, name = full_name.partition("/")
        if not name or "/" in name:
            raise ValueError(f"repository names are owner/name, got {full_name!r}")
        with self.state.lock:
            if full_name.lower() in self.state.repos:
                raise ValueError(f"{full_name} already exists")
            repo = Repo(
                self.state.next_id(), owner, name, owner_type, private, default_branch, installation_id
            )
            self.state.repos[full_name.lower()] = repo
            self.state.commit_files(
                repo,
                default_branch,
                dict(files),
                "Initial commit",
                owner,
                f"{owner}@users.noreply.github.com",
                verified=False,
            )
        return repo.full_name

    def fork(self, full_name: str, owner: str, owner_type: str = "User") -> str:
        """Fork a repository (same git objects, not installed); return the fork's full name."""
        upstream = self.state.repo(full_name)
        fork_name = f"{owner}/{upstream.name}"
        with self.state.lock:
            if fork_name.lower() not in self.state.repos:
                fork = Repo(
                    self.state.next_id(),
                    owner,
                    upstream.name,
                    owner_type,
                    upstream.private,
                    upstream.default_branch,
                    None,
                    dict(upstream.refs),
                    parent=upstream.full_name,
                )
                self.state.repos[fork_name.lower()] = fork
        return fork_name

    def add_collaborator(self, full_name: str, login: str, permission: str) -> None:
        """Give a user admin|maintain|write|triage|read on a repository."""
        if permission not in PERMISSION_LEVELS[1:]:
            raise ValueError(f"permission must be one of {PERMISSION_LEVELS[1:]}, got {permission!r}")
        self.state.repo(full_name).collaborators[login] = permission
        self.state.user_id(login)

    def protect_branch(self, full_name: str, branch: str, rules: BranchRules) -> None:
        """Guard a branch (of a repository that may not exist yet) with a protection rule or a ruleset."""
        self.github.rules.add(full_name, branch, rules)

    # ---- user actions (each fires the webhook GitHub would) -----------------------------------------------

    def push(
        self,
        full_name: str,
        branch: str,
        files: FileChanges,
        message: str = "Update",
        author: str = "octocat",
    ) -> str:
        """Push a commit as a user (None deletes a file); fires push and synchronize; return its SHA."""
        repo = self.state.repo(full_name)
        commit = self.github.push(
            repo, branch, files, message, author, f"{author}@users.noreply.github.com", verified=False
        )
        return commit.sha

    def open_pull_request(
        self,
        full_name: str,
        head_branch: str,
        files: FileChanges,
        title: str = "Update",
        body: str | None = "",
        author: str = "octocat",
        base: str = "main",
        fork_owner: str | None = None,
        maintainer_can_modify: bool = False,
        draft: bool = False,
        fork_owner_type: str = "User",
    ) -> int:
        """Push ``files`` to a head branch (in a fork when ``fork_owner``), open a PR; return its number."""
        base_repo = self.state.repo(full_name)
        head_name = self.fork(full_name, fork_owner, fork_owner_type) if fork_owner else base_repo.full_name
        head_repo = self.state.repo(head_name)
        with self.state.lock:
            if head_branch not in head_repo.refs:
                head_repo.refs[head_branch] = base_repo.refs[base]
            self.state.commit_files(
                head_repo,
                head_branch,
                files,
                title,
                author,
                f"{author}@users.noreply.github.com",
                verified=False,
            )
        pr = self.github.open_pull_request(
            base_repo, head_repo, head_branch, base, title, body, author, draft, maintainer_can_modify
        )
        return pr.number

    def close_pull_request(self, full_name: str, number: int, author: str = "octocat") -> None:
        """Close a PR (fires pull_request closed)."""
        self.github.close_pull_request(self.state.pull(full_name, number), author)

    def mark_ready_for_review(self, full_name: str, number: int, author: str = "octocat") -> None:
        """Take a draft PR out of draft (fires pull_request ready_for_review)."""
        self.github.mark_ready_for_review(self.state.pull(full_name, number), author)

    def comment(self, full_name: str, number: int, body: str, author: str = "octocat") -> int:
        """Comment on a PR's conversation (fires issue_comment created); return the comment id."""
        return self.github.add_issue_comment(self.state.pull(full_name, number), body, author).id

    def edit_comment(self, comment_id: int, body: str, author: str = "octocat") -> None:
        """Edit an issue comment (fires issue_comment edited)."""
        self.github.edit_issue_comment(self.state.issue_comments[comment_id], body, author)

    def review_comment(
        self,
        full_name: str,
        number: int,
        path: str,
        line: int,
        body: str,
        author: str = "octocat",
        side: Side = "RIGHT",
        start_line: int | None = None,
    ) -> int:
        """Add an inline comment as a user (GitHub's placement rules apply); return its id."""
        spec = CommentSpec(path, body, line, side, start_line, side if start_line is not None else None)
        return self.github.create_review_comment(self.state.pull(full_name, number), spec, None, author).id

    def reply(self, full_name: str, number: int, comment_id: int, body: str, author: str = "octocat") -> int:
        """Reply in a review thread (fires pull_request_review_comment created); return the reply id."""
        return self.github.reply(self.state.pull(full_name, number), comment_id, body, author).id

    def react(self, comment_id: int, content: str, author: str = "octocat") -> None:
        """React to an issue comment or review comment as a user."""
        subject = "issue_comment" if comment_id in self.state.issue_comments else "review_comment"
        self.github.react(subject, comment_id, content, author)

    def apply_suggestion(self, comment_id: int, author: str = "octocat") -> str:
        """Press "Commit suggestion": the block replaces start_line..line in one commit; return its SHA."""
        return self.github.apply_suggestion(comment_id, author).sha

    def resolve_thread(self, comment_id: int, author: str = "octocat", *, resolved: bool = True) -> None:
        """Press "Resolve conversation" (or "Unresolve") on the review thread comment ``comment_id`` opens.

        GitHub then fires ``pull_request_review_thread``; Spark does not subscribe to it, so none is sent.
        """
        with self.state.lock:
            [thread] = [t for t in self.state.threads.values() if t.root_comment_id == comment_id]
            thread.resolved = resolved
            thread.resolved_by = author if resolved else None

    def request_check_run_action(self, run_id: int, identifier: str, author: str = "octocat") -> None:
        """Click a check run's requested-action button (fires check_run requested_action)."""
        self.github.check_run_event(self.state.check_runs[run_id], "requested_action", author, identifier)

    def rerequest_check_run(self, run_id: int, author: str = "octocat") -> None:
        """Click "Re-run" on a check run (fires check_run rerequested)."""
        self.github.check_run_event(self.state.check_runs[run_id], "rerequested", author)

    def set_permissions(self, installation_id: int, permissions: dict[str, str]) -> None:
        """Narrow (or widen) what an installation was granted, e.g. without ``actions: read``."""
        with self.state.lock:
            self.state.permissions[installation_id] = dict(permissions)

    def run_workflow(
        self,
        full_name: str,
        head_sha: str,
        jobs: Sequence[Job],
        name: str = "CI",
        event: str = "pull_request",
    ) -> list[int]:
        """Run a GitHub Actions workflow on a head to its end (deliveries fired); return its jobs' ids, which
        are also their check runs' ids."""
        run = run_workflow(self.github, self.state.repo(full_name), head_sha, jobs, name=name, event=event)
        return [job.id for job in self.state.jobs.values() if job.run_id == run.id]

    def expire_job_log(self, job_id: int) -> None:
        """Let a job's log pass its retention period (its download is then 410 Gone)."""
        self.state.jobs[job_id].log_expired = True

    def move_head_on(
        self,
        full_name: str,
        number: int,
        files: FileChanges,
        method: str,
        path: str,
        nth: int = 1,
        author: str = "octocat",
    ) -> None:
        """Push to a PR's head branch just before the ``nth`` request matching method and path regex."""
        pr = self.state.pull(full_name, number)
        self.faults.on_request(
            method, path, lambda: self.push(pr.head_repo, pr.head_ref, files, "Moved", author), nth
        )

    # ---- webhooks -----------------------------------------------------------------------------------------

    @property
    def deliveries(self) -> list[HookDelivery]:
        """Every delivery so far, oldest first (redeliveries included)."""
        return list(self.hookshot.deliveries)

    def wait_for_deliveries(self, timeout: float = 10.0) -> list[HookDelivery]:
        """Block until every queued webhook has been attempted; return all deliveries."""
        self.hookshot.wait(timeout)
        return self.deliveries

    def redeliver(self, delivery_id: int) -> HookDelivery:
        """Redeliver a recorded delivery (same GUID)."""
        return self.hookshot.redeliver(delivery_id)

    # ---- inspection (GitHub's REST shapes) ----------------------------------------------------------------

    @property
    def request_log(self) -> list[LoggedRequest]:
        """Every API request served: method, path, status, duration."""
        return list(self.server.request_log)

    def pull(self, full_name: str, number: int) -> Json:
        """The PR as `GET …/pulls/{n}` returns it (head.sha is the current head)."""
        return self._shapes.pull(self.state.pull(full_name, number))

    def head_sha(self, full_name: str, number: int) -> str:
        """The PR's current head SHA."""
        return self.state.head_sha(self.state.pull(full_name, number))

    def issue_comments(self, full_name: str, number: int) -> list[Json]:
        """The PR's conversation comments, oldest first."""
        pr = self.state.pull(full_name, number)
        return [
            self._shapes.issue_comment(c)
            for c in self.state.issue_comments.values()
            if (c.repo, c.number) == (pr.repo, pr.number)
        ]

    def review_comments(self, full_name: str, number: int) -> list[Json]:
        """The PR's inline comments and replies, oldest first."""
        pr = self.state.pull(full_name, number)
        return [
            self._shapes.review_comment(c)
            for c in self.state.review_comments.values()
            if (c.repo, c.number) == (pr.repo, pr.number)
        ]

    def reviews(self, full_name: str, number: int) -> list[Json]:
        """The PR's reviews, each with its `comments`."""
        pr = self.state.pull(full_name, number)
        out = []
        for review in self.state.reviews.values():
            if (review.repo, review.number) != (pr.repo, pr.number):
                continue
            data = self._shapes.review(review)
            data["comments"] = [
                self._shapes.review_comment(c)
                for c in self.state.review_comments.values()
                if c.review_id == review.id
            ]
            out.append(data)
        return out

    def threads(self, full_name: str, number: int) -> list[Json]:
        """The PR's review threads: node id, resolved flag, and the comment ids in order."""
        pr = self.state.pull(full_name, number)
        out = []
        for thread in self.state.threads.values():
            root = self.state.review_comments[thread.root_comment_id]
            if (root.repo, root.number) != (pr.repo, pr.number):
                continue
            replies = [c.id for c in self.state.review_comments.values() if c.in_reply_to_id == root.id]
            out.append(
                {
                    "id": node_id("PullRequestReviewThread", thread.id),
                    "resolved": thread.resolved,
                    "path": root.path,
                    "line": root.line,
                    "comment_ids": [root.id, *replies],
                }
            )
        return out

    def reactions(self, comment_id: int) -> list[tuple[str, str]]:
        """(content, user login) of every reaction on a comment, oldest first."""
        return [(r.content, r.author) for r in self.state.reactions.values() if r.subject_id == comment_id]

    def check_runs(self, full_name: str, head_sha: str | None = None) -> list[Json]:
        """Check runs of a repository (optionally of one head SHA), oldest first."""
        repo = self.state.repo(full_name)
        return [
            self._shapes.check_run(r)
            for r in self.state.check_runs.values()
            if r.repo == repo.full_name and (head_sha is None or r.head_sha == head_sha)
        ]

    def commits(self, full_name: str, branch: str) -> list[dict[str, Any]]:
        """A branch's history, newest first: sha, message, author, verified."""
        repo = self.state.repo(full_name)
        git = self.state.git
        return [
            {
                "sha": s,
                "message": git.commits[s].message,
                "author": git.commits[s].author,
                "verified": git.commits[s].verified,
                "parents": git.commits[s].parents,
            }
            for s in git.ancestors(repo.refs[branch])
        ]

    def file_at(self, full_name: str, ref: str, path: str) -> str | None:
        """A file's text at a branch or SHA, None when absent."""
        repo = self.state.repo(full_name)
        try:
            sha = self.state.resolve_ref(repo, ref)
        except StateError:
            return None
        blob = self.state.git.files_at(sha).get(path)
        return None if blob is None else self.state.git.blobs[blob].decode("utf-8", errors="replace")
