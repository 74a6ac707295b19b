"""``spark review PR_URL [--fix "instructions"] [--dry-run] [--json]``: one review or fix, from a shell.

It runs the very flows a worker runs (``workers.flows.review.run_review``, ``workers.flows.fix.run_fix``) in
this process, with ``GITHUB_TOKEN`` or the App's credentials. The seam is the GitHub client:
``RecordingInstallation`` reads through to GitHub and records every write; with ``--dry-run`` it records
writes instead of making them, and the flow's Redis is a throwaway server, so the real ledger, cancel flags
and fix records stay untouched. A fix without ``--dry-run`` first posts a comment saying what was asked from
the command line (not starting with ``/spark``, so no worker picks it up); the reactions, the commit trailer
and the reply then refer to it as they would to a ``/spark fix`` comment. The command line acts with its
credentials' own rights: the repository permission check that guards ``/spark fix`` is for commenters, and
GitHub refuses any write the token may not make. Exit codes: 0 done, 1 the review or fix failed (the reason is
printed), 2 bad arguments or settings.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import orjson
import redis
import structlog
from github import Auth, Github, GithubException, GithubIntegration

from bot.adapters.github import (
    BranchMoved,
    CommentRef,
    Committed,
    GitHubError,
    Installation,
    PushRefused,
    Reaction,
    default_retry,
)
from bot.cancel import CancelToken
from bot.core.diff import format_patch
from bot.core.types import ReviewComment
from bot.logs import configure_logging
from bot.redis_server import PrivateRedis, connect
from bot.refs import CommandRef, PullRequestRef
from bot.settings import Settings, SettingsError
from workers.context import JobContext, ProcessClients, job_logging, log_fields
from workers.timings import Timings

# Outcomes of the flows that mean the work was done (or had nothing to do); anything else exits 1.
DONE = frozenset({"committed", "suggested", "already done", "posted", "nothing new"})
DRY_RUN_URL = "(dry run: not committed)"
_PR_PATH = re.compile(r"(?:^|/)(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+)/pulls?/(?P<number>\d+)(?:[/?#].*)?$")
_PR_SHORT = re.compile(r"^(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+)#(?P<number>\d+)$")


def parse_pr_url(text: str) -> tuple[str, str, int]:
    """Return ``(owner, repo, number)`` from a pull request's address or ``owner/repo#N``."""
    text = text.strip()
    match = _PR_SHORT.match(text) or _PR_PATH.search(re.sub(r"^[a-z]+://[^/]+", "", text))
    if match is None:
        raise SettingsError(
            f"PR_URL: expected https://github.com/OWNER/REPO/pull/N or OWNER/REPO#N, got {text!r}"
        )
    return match["owner"], match["repo"], int(match["number"])


@dataclass(frozen=True, slots=True)
class Write:
    """One write the flow made (or, on a dry run, would have made)."""

    kind: str
    target: str
    body: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


class RecordingInstallation(Installation):
    """An installation client that records every write, and on ``dry_run`` makes none of them.

    Reads go to GitHub unchanged. Comment id 0 stands for "no comment" (a dry run posts no request
    comment), so there is nothing to react to.
    """

    def __init__(self, github: Github, installation_id: int, *, dry_run: bool, operator: str) -> None:
        super().__init__(github, installation_id, own_login=operator)
        self.dry_run = dry_run
        self.operator = operator
        self.writes: list[Write] = []

    def permission(self, repo: str, login: str) -> str:
        """Return the operator's permission as admin (its credentials decide), anyone else's from GitHub."""
        if login == self.operator:
            return "admin"
        return super().permission(repo, login)

    def react(self, repo: str, comment_id: int, content: Reaction, *, review_comment: bool = False) -> None:
        """Record and make a reaction on a real comment (a dry run has none to react to)."""
        if comment_id <= 0:
            return
        self.writes.append(Write("reaction", f"comment {comment_id}", content))
        if not self.dry_run:
            super().react(repo, comment_id, content, review_comment=review_comment)

    def comment(self, repo: str, number: int, body: str) -> CommentRef:
        """Record a conversation comment."""
        self.writes.append(Write("comment", f"{repo}#{number}", body))
        if self.dry_run:
            return CommentRef(id=0, html_url="", body=body)
        return super().comment(repo, number, body)

    def edit_comment(self, repo: str, comment_id: int, body: str) -> CommentRef:
        """Record an edit of a conversation comment."""
        self.writes.append(Write("comment edit", f"{repo} comment {comment_id}", body))
        if self.dry_run:
            return CommentRef(id=comment_id, html_url="", body=body)
        return super().edit_comment(repo, comment_id, body)

    def reply_to_review_comment(self, repo: str, number: int, comment_id: int, body: str) -> CommentRef:
        """Record a reply in a review thread."""
        self.writes.append(Write("thread reply", f"{repo}#{number} thread {comment_id}", body))
        if self.dry_run:
            return CommentRef(id=0, html_url="", body=body)
        return super().reply_to_review_comment(repo, number, comment_id, body)

    def review(
        self,
        repo: str,
        number: int,
        *,
        commit_sha: str,
        body: str,
        comments: Sequence[ReviewComment] = (),
        event: Literal["COMMENT", "APPROVE", "REQUEST_CHANGES"] = "COMMENT",
        key: str | None = None,
    ) -> int:
        """Record a review with its inline comments."""
        inline = [
            {"path": c.path, "line": c.line, "start_line": c.start_line, "side": c.side, "body": c.body}
            for c in comments
        ]
        self.writes.append(
            Write(
                "review", f"{repo}#{number} at {commit_sha[:7]}", body, {"event": event, "comments": inline}
            )
        )
        if self.dry_run:
            return 0
        return super().review(
            repo, number, commit_sha=commit_sha, body=body, comments=comments, event=event, key=key
        )

    def create_check_run(
        self,
        repo: str,
        head_sha: str,
        name: str,
        *,
        status: str = "in_progress",
        external_id: str = "",
        **fields: Any,
    ) -> int:
        """Record a new check run."""
        self.writes.append(Write("check run", f"{repo} {name} on {head_sha[:7]}", status))
        if self.dry_run:
            return 0
        return super().create_check_run(
            repo, head_sha, name, status=status, external_id=external_id, **fields
        )

    def update_check_run(self, repo: str, check_run_id: int, **fields: Any) -> None:
        """Record a check run's update (its conclusion and summary)."""
        output = fields.get("output") or {}
        summary = f"{output.get('title', '')}\n\n{output.get('summary', '')}".strip()
        conclusion = {"conclusion": fields.get("conclusion"), "status": fields.get("status")}
        self.writes.append(Write("check run update", f"{repo} check run {check_run_id}", summary, conclusion))
        if not self.dry_run:
            super().update_check_run(repo, check_run_id, **fields)

    def commit_on_branch(
        self,
        repo: str,
        branch: str,
        *,
        expected_head: str,
        headline: str,
        body: str = "",
        additions: dict[str, bytes] | None = None,
        deletions: Sequence[str] = (),
    ) -> Committed | BranchMoved | PushRefused:
        """Record a commit with the diff of each file against ``expected_head``."""
        diffs = {
            path: format_patch(
                path, self.file_text(repo, path, expected_head) or "", data.decode("utf-8", "replace")
            )
            for path, data in (additions or {}).items()
        }
        detail = {
            "headline": headline,
            "expected_head": expected_head,
            "diffs": diffs,
            "deletions": list(deletions),
        }
        self.writes.append(Write("commit", f"{repo}:{branch}", f"{headline}\n\n{body}".strip(), detail))
        if self.dry_run:
            return Committed(oid="0" * 40, url=DRY_RUN_URL)
        result = super().commit_on_branch(
            repo,
            branch,
            expected_head=expected_head,
            headline=headline,
            body=body,
            additions=additions,
            deletions=deletions,
        )
        if isinstance(result, Committed):
            detail["url"] = result.url or result.oid
        return result

    def resolve_thread(self, thread_id: str) -> bool:
        """Record resolving a review thread."""
        self.writes.append(Write("resolve thread", thread_id))
        return True if self.dry_run else super().resolve_thread(thread_id)


@dataclass(frozen=True, slots=True)
class Credentials:
    """A GitHub client for the repository, which installation it is, and who the operator is."""

    github: Github
    installation_id: int
    operator: str


def credentials(settings: Settings, owner: str, repo: str) -> Credentials:
    """Return a client from ``GITHUB_TOKEN``, else from the App's installation on the repository."""
    options: dict[str, Any] = {
        "base_url": settings.github_api_url,
        "retry": default_retry(),
        "seconds_between_requests": 0,
        "seconds_between_writes": 0,
    }
    if settings.github_token is not None:
        github = Github(auth=Auth.Token(settings.github_token.get_secret_value()), **options)
        try:
            # A personal token has a user; an installation token (e.g. Actions' GITHUB_TOKEN) has none.
            operator = str(github.get_user().login)
        except GithubException:
            operator = "spark-cli"
        return Credentials(github, 0, operator)
    if settings.github_app_id is None or settings.github_private_key is None:
        raise SettingsError(
            "set GITHUB_TOKEN, or GITHUB_APP_ID and GITHUB_PRIVATE_KEY (or GITHUB_PRIVATE_KEY_PATH)"
        )
    auth = Auth.AppAuth(settings.github_app_id, settings.github_private_key.get_secret_value())
    integration = GithubIntegration(auth=auth, **options)
    try:
        installation_id = int(integration.get_repo_installation(owner, repo).id)
        operator = f"{integration.get_app().slug}[bot]"
    except GithubException as exc:
        raise GitHubError(exc.status, f"the App is not installed on {owner}/{repo} ({exc.status})") from exc
    finally:
        integration.close()
    return Credentials(
        Github(auth=auth.get_installation_auth(installation_id), **options), installation_id, operator
    )


@contextmanager
def flow_redis(settings: Settings, dry_run: bool) -> Iterator[redis.Redis]:
    """Yield the configured Redis, or on a dry run a throwaway server (nothing of the run is kept)."""
    if dry_run:
        with PrivateRedis() as server:
            conn = redis.Redis.from_url(server.url)
            yield conn
            conn.close()
        return
    conn = connect(settings.redis_url, settings.spark_data_dir, role="review")
    yield conn
    conn.close()


@dataclass
class OneShot:
    """The result of one command-line review or fix."""

    pr: str
    mode: str
    dry_run: bool
    outcome: str
    seconds: float
    writes: list[Write]

    @property
    def ok(self) -> bool:
        """Return whether the flow did its work."""
        return self.outcome in DONE

    def as_json(self) -> dict[str, Any]:
        """Return the machine-readable result."""
        return {**asdict(self), "ok": self.ok}


def review_once(settings: Settings, pr_url: str, *, fix: str | None = None, dry_run: bool = False) -> OneShot:
    """Run one review (or, with ``fix``, one fix) of the pull request, the way a worker would."""
    owner, name, number = parse_pr_url(pr_url)
    creds = credentials(settings, owner, name)
    gh = RecordingInstallation(creds.github, creds.installation_id, dry_run=dry_run, operator=creds.operator)
    ref = PullRequestRef(
        creds.installation_id, owner, name, number, delivery_id=f"cli-{uuid.uuid4().hex[:12]}"
    )
    started = time.perf_counter()
    with ExitStack() as stack:
        conn = stack.enter_context(flow_redis(settings, dry_run))
        clients = ProcessClients(settings, conn)
        stack.callback(clients.close)
        stack.callback(gh.close)
        kind = "review" if fix is None else "fix"
        ctx = JobContext(
            settings=settings,
            redis=conn,
            pr=ref,
            github=gh,
            clients=clients,
            log=structlog.get_logger("spark.cli"),
            # A run that posts is one more job on the pull request: `/spark stop` or a newer fix stops it.
            cancel=CancelToken.never() if dry_run else CancelToken.start(conn, ref.key, kind),
            timings=Timings(),
        )
        stack.enter_context(job_logging(log_fields(ref.as_dict())))
        if fix is None:
            from workers.flows.review import run_review

            outcome = run_review(ctx, "command", full=True)
        else:
            from workers.flows.fix import run_fix

            outcome = run_fix(ctx, _command(gh, ref, fix, creds.operator, dry_run))
    return OneShot(
        pr=f"{owner}/{name}#{number}",
        mode=kind,
        dry_run=dry_run,
        outcome=outcome,
        seconds=round(time.perf_counter() - started, 3),
        writes=gh.writes,
    )


def _command(
    gh: RecordingInstallation, ref: PullRequestRef, text: str, operator: str, dry_run: bool
) -> CommandRef:
    """Return the fix command; outside a dry run, post the comment it answers first."""
    comment_id = 0
    if not dry_run:
        note = f"Requested from the command line: `/spark fix {text}`".replace("\n", " ")
        comment_id = gh.comment(ref.full_name, ref.number, note).id
    return CommandRef(name="fix", text=text, comment_id=comment_id, author=operator)


def render(result: OneShot) -> str:
    """Return what was (or would be) posted, for people."""
    verb = "would post (dry run, nothing was posted)" if result.dry_run else "posted"
    lines = [f"spark {result.mode} {result.pr}: {result.outcome} in {result.seconds:.2f} s; Spark {verb}:"]
    if not result.writes:
        lines.append("  nothing")
    for write in result.writes:
        lines.append(f"\n== {write.kind}: {write.target}")
        if write.body:
            lines.append(write.body.rstrip())
        for item in write.detail.get("comments", []):
            lines.append(f"\n-- inline on {item['path']}:{item['line']}\n{item['body'].rstrip()}")
        for diff in write.detail.get("diffs", {}).values():
            lines.append(diff.rstrip())
    return "\n".join(lines)


def run(settings: Settings, args: argparse.Namespace) -> int:
    """``spark review PR_URL [--fix "instructions"] [--dry-run] [--json]``."""
    parse_pr_url(args.pr_url)  # a bad address is a usage error before anything starts
    settings.require("cerebras_api_key")
    configure_logging(settings)
    # Logs go to stderr so stdout carries only the result (the JSON document with --json).
    structlog.configure(
        logger_factory=structlog.BytesLoggerFactory(sys.stderr.buffer)
        if settings.spark_log_format == "json"
        else structlog.PrintLoggerFactory(sys.stderr)
    )
    try:
        result = review_once(settings, args.pr_url, fix=args.fix, dry_run=args.dry_run)
    except GitHubError as exc:
        print(f"spark review: {exc}", file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(orjson.dumps(result.as_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(render(result))
    return 0 if result.ok else 1
