"""What Spark does with each event: small job arguments built at the edge, or a reason to ignore it.

Each handler reads its event's struct (``bot.intake.payloads``) by attribute: the fields it needs were
required when the payload was decoded, so a delivery missing one was refused there with the field's path.
"""

from __future__ import annotations

import json

from bot.core.ci import FAILING
from bot.core.commands import THREAD_REPLY, parse_command
from bot.intake.events import Delivery
from bot.intake.payloads import (
    CheckRunEvent,
    Comment,
    InstallationAccount,
    InstallationEvent,
    InstallationRef,
    InstallationRepositoriesEvent,
    IssueCommentEvent,
    PullRequestEvent,
    RepositoryEvent,
    RepositoryName,
    ReviewComment,
    ReviewCommentEvent,
    User,
    WorkflowJobEvent,
)
from bot.intake.routing import INTERACTIVE, REVIEW, Decision, JobSpec, Router, Signal, ignore, queue
from bot.refs import CheckRef, CommandRef, PullRequestRef, pull_number_of_check_run

router = Router()

NO_INSTALLATION = "not delivered to an App installation (no installation.id)"


def pull_request_ref(
    delivery: Delivery[RepositoryEvent], installation: InstallationRef, number: int, head_sha: str = ""
) -> PullRequestRef:
    """Return the reference to pull request ``number`` of the delivery's repository and installation."""
    repository = delivery.payload.repository
    return PullRequestRef(
        installation_id=installation.id,
        owner=repository.owner.login,
        repo=repository.name,
        number=number,
        head_sha=head_sha,
        delivery_id=delivery.delivery_id,
    )


def written_by_a_bot(comment: Comment, sender: User | None) -> bool:
    """Return whether the comment comes from a bot or an App (Spark's own replies included): no loops."""
    return (
        comment.user.type == "Bot"
        or (sender is not None and sender.type == "Bot")
        or comment.user.login.lower().endswith("[bot]")
        or comment.performed_via_github_app is not None
    )


@router.register("pull_request", PullRequestEvent, "opened", "reopened", "synchronize", "ready_for_review")
def review_pull_request(delivery: Delivery[PullRequestEvent]) -> Decision:
    """A new or updated pull request gets an automatic review."""
    payload = delivery.payload
    if payload.installation is None:
        return ignore(NO_INSTALLATION)
    pull = payload.pull_request
    pr = pull_request_ref(delivery, payload.installation, pull.number, pull.head.sha)
    job = JobSpec("workers.jobs.review", REVIEW, {"pr": pr.as_dict(), "trigger": delivery.action})
    if delivery.action != "synchronize":
        return queue(job)
    # A push makes every job on the old head stale; the review of the new head debounces behind it.
    return queue(job, signals=(Signal("head", pr.key, value=pr.head_sha),))


@router.register("pull_request", PullRequestEvent, "closed")
def cancel_pull_request(delivery: Delivery[PullRequestEvent]) -> Decision:
    """A closed (or merged) pull request stops its queued and running work: a signal, no job."""
    payload = delivery.payload
    if payload.installation is None:
        return ignore(NO_INSTALLATION)
    pull = payload.pull_request
    pr = pull_request_ref(delivery, payload.installation, pull.number, pull.head.sha)
    return queue(signals=(Signal("stop", pr.key),))


def _command_decision(
    delivery: Delivery[IssueCommentEvent] | Delivery[ReviewCommentEvent],
    pr: PullRequestRef,
    pr_author: User | None,
) -> Decision:
    payload = delivery.payload
    comment = payload.comment
    command = parse_command(comment.body)
    thread = comment if isinstance(comment, ReviewComment) else None
    # A plain reply in a review thread may be talking to Spark: the job checks that the thread is Spark's.
    if command is None and (thread is None or thread.in_reply_to_id is None):
        return ignore("comment is not a /spark command")
    if written_by_a_bot(comment, payload.sender):
        return ignore("comment written by a bot")
    ref = CommandRef(
        name=command.name.value if command is not None else THREAD_REPLY,
        text=command.text if command is not None else comment.body,
        comment_id=comment.id,
        author=comment.user.login,
        kind="review_comment" if thread else "issue_comment",
        created_at=comment.created_at or "",
        unknown=command.unknown if command is not None else "",
        path=thread.path if thread else None,
        line=thread.line if thread else None,
        start_line=thread.start_line if thread else None,
        side=thread.side if thread else None,
        # GitHub accepts replies only to a thread's top-level comment.
        thread_id=(thread.in_reply_to_id or thread.id) if thread else None,
    )
    job = JobSpec("workers.jobs.command", INTERACTIVE, {"pr": pr.as_dict(), "command": ref.as_dict()})
    by_pr_author = pr_author is not None and pr_author.login == comment.user.login
    return queue(job, signals=_steering_signals(comment, by_pr_author, pr, ref))


# The one association that implies the right to run any command: the owner of a user's repository (admin).
# MEMBER and COLLABORATOR do not: every org member, and outside collaborators with read or triage access,
# carry them. Their commands ask the running job, which checks permission through the API before obeying.
IMPLIED_ASSOCIATION = "OWNER"
ASKING_ASSOCIATIONS = frozenset({"MEMBER", "COLLABORATOR"})


def _steering_signals(
    comment: Comment, by_pr_author: bool, pr: PullRequestRef, ref: CommandRef
) -> tuple[Signal, ...]:
    """Return the signals a command raises at once: only for those allowed to stop or supersede work.

    ``/spark stop`` stops at once for the owner and the PR's author (both may run it); ``/spark fix``
    supersedes at once only for the owner. Members and collaborators ask, and a running job obeys the ask
    after checking their permission; anyone else's command waits for its own job, which checks it.
    """
    association = comment.author_association or ""
    if ref.name == "stop":
        if association == IMPLIED_ASSOCIATION or by_pr_author:
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


@router.register("issue_comment", IssueCommentEvent, "created")
def pull_request_comment(delivery: Delivery[IssueCommentEvent]) -> Decision:
    """A ``/spark`` comment in a pull request's conversation becomes a command."""
    payload = delivery.payload
    if payload.issue.pull_request is None:
        return ignore("comment is on an issue, not a pull request")
    if payload.installation is None:
        return ignore(NO_INSTALLATION)
    pr = pull_request_ref(delivery, payload.installation, payload.issue.number)
    return _command_decision(delivery, pr, payload.issue.user)


@router.register("pull_request_review_comment", ReviewCommentEvent, "created")
def review_thread_comment(delivery: Delivery[ReviewCommentEvent]) -> Decision:
    """A ``/spark`` comment in a review thread becomes a command on that thread's file and lines."""
    payload = delivery.payload
    if payload.installation is None:
        return ignore(NO_INSTALLATION)
    pull = payload.pull_request
    pr = pull_request_ref(delivery, payload.installation, pull.number, pull.head.sha)
    return _command_decision(delivery, pr, pull.user)


@router.register(
    "installation",
    InstallationEvent,
    "created",
    "deleted",
    "suspend",
    "unsuspend",
    "new_permissions_accepted",
)
def installation_changed(delivery: Delivery[InstallationEvent]) -> Decision:
    """Record or forget an installation."""
    payload = delivery.payload
    return _installation_job(delivery.action, payload.installation, payload.repositories)


@router.register("installation_repositories", InstallationRepositoriesEvent, "added", "removed")
def installation_repositories_changed(delivery: Delivery[InstallationRepositoriesEvent]) -> Decision:
    """Record or forget the repositories an installation covers."""
    payload = delivery.payload
    changed = payload.repositories_added if delivery.action == "added" else payload.repositories_removed
    return _installation_job(delivery.action, payload.installation, changed)


def _installation_job(
    action: str, installation: InstallationAccount, repositories: list[RepositoryName]
) -> Decision:
    kwargs = {
        "installation_id": installation.id,
        "action": action,
        "account": installation.account.login,
        "repositories": [repository.full_name for repository in repositories],
    }
    return queue(JobSpec("workers.jobs.installation", INTERACTIVE, kwargs))


@router.register("check_run", CheckRunEvent, "rerequested", "requested_action")
def rerun_check(delivery: Delivery[CheckRunEvent]) -> Decision:
    """A re-run request (or the check run's button) on Spark's check re-runs the review or applies fixes."""
    payload = delivery.payload
    if payload.installation is None:
        return ignore(NO_INSTALLATION)
    run = payload.check_run
    pulls = run.pull_requests
    number = pulls[0].get("number") if pulls and isinstance(pulls[0], dict) else None
    if not pulls:
        # A fork's head: GitHub lists no pull request, Spark's run names its own in `external_id`.
        number = pull_number_of_check_run(run.external_id or "")
    # bool is an int in Python: a "number": true is not a pull request number.
    if not isinstance(number, int) or isinstance(number, bool):
        return ignore("check run is not attached to a pull request")
    pr = pull_request_ref(delivery, payload.installation, number, run.head_sha)
    kwargs = {
        "pr": pr.as_dict(),
        "check_run_id": run.id,
        "action": delivery.action,
        "identifier": (payload.requested_action and payload.requested_action.identifier) or "",
        # Who pressed the button (a fix it asks for names them).
        "requester": payload.sender.login if payload.sender is not None else "",
    }
    return queue(JobSpec("workers.jobs.check_run", INTERACTIVE, kwargs))


# Jobs GitHub Actions runs: their check runs are owned by this App, and the job's id is the check run's.
ACTIONS_APP = "github-actions"


@router.register("check_run", CheckRunEvent, "completed")
def check_completed(delivery: Delivery[CheckRunEvent]) -> Decision:
    """A check that failed on a pull request's head: Spark reads what failed and offers (or makes) the fix."""
    payload = delivery.payload
    if payload.installation is None:
        return ignore(NO_INSTALLATION)
    run = payload.check_run
    if run.conclusion not in FAILING:
        return ignore(f"check run concluded {run.conclusion!r}, not a failure")
    if pull_number_of_check_run(run.external_id or "") is not None:
        return ignore("Spark's own check run")
    pulls = run.pull_requests
    number = pulls[0].get("number") if pulls and isinstance(pulls[0], dict) else None
    if not isinstance(number, int) or isinstance(number, bool):
        # GitHub lists no pull request for a fork's head (https://docs.github.com/rest/checks/runs).
        return ignore("check run is not attached to a pull request")
    check = CheckRef(
        run.id, run.name, run.conclusion or "", actions_job=bool(run.app and run.app.slug == ACTIONS_APP)
    )
    pr = pull_request_ref(delivery, payload.installation, number, run.head_sha)
    return _ci_failure(pr, check)


@router.register("workflow_job", WorkflowJobEvent, "completed")
def job_completed(delivery: Delivery[WorkflowJobEvent]) -> Decision:
    """A failed Actions job: which steps failed. It names no pull request; its check run (same id) does, and
    whichever of the two deliveries a worker takes first reads the failure once."""
    payload = delivery.payload
    if payload.installation is None:
        return ignore(NO_INSTALLATION)
    job = payload.workflow_job
    if job.conclusion not in FAILING:
        return ignore(f"job concluded {job.conclusion!r}, not a failure")
    steps = "\n".join(step.name for step in job.steps if step.conclusion in FAILING)
    check = CheckRef(job.id, job.name, job.conclusion or "", actions_job=True, failed_steps=steps)
    # Number 0: the worker finds the pull request from the job's check run.
    pr = pull_request_ref(delivery, payload.installation, 0, job.head_sha)
    return _ci_failure(pr, check)


def _ci_failure(pr: PullRequestRef, check: CheckRef) -> Decision:
    """The job that reads a failed check; the check noted on its head at once, for a CI job on that head
    whose fix takes in every check failed by then (``workers.flows.ci``)."""
    noted = Signal("check-failed", pr.head_key, value=check.check_run_id, data=json.dumps(check.as_dict()))
    return queue(
        JobSpec("workers.jobs.ci_failure", INTERACTIVE, {"pr": pr.as_dict(), "check": check.as_dict()}),
        signals=(noted,),
    )
