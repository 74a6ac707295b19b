"""``/spark review``: a full review of the head now, within its author's daily budget on the pull request;
when it posts no review, a reply says why."""

from __future__ import annotations

from typing import Any

from bot.adapters.github_port import Reaction
from bot.refs import CommandRef
from workers.commands.command import Command
from workers.context import JobContext
from workers.flows.gate import CHECK_NAME
from workers.flows.repo_config import load_repo_config
from workers.flows.review import run_review
from workers.flows.steering import start_steering
from workers.memory.budgets import spend_review
from workers.reply import Reply

HELP = "`/spark review`: review the whole pull request now"

# What ``/spark review`` replies when it posts no review: the person who asked hears back either way.
REQUESTED_OUTCOMES = {
    "nothing new": "Reviewed the latest commit: no new findings (any earlier ones stay in their threads). "
    f"The **{CHECK_NAME}** check run lists what was reviewed.",
    "model failed": "I could not review every file: the model did not answer for some of them. The "
    f"**{CHECK_NAME}** check run says which; ask again with `/spark review` in a minute.",
    "failed": "I could not review this pull request: the model call failed. Please ask again with "
    "`/spark review` in a minute.",
    "cancelled": "The review was stopped before it posted anything.",
    "closed": "This pull request is closed: there is nothing to review.",
}


def run(pr: dict[str, Any], ref: CommandRef) -> str:
    """Review every file of the head again (the PR's author and maintainers), or say the budget is spent."""
    ctx = start_steering(pr, ref)
    if ctx is None:
        return "refused"
    reply = Reply(ctx, ref, ref.name)
    pull = ctx.github.pull(ctx.repo, ctx.pr.number)
    budget = load_repo_config(ctx.github, pull.base_repo, pull.base_ref).config.review_budget
    if not spend_review(ctx.redis, ctx.pr.key, ref.author, ref.comment_id, budget):
        reply.post(
            f"Sorry @{ref.author}, you have used the {budget} `/spark review` run(s) each person may ask "
            "for on this pull request in a day (`review.command_budget` in `.github/spark.yml`). The "
            "automatic review still runs on every push; please try again tomorrow."
        )
        return "over budget"
    reply.react("eyes")
    return review_on_request(ctx, ref)


def review_on_request(ctx: JobContext, command: CommandRef) -> str:
    """Review the head in full now; when it posts no review, reply why."""
    result = run_review(ctx, "command", full=True)
    if result != "posted":
        text = REQUESTED_OUTCOMES.get(result, f"The review ended without posting anything ({result}).")
        reaction: Reaction | None = "rocket" if result == "nothing new" else None
        Reply(ctx, command, "review").post(f"@{command.author} {text}", reaction=reaction)
    return result


COMMAND = Command("review", HELP, run)
