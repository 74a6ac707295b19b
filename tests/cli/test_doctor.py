"""``spark doctor`` against the local GitHub, Cerebras and a real Redis: each problem named, exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bot.cli.doctor import check_index
from bot.index.store import TEXTS, LocalStore, store_path
from bot.redis_server import PrivateRedis, free_port
from bot.settings import Settings
from sandbox.cerebras import ModelSandbox
from sandbox.github import GitHubSandbox
from sandbox.github.auth import generate_private_key_pem
from tests.cli.conftest import Spark, sandbox_env


def rows(out: str) -> dict[str, dict[str, str]]:
    data = json.loads(out)
    return {row["name"]: row for row in data["checks"]}


def test_all_good(
    spark: Spark, github: GitHubSandbox, model: ModelSandbox, redis_server: PrivateRedis
) -> None:
    code, out, _ = spark(sandbox_env(github, model, redis_server.url), "doctor", "--json")
    checks = rows(out)
    assert code == 0, out
    assert {name: row["status"] for name, row in checks.items()} == {
        "settings": "ok",
        "app id": "ok",
        "private key": "ok",
        "webhook secret": "ok",
        "model api key": "ok",
        "github app": "ok",
        "redis": "ok",
        "index cache": "ok",
        "model": "ok",
    }
    assert f"'{github.app_slug}'" in checks["github app"]["detail"]


def test_the_index_cache_is_reported_with_its_size_and_a_store_over_its_cap_fails(
    spark: Spark, github: GitHubSandbox, model: ModelSandbox, redis_server: PrivateRedis, tmp_path: Path
) -> None:
    settings = Settings.load({"SPARK_DATA_DIR": str(tmp_path), "SPARK_INDEX_MAX_BYTES": "10000000"}, None)
    assert check_index(settings).detail.startswith("empty: ")
    store = LocalStore(store_path(tmp_path), 10_000_000)
    store.put_texts([("a" * 40, "x = 1\n")])
    # Random bytes do not compress: 120 values of 100 KB put 12 MB in a store capped at 10 MB.
    store.put_many(TEXTS, [(f"{n:040d}", os.urandom(100_000)) for n in range(120)])
    row = check_index(settings)
    assert row.status == "ok"  # eviction kept it under its cap
    assert " MB of 10 MB at " in row.detail and "0 indexed files, 0 commits: ok" in row.detail
    store.max_bytes = 10**12  # a writer with a larger cap, or a cap lowered since
    store.put_many(TEXTS, [(f"{n:040d}", os.urandom(100_000)) for n in range(120, 240)])
    assert check_index(settings).status == "fail"
    env = {**sandbox_env(github, model, redis_server.url), "SPARK_DATA_DIR": str(tmp_path)}
    env["SPARK_INDEX_MAX_BYTES"] = "10000000"
    code, out, _ = spark(env, "doctor", "--json")
    assert rows(out)["index cache"]["status"] == "fail"
    assert code == 1


def test_table_says_everything_is_in_place(
    spark: Spark, github: GitHubSandbox, model: ModelSandbox, redis_server: PrivateRedis
) -> None:
    code, out, _ = spark(sandbox_env(github, model, redis_server.url), "doctor")
    assert code == 0
    assert out.splitlines()[0].split() == ["check", "status", "detail"]
    assert "Everything Spark needs is in place." in out


def test_key_of_another_app_fails_get_app(
    spark: Spark, github: GitHubSandbox, model: ModelSandbox, redis_server: PrivateRedis
) -> None:
    env = sandbox_env(github, model, redis_server.url) | {"GITHUB_PRIVATE_KEY": generate_private_key_pem()}
    code, out, _ = spark(env, "doctor")
    assert code == 1
    line = next(line for line in out.splitlines() if line.startswith("github app"))
    assert "FAIL" in line and "401" in line
    assert "- github app: the private key does not belong to GITHUB_APP_ID" in out


def test_unknown_model_is_named_with_the_served_ones(
    spark: Spark, github: GitHubSandbox, model: ModelSandbox, redis_server: PrivateRedis
) -> None:
    env = sandbox_env(github, model, redis_server.url) | {"SPARK_MODEL_DEEP": "no-such-model"}
    code, out, _ = spark(env, "doctor", "--json")
    check = rows(out)["model"]
    assert code == 1
    assert check["status"] == "fail" and "SPARK_MODEL_DEEP=no-such-model" in check["detail"]
    assert "zai-glm-4.7" in check["fix"]


def test_wrong_model_key(
    spark: Spark, github: GitHubSandbox, model: ModelSandbox, redis_server: PrivateRedis
) -> None:
    env = sandbox_env(github, model, redis_server.url) | {"CEREBRAS_API_KEY": "wrong"}
    code, out, _ = spark(env, "doctor", "--json")
    assert code == 1
    assert rows(out)["model"]["fix"] == "CEREBRAS_API_KEY is wrong or revoked"


def test_unreachable_redis(spark: Spark, github: GitHubSandbox, model: ModelSandbox) -> None:
    env = sandbox_env(github, model, f"redis://127.0.0.1:{free_port()}/0")
    code, out, _ = spark(env, "doctor", "--json")
    check = rows(out)["redis"]
    assert code == 1
    assert check["status"] == "fail" and "REDIS_URL" in check["fix"]


def test_missing_secret_and_bad_key_make_config_unusable(
    spark: Spark, github: GitHubSandbox, model: ModelSandbox, redis_server: PrivateRedis
) -> None:
    env = sandbox_env(github, model, redis_server.url)
    del env["GITHUB_WEBHOOK_SECRET"]
    env["GITHUB_PRIVATE_KEY"] = "not a key"
    code, out, _ = spark(env, "doctor", "--json")
    checks = rows(out)
    assert code == 2
    assert (
        checks["webhook secret"]["status"] == "fail"
        and "GITHUB_WEBHOOK_SECRET" in checks["webhook secret"]["fix"]
    )
    assert checks["private key"]["status"] == "fail"
    # GET /app cannot be tried without a usable key: skipped, not reported as a second problem.
    assert checks["github app"]["status"] == "skip"
    assert checks["redis"]["status"] == "ok"


def test_settings_that_do_not_load_exit_2(spark: Spark) -> None:
    code, out, _ = spark({"REDIS_URL": "http://not-redis"}, "doctor", "--json")
    assert code == 2
    checks = rows(out)
    assert checks["REDIS_URL"]["status"] == "fail"
    assert "redis://" in checks["REDIS_URL"]["detail"]
    # Not the embedded server in place of the Redis that was meant.
    assert checks["redis"] == {
        "name": "redis",
        "status": "skip",
        "detail": "needs REDIS_URL first",
        "fix": "",
    }


def test_unreachable_github_fails_fast_with_a_hint(
    spark: Spark, github: GitHubSandbox, model: ModelSandbox, redis_server: PrivateRedis
) -> None:
    env = sandbox_env(github, model, redis_server.url) | {"GITHUB_API_URL": f"http://127.0.0.1:{free_port()}"}
    code, out, _ = spark(env, "doctor", "--json")
    check = rows(out)["github app"]
    assert code == 1
    assert check["status"] == "fail" and check["fix"] == "check GITHUB_API_URL and the network"
