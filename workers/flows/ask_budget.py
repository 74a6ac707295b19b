"""The hour's budgets of ``/spark ask`` and thread replies: per user and per pull request, one polite reply.

Anyone who can comment may ask, so each question is counted, atomically, against the asker's budget in the
installation and the pull request's (``ask.user_budget``, ``ask.pr_budget`` in ``.github/spark.yml``). Once
one is spent, Spark says so once per user and pull request in that hour, and stays quiet after.
"""

from __future__ import annotations

from bot import keys
from bot.core.config import RepoConfig
from bot.core.wording import plural
from bot.refs import CommandRef
from workers.context import JobContext

# Count one command against both hourly budgets, atomically: a re-run of the same comment counts once.
# Returns 0 (within budget), 1 (the user's spent) or 2 (the pull request's spent).
_SPEND = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[2]) then return 1 end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[3]) then return 2 end
redis.call('HSET', KEYS[1], ARGV[1], '1')
redis.call('EXPIRE', KEYS[1], ARGV[4], 'NX')
redis.call('HSET', KEYS[2], ARGV[1], '1')
redis.call('EXPIRE', KEYS[2], ARGV[4], 'NX')
return 0
"""


def spend_budget(ctx: JobContext, command: CommandRef, config: RepoConfig) -> str | None:
    """Count the command against the hour's budgets; return None within them, else the polite reply to post
    ("" when it was posted already in this window: one per user and pull request, not one per comment)."""
    user_key = keys.ASK_BUDGET_USER.format(ctx.pr.installation_id, command.author)
    pr_key = keys.ASK_BUDGET_PR.format(ctx.pr.key)
    args = (
        str(command.comment_id),
        config.ask_user_budget,
        config.ask_pr_budget,
        keys.ASK_BUDGET_USER.seconds,
    )
    which = int(ctx.redis.register_script(_SPEND)(keys=[user_key, pr_key], args=args))
    if which == 0:
        return None
    spent_key = user_key if which == 1 else pr_key
    left = max(1, int(ctx.redis.ttl(spent_key)))
    told = ctx.redis.set(keys.ASK_BUDGET_TOLD.format(ctx.pr.key, command.author), "1", nx=True, ex=left)
    ctx.log.info("ask.over_budget", scope="user" if which == 1 else "pr", told=bool(told))
    if not told:
        return ""
    minutes = max(1, round(left / 60))
    if which == 1:
        what = (
            f"you have used the {config.ask_user_budget} questions each person may ask Spark in an hour "
            "(`ask.user_budget` in `.github/spark.yml`)"
        )
    else:
        what = (
            f"this pull request has used the {config.ask_pr_budget} questions it may take in an hour "
            "(`ask.pr_budget` in `.github/spark.yml`)"
        )
    return (
        f"Sorry @{command.author}, {what}. I will answer again in about {plural(minutes, 'minute')}; "
        "until then I will not reply to each question."
    )
