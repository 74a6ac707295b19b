"""Settings are built once at the edge and name the variable to fix when something is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.settings import Settings, SettingsError


def test_defaults_need_no_environment() -> None:
    settings = Settings.load({}, env_file=None)
    assert settings.redis_url is None
    assert settings.github_api_url == "https://api.github.com"
    assert settings.graphql_url == "https://api.github.com/graphql"


def test_enterprise_graphql_url() -> None:
    settings = Settings.load({"GITHUB_API_URL": "https://ghe.example/api/v3"}, env_file=None)
    assert settings.graphql_url == "https://ghe.example/api/graphql"


def test_bad_url_names_the_variable() -> None:
    with pytest.raises(SettingsError, match="GITHUB_API_URL"):
        Settings.load({"GITHUB_API_URL": "ftp://nope"}, env_file=None)


def test_bad_redis_url_names_the_variable() -> None:
    with pytest.raises(SettingsError, match="REDIS_URL"):
        Settings.load({"REDIS_URL": "http://localhost"}, env_file=None)


def test_unreadable_key_file_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="GITHUB_PRIVATE_KEY_PATH"):
        Settings.load({"GITHUB_PRIVATE_KEY_PATH": str(tmp_path / "missing.pem")}, env_file=None)


def test_web_refuses_to_start_without_secret() -> None:
    with pytest.raises(SettingsError, match="GITHUB_WEBHOOK_SECRET"):
        Settings.load({}, env_file=None).require_web()


def test_worker_names_every_missing_variable() -> None:
    with pytest.raises(SettingsError) as info:
        Settings.load({}, env_file=None).require_worker()
    for name in ("GITHUB_APP_ID", "GITHUB_PRIVATE_KEY", "CEREBRAS_API_KEY"):
        assert name in str(info.value)


def test_garbage_private_key_is_rejected() -> None:
    settings = Settings.load(
        {"GITHUB_APP_ID": "1", "GITHUB_PRIVATE_KEY": "not a key", "CEREBRAS_API_KEY": "k"}, env_file=None
    )
    with pytest.raises(SettingsError, match="not a PEM private key"):
        settings.require_worker()


def test_secrets_never_in_repr() -> None:
    settings = Settings.load(
        {"GITHUB_WEBHOOK_SECRET": "hunter2-secret", "CEREBRAS_API_KEY": "csk-verysecret"}, env_file=None
    )
    assert "hunter2-secret" not in repr(settings)
    assert "csk-verysecret" not in repr(settings)
    assert "hunter2-secret" not in str(settings.model_dump())


def test_env_file_is_read(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("GITHUB_APP_ID=42\nGITHUB_WEBHOOK_SECRET=s3\n")
    settings = Settings.load({}, env_file=env_file)
    assert settings.github_app_id == 42
    assert settings.github_webhook_secret is not None
    assert settings.github_webhook_secret.get_secret_value() == "s3"


def test_an_empty_value_counts_as_unset() -> None:
    settings = Settings.load(
        env={"GITHUB_APP_ID": "", "REDIS_URL": "", "SPARK_CONTEXT_TOKENS": ""}, env_file=None
    )
    assert settings.github_app_id is None
    assert settings.redis_url is None
    assert settings.spark_context_tokens == 32000


def test_forgiving_load_replaces_each_invalid_value_by_its_default() -> None:
    settings, problems = Settings.load_forgiving(
        env={"SPARK_MAX_COMPLETION_TOKENS": "lots", "LOG_LEVEL": "loud", "GITHUB_APP_ID": "7"}, env_file=None
    )
    assert settings.spark_max_completion_tokens == 4096 and settings.log_level == "INFO"
    assert settings.github_app_id == 7
    assert [(p.name, p.default) for p in problems] == [
        ("SPARK_MAX_COMPLETION_TOKENS", 4096),
        ("LOG_LEVEL", "INFO"),
    ]
    assert "'lots'" in problems[0].message


def test_reasoning_effort_per_task_from_the_environment() -> None:
    settings = Settings.load({"SPARK_REASONING_FIX": "none", "SPARK_REASONING_REVIEW": "high"}, env_file=None)
    assert settings.reasoning_efforts() == {
        "fix": "none",
        "ask": "low",
        "describe": "low",
        "review": "high",
        "escalate": "high",
    }
    with pytest.raises(SettingsError, match="SPARK_REASONING_ASK"):
        Settings.load({"SPARK_REASONING_ASK": "maximum"}, env_file=None)
