"""``spark review PR_URL [--fix ...] [--dry-run] [--json]`` through the real flows against both sandboxes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import redis

from bot.redis_server import PrivateRedis
from sandbox.cerebras import ModelSandbox, Script
from sandbox.github import GitHubSandbox
from tests.cli.conftest import Spark

BASE = '"""Small arithmetic helpers."""\n\n\ndef add(a: float, b: float) -> float:\n    return a + b\n'
HEAD = BASE + (
    "\n\ndef average(values: list[float]) -> float:\n"
    '    """Return the arithmetic mean of values."""\n'
    "    return sum(values) / (len(values) - 1)\n"
)
FIX = """src/calc.py
<<<<<<< SEARCH
    return sum(values) / (len(values) - 1)
=======
    return sum(values) / len(values)
>>>>>>> REPLACE
"""
REVIEW = """### FINDING: high: the mean divides by one less than the count
`len(values) - 1` divides by one less than the count, so the mean is too large.
<<<<<<< SEARCH
    return sum(values) / (len(values) - 1)
=======
    return sum(values) / len(values)
>>>>>>> REPLACE
"""


@dataclass
class World:
    github: GitHubSandbox
    model: ModelSandbox
    installation: int
    repo: str
    number: int

    @property
    def url(self) -> str:
        return f"{self.github.url}/{self.repo}/pull/{self.number}"

    def env(self, redis_url: str) -> dict[str, str]:
        return {
            "GITHUB_APP_ID": str(self.github.app_id),
            "GITHUB_PRIVATE_KEY": self.github.private_key_pem,
            "GITHUB_API_URL": self.github.url,
            "CEREBRAS_API_KEY": self.model.api_key,
            "CEREBRAS_BASE_URL": self.model.url,
            "REDIS_URL": redis_url,
            "LOG_LEVEL": "WARNING",
        }


@pytest.fixture()
def world() -> Iterator[World]:
    """A pull request with an off-by-one, and a model scripted to fix and to review it."""
    scripts = [
        Script(FIX, name="fix", path="src/calc.py", command="fix", repeat=True),
        Script(REVIEW, name="review", path="src/calc.py", repeat=True),
    ]
    with GitHubSandbox() as github, ModelSandbox(scripts) as model:
        installation = github.create_installation("acme")
        github.create_repo("acme/calc", {"src/calc.py": BASE}, installation)
        number = github.open_pull_request("acme/calc", "average", {"src/calc.py": HEAD}, author="alice")
        yield World(github, model, installation, "acme/calc", number)


def test_fix_dry_run_prints_the_commit_and_posts_nothing(
    spark: Spark, world: World, redis_server: PrivateRedis
) -> None:
    head = world.github.head_sha(world.repo, world.number)
    code, out, _ = spark(
        world.env(redis_server.url),
        "review",
        world.url,
        "--fix",
        "divide by the count",
        "--dry-run",
        "--json",
    )
    result = json.loads(out)
    assert code == 0, out
    assert result["outcome"] == "committed" and result["dry_run"] and result["mode"] == "fix"
    commit = next(w for w in result["writes"] if w["kind"] == "commit")
    assert commit["target"] == "acme/calc:average"
    assert commit["body"].startswith("Divide by the count")
    diff = commit["detail"]["diffs"]["src/calc.py"]
    assert "-    return sum(values) / (len(values) - 1)\n+    return sum(values) / len(values)\n" in diff
    assert any(w["kind"] == "comment" for w in result["writes"])
    # Nothing reached GitHub: same head, no comments, no reactions; the model was asked once.
    assert world.github.head_sha(world.repo, world.number) == head
    assert world.github.issue_comments(world.repo, world.number) == []
    assert [r.script for r in world.model.requests] == ["fix"]


def test_fix_commits_and_replies_to_its_request_comment(
    spark: Spark, world: World, redis_server: PrivateRedis
) -> None:
    code, out, _ = spark(world.env(redis_server.url), "review", world.url, "--fix", "divide by the count")
    assert code == 0, out
    assert out.startswith("spark fix acme/calc#1: committed")
    assert world.github.file_at(world.repo, "average", "src/calc.py") == HEAD.replace(
        " (len(values) - 1)", " len(values)"
    )
    commits = world.github.commits(world.repo, "average")
    assert commits[0]["verified"] and "Divide by the count" in commits[0]["message"]
    request, reply = world.github.issue_comments(world.repo, world.number)
    assert request["body"].startswith("Requested from the command line: `/spark fix divide by the count`")
    assert str(request["id"]) in commits[0]["message"]  # the trailer links the request comment
    assert reply["body"].startswith("Pushed a fix in ") and commits[0]["sha"] in reply["body"]
    assert "- `src/calc.py` (+1 −1)" in reply["body"]
    assert [content for content, _ in world.github.reactions(request["id"])] == ["eyes", "rocket"]


def test_review_dry_run_shows_the_suggestion(spark: Spark, world: World, redis_server: PrivateRedis) -> None:
    code, out, _ = spark(world.env(redis_server.url), "review", world.url, "--dry-run")
    assert code == 0, out
    assert "would post (dry run, nothing was posted)" in out
    assert "== review: acme/calc#1" in out
    assert "-- inline on src/calc.py:" in out and "```suggestion" in out
    assert world.github.reviews(world.repo, world.number) == []
    assert world.github.check_runs(world.repo) == []


def test_review_with_a_token_posts_the_review(spark: Spark, world: World, redis_server: PrivateRedis) -> None:
    token = world.github.integration().get_access_token(world.installation).token
    env = world.env(redis_server.url)
    for name in ("GITHUB_APP_ID", "GITHUB_PRIVATE_KEY"):
        del env[name]
    code, out, _ = spark(env | {"GITHUB_TOKEN": token}, "review", world.url, "--json")
    result = json.loads(out)
    assert code == 0, out
    assert result["outcome"] == "posted" and not result["dry_run"]
    (review,) = world.github.reviews(world.repo, world.number)
    assert "```suggestion" in json.dumps(review)
    assert [run["conclusion"] for run in world.github.check_runs(world.repo)] == ["neutral"]


def test_model_failure_exits_1_with_the_reason(
    spark: Spark, world: World, redis_server: PrivateRedis
) -> None:
    env = world.env(redis_server.url) | {"CEREBRAS_API_KEY": "wrong"}
    code, out, _ = spark(env, "review", world.url, "--fix", "divide by the count", "--dry-run", "--json")
    result = json.loads(out)
    assert code == 1
    assert result["outcome"] == "failed"
    assert "The model call failed" in next(w["body"] for w in result["writes"] if w["kind"] == "comment")


def test_bad_address_and_missing_credentials_exit_2(
    spark: Spark, world: World, redis_server: PrivateRedis
) -> None:
    code, _, err = spark(world.env(redis_server.url), "review", "https://example.com/nope")
    assert code == 2 and "PR_URL" in err
    env = {"CEREBRAS_API_KEY": "k", "GITHUB_API_URL": world.github.url, "REDIS_URL": redis_server.url}
    code, _, err = spark(env, "review", world.url)
    assert code == 2 and "GITHUB_TOKEN" in err


def test_review_dry_run_with_a_failed_model_call_exits_1_with_the_real_cause(
    spark: Spark, redis_server: PrivateRedis
) -> None:
    """No scripted reply: the sandbox answers 400 with its reason, which the user sees instead of a guess."""
    with GitHubSandbox() as github, ModelSandbox([]) as model:
        installation = github.create_installation("acme")
        github.create_repo("acme/calc", {"src/calc.py": BASE}, installation)
        number = github.open_pull_request("acme/calc", "average", {"src/calc.py": HEAD}, author="alice")
        world = World(github, model, installation, "acme/calc", number)
        code, out, _ = spark(world.env(redis_server.url), "review", world.url, "--dry-run")
    assert code == 1, out
    assert out.startswith("spark review acme/calc#1: model failed")
    assert "too large" not in out
    assert "The model rejected the request: the " in out and "has no scripted reply for this request" in out


# Requests the credentials make outside the flow (minting the installation token), and the GraphQL endpoint,
# whose log entry does not say whether it carried a query (a read) or a mutation.
_NOT_A_FLOW_WRITE = re.compile(r"^/app/installations/\d+/access_tokens$|^/graphql$")
_GRAPHQL_WRITES = {"commit", "resolve thread"}


def _rest_writes(world: World, since: int) -> list[str]:
    """Return the REST writes GitHub received since request ``since`` of its log."""
    return [
        f"{r.method} {r.path}"
        for r in world.github.request_log[since:]
        if r.method != "GET" and not _NOT_A_FLOW_WRITE.match(r.path.split("?")[0])
    ]


@pytest.mark.parametrize("args", [["--fix", "divide by the count"], []], ids=["fix", "review"])
def test_every_write_goes_through_the_port(
    spark: Spark, world: World, redis_server: PrivateRedis, redis_conn: redis.Redis, args: list[str]
) -> None:
    """The recorder sees every write: a dry run sends none, and a real run sends exactly those it recorded.

    ``redis_conn`` empties the database: an earlier test's fix record for the same comment would make it done.
    """
    start = len(world.github.request_log)
    code, out, _ = spark(world.env(redis_server.url), "review", world.url, "--json", "--dry-run", *args)
    dry = json.loads(out)
    assert code == 0, out
    assert dry["writes"] and _rest_writes(world, start) == []
    start = len(world.github.request_log)
    code, out, _ = spark(world.env(redis_server.url), "review", world.url, "--json", *args)
    real = json.loads(out)
    assert code == 0, out
    recorded = [w["kind"] for w in real["writes"] if w["kind"] not in _GRAPHQL_WRITES]
    assert len(_rest_writes(world, start)) == len(recorded) > 0, (recorded, _rest_writes(world, start))
