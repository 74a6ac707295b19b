"""What Spark does with each event: small job arguments built at the edge, or a reason to ignore it."""

from __future__ import annotations

from bot.core.commands import parse_command
from bot.intake.events import Delivery
from bot.intake.routing import INTERACTIVE, REVIEW, Decision, JobSpec, Router, Signal, ignore, queue
from bot.refs import CommandRef, PullRequestRef, pull_number_of_check_run

router = Router()

NO_INSTALLATION = "not delivered to an App installation (no installation.id)"


def pull_request_ref(delivery: Delivery, number: int, head_sha: str = "") -> PullRequestRef:
    """Return the reference to pull request ``number`` of the delivery's repository and installation."""
    return PullRequestRef(
        installation_id=delivery.get("installation.id", int),
        owner=delivery.get("repository.owner.login", str),
        repo=delivery.get("repository.name", str),
        number=number,
        head_sha=head_sha,
        delivery_id=delivery.delivery_id,
    )


def written_by_a_bot(delivery: Delivery) -> bool:
    """Return whether the comment comes from a bot or an App (Spark's own replies included): no loops."""
    user_type = delivery.optional("comment.user.type", str)
    login = delivery.optional("comment.user.login", str) or ""
    return (
        user_type == "Bot"
        or delivery.optional("sender.type", str) == "Bot"
        or login.lower().endswith("[bot]")
        or delivery.optional("comment.performed_via_github_app", dict) is not None
    )


def _installed(delivery: Delivery) -> bool:
    return delivery.optional("installation.id", int) is not None


@router.register("pull_request", "opened", "reopened", "synchronize", "ready_for_review")
def review_pull_request(delivery: Delivery) -> Decision:
    """A new or updated pull request gets an automatic review."""
    if not _installed(delivery):
        return ignore(NO_INSTALLATION)
    pr = pull_request_ref(
        delivery, delivery.get("pull_request.number", int), delivery.get("pull_request.head.sha", str)
    )
    job = JobSpec("workers.jobs.review", REVIEW, {"pr": pr.as_dict(), "trigger": delivery.action})
    if delivery.action != "synchronize":
        return queue(job)
    # A push makes every job on the old head stale; the review of the new head debounces behind it.
    return queue(job, signals=(Signal("head", pr.key, value=pr.head_sha),))


@router.register("pull_request", "closed")
def cancel_pull_request(delivery: Delivery) -> Decision:
    """A closed (or merged) pull request stops its queued and running work: a signal, no job."""
    if not _installed(delivery):
        return ignore(NO_INSTALLATION)
    pr = pull_request_ref(
        delivery, delivery.get("pull_request.number", int), delivery.get("pull_request.head.sha", str)
    )
    return queue(signals=(Signal("stop", pr.key),))


def _command_decision(delivery: Delivery, pr: PullRequestRef, kind: str) -> Decision:
    command = parse_command(delivery.get("comment.body", str))
    if command is None:
        return ignore("comment is not a /spark command")
    if written_by_a_bot(delivery):
        return ignore("comment written by a bot")
    comment_id = delivery.get("comment.id", int)
    in_thread = kind == "review_comment"
    ref = CommandRef(
        name=command.name.value,
        text=command.text,
        comment_id=comment_id,
        author=delivery.get("comment.user.login", str),
        kind=kind,
        created_at=delivery.optional("comment.created_at", str) or "",
        unknown=command.unknown,
        path=delivery.get("comment.path", str) if in_thread else None,
        line=delivery.optional("comment.line", int) if in_thread else None,
        start_line=delivery.optional("comment.start_line", int) if in_thread else None,
        side=delivery.optional("comment.side", str) if in_thread else None,
        # GitHub accepts replies only to a thread's top-level comment.
        thread_id=(delivery.optional("comment.in_reply_to_id", int) or comment_id) if in_thread else None,
    )
    job = JobSpec("workers.jobs.command", INTERACTIVE, {"pr": pr.as_dict(), "command": ref.as_dict()})
    return queue(job, signals=_steering_signals(delivery, kind, pr, ref))


# The one association that implies the right to run any command: the owner of a user's repository (admin).
# MEMBER and COLLABORATOR do not: every org member, and outside collaborators with read or triage access,
# carry them. Their commands ask the running job, which checks permission through the API before obeying.
IMPLIED_ASSOCIATION = "OWNER"
ASKING_ASSOCIATIONS = frozenset({"MEMBER", "COLLABORATOR"})


def _steering_signals(
    delivery: Delivery, kind: str, pr: PullRequestRef, ref: CommandRef
) -> tuple[Signal, ...]:
    """Return the signals a command raises at once: only for those allowed to stop or supersede work.

    ``/spark stop`` stops at once for the owner and the PR's author (both may run it); ``/spark fix``
    supersedes at once only for the owner. Members and collaborators ask, and a running job obeys the ask
    after checking their permission; anyone else's command waits for its own job, which checks it.
    """
    association = delivery.optional("comment.author_association", str) or ""
    if ref.name == "stop":
        if association == IMPLIED_ASSOCIATION or _is_pr_author(delivery, kind):
            return (Signal("stop", pr.key, by=ref.author),)
        if association in ASKING_ASSOCIATIONS:
            return (Signal("ask-stop", pr.key, by=ref.author),)
    if ref.name == "fix":
        # The comment id orders fixes: a newer `/spark fix` makes the running one stale.
        if association == IMPLIED_ASSOCIATION:
            return (Signal("supersede", pr.key, job_kind="fix", value=ref.comment_id, by=ref.author),)
        if association in ASKING_ASSOCIATIONS:
            return (Signal("ask-supersede", pr.key, job_kind="fix", value=ref.comment_id, by=ref.author),)
    return ()


def _is_pr_author(delivery: Delivery, kind: str) -> bool:
    """Return whether the commenter opened the pull request (from the signed payload)."""
    pr_author = "issue.user.login" if kind == "issue_comment" else "pull_request.user.login"
    author = delivery.optional(pr_author, str)
    return author is not None and author == delivery.optional("comment.user.login", str)


@router.register("issue_comment", "created")
def pull_request_comment(delivery: Delivery) -> Decision:
    """A ``/spark`` comment in a pull request's conversation becomes a command."""
    if delivery.optional("issue.pull_request", dict) is None:
        return ignore("comment is on an issue, not a pull request")
    if not _installed(delivery):
        return ignore(NO_INSTALLATION)
    pr = pull_request_ref(delivery, delivery.get("issue.number", int))
    return _command_decision(delivery, pr, "issue_comment")


@router.register("pull_request_review_comment", "created")
def review_thread_comment(delivery: Delivery) -> Decision:
    """A ``/spark`` comment in a review thread becomes a command on that thread's file and lines."""
    if not _installed(delivery):
        return ignore(NO_INSTALLATION)
    pr = pull_request_ref(
        delivery, delivery.get("pull_request.number", int), delivery.get("pull_request.head.sha", str)
    )
    return _command_decision(delivery, pr, "review_comment")


def _repository_names(delivery: Delivery, path: str) -> list[str]:
    repositories = delivery.optional(path, list) or []
    return [
        r["full_name"] for r in repositories if isinstance(r, dict) and isinstance(r.get("full_name"), str)
    ]


@router.register("installation", "created", "deleted", "suspend", "unsuspend", "new_permissions_accepted")
def installation_changed(delivery: Delivery) -> Decision:
    """Record or forget an installation."""
    return _installation_job(delivery, _repository_names(delivery, "repositories"))


@router.register("installation_repositories", "added", "removed")
def installation_repositories_changed(delivery: Delivery) -> Decision:
    """Record or forget the repositories an installation covers."""
    return _installation_job(delivery, _repository_names(delivery, f"repositories_{delivery.action}"))


def _installation_job(delivery: Delivery, repositories: list[str]) -> Decision:
    kwargs = {
        "installation_id": delivery.get("installation.id", int),
        "action": delivery.action,
        "account": delivery.get("installation.account.login", str),
        "repositories": repositories,
    }
    return queue(JobSpec("workers.jobs.installation", INTERACTIVE, kwargs))


@router.register("check_run", "rerequested", "requested_action")
def rerun_check(delivery: Delivery) -> Decision:
    """A re-run request (or the check run's button) on Spark's check re-runs the review or applies fixes."""
    if not _installed(delivery):
        return ignore(NO_INSTALLATION)
    pulls = delivery.optional("check_run.pull_requests", list) or []
    number = pulls[0].get("number") if pulls and isinstance(pulls[0], dict) else None
    if not pulls:
        # A fork's head: GitHub lists no pull request, Spark's run names its own in `external_id`.
        number = pull_number_of_check_run(delivery.optional("check_run.external_id", str) or "")
    # bool is an int in Python: a "number": true is not a pull request number.
    if not isinstance(number, int) or isinstance(number, bool):
        return ignore("check run is not attached to a pull request")
    pr = pull_request_ref(delivery, number, delivery.get("check_run.head_sha", str))
    kwargs = {
        "pr": pr.as_dict(),
        "check_run_id": delivery.get("check_run.id", int),
        "action": delivery.action,
        "identifier": delivery.optional("requested_action.identifier", str) or "",
    }
    return queue(JobSpec("workers.jobs.check_run", INTERACTIVE, kwargs))
