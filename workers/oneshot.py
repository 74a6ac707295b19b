"""``spark review PR_URL [--fix "instructions"] [--dry-run] [--json]``: one review or fix, from a shell.

It runs the very flows a worker runs (``workers.flows.review.run_review``,
``workers.commands.fix.flow.run_fix``) in this process, with ``GITHUB_TOKEN`` or the App's credentials. The
seam is the GitHub client:
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
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import orjson
import redis
import structlog

from bot.adapters.github import Installation
from bot.adapters.github_app import GitHubApp, token_client, write_limits
from bot.adapters.github_port import GitHubError
from bot.adapters.redacting import RedactingPort
from bot.cancel import CancelToken
from bot.logs import configure_logging
from bot.redis_server import PrivateRedis, connect
from bot.refs import CommandRef, PullRequestRef
from bot.settings import Settings, SettingsError
from workers.context import JobContext, ProcessClients, job_logging, log_fields
from workers.recorder import RecordingInstallation, Write
from workers.timings import Timings

# Outcomes of the flows that mean the work was done (or had nothing to do); anything else exits 1.
DONE = frozenset({"committed", "suggested", "already done", "posted", "nothing new"})
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
class Credentials:
    """A GitHub client for the repository, which installation it is, and who the operator is."""

    client: Installation
    installation_id: int
    operator: str


@contextmanager
def credentials(settings: Settings, owner: str, repo: str) -> Iterator[Credentials]:
    """Yield a client from ``GITHUB_TOKEN``, else from the App's installation on the repository."""
    limits = write_limits(settings)
    if settings.github_token is not None:
        client = token_client(
            settings.github_token.get_secret_value(), base_url=settings.github_api_url, limits=limits
        )
        try:
            # A personal token has a user; an installation token (e.g. Actions' GITHUB_TOKEN) has none.
            yield Credentials(client, 0, client.own_login or "spark-cli")
        finally:
            client.close()
        return
    if settings.github_app_id is None or settings.github_private_key is None:
        raise SettingsError(
            "set GITHUB_TOKEN, or GITHUB_APP_ID and GITHUB_PRIVATE_KEY (or GITHUB_PRIVATE_KEY_PATH)"
        )
    app = GitHubApp.from_settings(settings)
    try:
        try:
            installation_id = app.repo_installation(owner, repo)
            operator = app.bot_login()
        except GitHubError as exc:
            raise GitHubError(
                exc.status, f"the App is not installed on {owner}/{repo} ({exc.status})"
            ) from exc
        yield Credentials(app.installation(installation_id), installation_id, operator)
    finally:
        app.close()


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
    with ExitStack() as stack:
        creds = stack.enter_context(credentials(settings, owner, name))
        gh = RecordingInstallation(creds.client, dry_run=dry_run, operator=creds.operator)
        ref = PullRequestRef(
            creds.installation_id, owner, name, number, delivery_id=f"cli-{uuid.uuid4().hex[:12]}"
        )
        started = time.perf_counter()
        conn = stack.enter_context(flow_redis(settings, dry_run))
        clients = ProcessClients(settings, conn)
        stack.callback(clients.close)
        kind = "review" if fix is None else "fix"
        ctx = JobContext(
            settings=settings,
            redis=conn,
            pr=ref,
            github=RedactingPort(gh, heard=fix or ""),
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
            from workers.commands.fix.flow import run_fix

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
