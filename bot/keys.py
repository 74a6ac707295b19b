"""Every ``spark:*`` Redis key Spark writes, with its TTL or what bounds it: one table.

A key expires (``ttl``, seconds, set or refreshed by every write), or it has no TTL and something else keeps
it small (``bound`` says what). Modules build their keys from these entries; ``unbounded`` finds any key in
a Redis that is neither (a test runs it after the end-to-end flows).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import timedelta

import redis

from bot.redis_server import as_text

DAY = int(timedelta(days=1).total_seconds())


@dataclass(frozen=True, slots=True)
class Key:
    """A key pattern (``{}`` per variable part) and its TTL in seconds, or the bound of a key without one."""

    pattern: str
    ttl: int | None = None
    bound: str = ""

    def __post_init__(self) -> None:
        if (self.ttl is None) == (not self.bound):
            raise ValueError(f"{self.pattern}: give a TTL or say what bounds it, not both or neither")

    def format(self, *parts: object) -> str:
        """Return the key for these variable parts."""
        return self.pattern.format(*parts)

    @property
    def seconds(self) -> int:
        """Return the TTL of a key that expires."""
        if self.ttl is None:
            raise ValueError(f"{self.pattern} does not expire: {self.bound}")
        return self.ttl

    @property
    def prefix(self) -> str:
        """Return the fixed part before the first variable part (keys built by concatenation)."""
        return self.pattern.split("{}", 1)[0]

    @property
    def glob(self) -> str:
        """Return a glob matching every key of this pattern."""
        return self.pattern.replace("{}", "*")


# GitHub redelivers a delivery for 3 days (7 on GHES) with the same id: ids are remembered a little longer.
DELIVERY = Key("spark:delivery:{}", ttl=8 * DAY)
QUEUED = Key(
    "spark:queued",
    bound="one member per queued job not yet started; the workers' reaper removes each once its job started "
    "or is gone (workers.reaper.recover_dropped)",
)
CANCEL = Key("spark:cancel:{}", ttl=7 * DAY)
# A slot lapses after its job's timeout; the set's TTL follows the newest slot (workers.limits).
INSTALLATION_SLOTS = Key("spark:installation:{}:running", ttl=600 + 60 + 1)
# Set while GitHub asked an installation's calls to wait; expires when that wait is over (workers.limits), at
# most the hour of GitHub's primary rate limit.
INSTALLATION_PAUSE = Key("spark:installation:{}:paused", ttl=3600)
# The installation's content-creating GitHub requests of the last hour, shared by every worker
# (workers.limits); at most the hour's budget of members.
INSTALLATION_WRITES = Key("spark:installation:{}:writes", ttl=3600 + 1)
INSTALLATIONS = Key(
    "spark:installations",
    bound="one field per installation, removed when the App is uninstalled or suspended",
)
INSTALLATION_REPOSITORIES = Key(
    "spark:installations:{}",
    bound="the repositories of one installation, removed with it",
)
FIX_STARTED = Key("spark:fix:started:{}", ttl=7 * DAY)
FIX_DONE = Key("spark:fix:done:{}", ttl=7 * DAY)
OWN_COMMIT = Key("spark:own-commit:{}", ttl=7 * DAY)
# Set while Spark commits to a pull request's branch, so the review of that push waits to learn it is Spark's.
COMMITTING = Key("spark:committing:{}", ttl=60)
LEDGER = Key("spark:ledger:{}", ttl=30 * DAY)
REVIEWED = Key("spark:reviewed:{}", ttl=30 * DAY)
SAFE_FIXES = Key("spark:safe-fixes:{}:{}", ttl=30 * DAY)
# The check run a job made on a head (job id, head, check name): "pending" while GitHub creates it, then
# its id (workers.memory.check_runs), so a job that runs again reuses it.
CHECK_RUN = Key("spark:check-run:{}:{}:{}", ttl=DAY)
# The merge gate's memory of a pull request (workers.memory.gate): each published high-severity finding
# (fingerprint -> JSON: severity, file, title, code, fixed), and `_head`: the head whose review completed.
GATE = Key("spark:gate:{}", ttl=30 * DAY)
# A ``/spark review`` author's runs on a PR (one field per comment), a day from the first
# (workers.memory.budgets).
REVIEW_BUDGET = Key("spark:review-budget:{}:{}", ttl=DAY)
# A pull request's session with Spark (workers.memory.session): one JSON document of at most
# bot.core.session.MAX_ENTRIES commands, each trimmed, kept a week from its last write.
SESSION = Key("spark:session:{}", ttl=7 * DAY)
# What Spark last saw of a pull request (workers.memory.last_seen): its head, base and at most 100 changed
# paths.
LAST_SEEN = Key("spark:last-seen:{}", ttl=7 * DAY)
# The pull request a head seen there belongs to ("installation:owner/repo", head SHA -> number): a
# `workflow_job` delivery names no pull request.
HEAD_PR = Key("spark:head-pr:{}:{}", ttl=7 * DAY)
# What the last /spark fix on a pull request read (workers.memory.fix_memory): a small document naming its
# texts (kept in the machine's local store by blob SHA) and the last 20 commenters whose fix passed the
# permission check there.
FIX_MEMORY = Key("spark:fix-memory:{}", ttl=7 * DAY)
# /spark ask and replies in Spark's threads (workers.commands.ask): a command comment's answer (its comment
# id, for exactly-once) and the run that started it; the hour's budgets (one field per command comment) per
# user and per pull request, and the one polite "budget spent" reply per user, pull request and window
# (workers.memory.budgets).
ASK_STARTED = Key("spark:ask:started:{}", ttl=7 * DAY)
ASK_ANSWERED = Key("spark:ask:answered:{}", ttl=7 * DAY)
ASK_BUDGET_USER = Key("spark:ask-budget:user:{}:{}", ttl=3600)
ASK_BUDGET_PR = Key("spark:ask-budget:pr:{}", ttl=3600)
ASK_BUDGET_TOLD = Key("spark:ask-budget:told:{}:{}", ttl=3600)
# Opt in (SPARK_RUN_LOG=N): the last N job runs, for benchmarks and tests that count them (trimmed on write).
JOBS_RAN = Key("spark:jobs:ran", ttl=3600)
# GitHub's manifest flow must finish within an hour.
SETUP_STATE = Key("spark:setup:state:{}", ttl=3600)
SETUP_CONFIGURED = Key("spark:setup:configured", bound="one string: the App id registered through /setup")
# The token `spark serve` prints with the /setup address: the page opens only with it (every web process and
# pod shares this one); a week, then the next start makes a new one.
SETUP_TOKEN = Key("spark:setup:token", ttl=7 * DAY)

# The repository index (bot/index): per machine (its store is local), the commit of a repository indexed last
# (the base of the next incremental update), and the lock that keeps two jobs from building one commit.
INDEXED = Key("spark:indexed:{}:{}", ttl=7 * DAY)
INDEX_BUILD = Key("spark:index-build:{}:{}", ttl=300)

# Failed checks (workers/flows/ci.py): a check run read once (its check_run and workflow_job deliveries both
# queue it); a head's reports (a hash: check name -> report, "_run" -> Spark's CI check run) and the lock that
# serializes writes of its check run; told once per installation how to grant `actions: read`; auto mode's
# one fix per head, the checks Spark's last CI fix was for, its stop said once; a check Spark's commit broke,
# said once.
CI_READ = Key("spark:ci:read:{}:{}:{}", ttl=DAY)
# A head's failed checks as their deliveries are stored (the intake writes them; check run id -> the check as
# JSON): a CI job on that head reads the others' results in its own first round trip.
CI_FAILED = Key("spark:ci:failed:{}", ttl=DAY)
CI_REPORTS = Key("spark:ci:reports:{}:{}", ttl=7 * DAY)
CI_LOCK = Key("spark:ci:lock:{}:{}", ttl=60)
CI_GRANT_TOLD = Key("spark:ci:grant-told:{}", ttl=30 * DAY)
CI_AUTO = Key("spark:ci:auto:{}:{}", ttl=7 * DAY)
CI_FIXED = Key("spark:ci:fixed:{}", ttl=7 * DAY)
CI_STOPPED = Key("spark:ci:stopped:{}:{}", ttl=7 * DAY)
CI_REGRESSION = Key("spark:ci:regression:{}:{}:{}", ttl=7 * DAY)

TABLE: tuple[Key, ...] = (
    DELIVERY,
    QUEUED,
    CANCEL,
    INSTALLATION_SLOTS,
    INSTALLATION_PAUSE,
    INSTALLATION_WRITES,
    INSTALLATIONS,
    INSTALLATION_REPOSITORIES,
    FIX_STARTED,
    FIX_DONE,
    OWN_COMMIT,
    COMMITTING,
    LEDGER,
    REVIEWED,
    SAFE_FIXES,
    CHECK_RUN,
    GATE,
    REVIEW_BUDGET,
    SESSION,
    LAST_SEEN,
    HEAD_PR,
    FIX_MEMORY,
    ASK_STARTED,
    ASK_ANSWERED,
    ASK_BUDGET_USER,
    ASK_BUDGET_PR,
    ASK_BUDGET_TOLD,
    SETUP_STATE,
    SETUP_CONFIGURED,
    SETUP_TOKEN,
    CI_READ,
    CI_FAILED,
    CI_REPORTS,
    CI_LOCK,
    CI_GRANT_TOLD,
    CI_AUTO,
    CI_FIXED,
    CI_STOPPED,
    CI_REGRESSION,
    JOBS_RAN,
    INDEXED,
    INDEX_BUILD,
)


def entry_of(key: str) -> Key | None:
    """Return the table's entry for a concrete key, or None if the key is not Spark's."""
    # The most specific pattern first: ``spark:installations`` must not match ``spark:installations:{}``.
    for entry in sorted(TABLE, key=lambda k: -len(k.pattern)):
        if fnmatch.fnmatchcase(key, entry.glob):
            return entry
    return None


def unbounded(conn: redis.Redis) -> list[str]:
    """Return each ``spark:*`` key that has no TTL and is not a bounded key of the table, or is not listed."""
    found = []
    for raw in conn.scan_iter(match="spark:*", count=1000):
        key = as_text(raw)
        entry = entry_of(key)
        if entry is None:
            found.append(key)
        elif entry.ttl is not None and int(conn.ttl(key)) == -1:
            # -1: no TTL. -2 is a key gone since the scan (a lock released meanwhile): not unbounded.
            found.append(key)
    return sorted(found)
