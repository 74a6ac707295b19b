"""The budgets a person spends on a pull request: questions in the hour, ``/spark review`` runs in the day.

Anyone who can comment may ask, so each question is counted, atomically, against the asker's budget in the
installation and the pull request's (``ask.user_budget``, ``ask.pr_budget`` in ``.github/spark.yml``). Once
one is spent, Spark says so once per user and pull request in that hour, and stays quiet after. Each
``/spark review`` costs a model call per file, so its runs are counted per author and pull request in a day.
Every count is kept per comment: a re-run of the same job counts once.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from bot import keys

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


@dataclass(frozen=True, slots=True)
class Spent:
    """A question over budget: whose budget (the asker's, or the pull request's), the seconds until it
    renews, and whether this is the window's first such question (the one Spark tells)."""

    user: bool
    seconds_left: int
    tell: bool


def spend_question(
    conn: redis.Redis,
    installation_id: int,
    pr_key: str,
    author: str,
    comment_id: int,
    budgets: tuple[int, int],
) -> Spent | None:
    """Count a question against the hour's ``budgets`` (per user, per pull request); None within them."""
    user_key = keys.ASK_BUDGET_USER.format(installation_id, author)
    pr_key_budget = keys.ASK_BUDGET_PR.format(pr_key)
    args = (str(comment_id), budgets[0], budgets[1], keys.ASK_BUDGET_USER.seconds)
    which = int(conn.register_script(_SPEND)(keys=[user_key, pr_key_budget], args=args))
    if which == 0:
        return None
    left = max(1, int(conn.ttl(user_key if which == 1 else pr_key_budget)))
    told = conn.set(keys.ASK_BUDGET_TOLD.format(pr_key, author), "1", nx=True, ex=left)
    return Spent(user=which == 1, seconds_left=left, tell=bool(told))


def spend_review(conn: redis.Redis, pr_key: str, author: str, comment_id: int, budget: int) -> bool:
    """Count a ``/spark review`` against its author's daily ``budget`` on the pull request; return whether
    it is within it (the hash expires a day after the author's first run)."""
    key = keys.REVIEW_BUDGET.format(pr_key, author)
    with conn.pipeline() as pipe:
        pipe.hsetnx(key, str(comment_id), "1")
        pipe.expire(key, keys.REVIEW_BUDGET.seconds, nx=True)
        pipe.hlen(key)
        _, _, used = pipe.execute()
    return int(used) <= budget
