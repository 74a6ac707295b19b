"""The one typed settings object, built from the environment (and an optional ``.env``) at the edge.

Nothing else in Spark reads the environment: ``Settings.load()`` is called by the CLI, ``create_app`` and the
worker, and the object is passed down from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.core.reasoning import DEFAULT_EFFORTS, TASKS, Effort, Task

# GitHub stops sending payloads above 25 MB; anything larger is not a delivery.
MAX_WEBHOOK_BODY_BYTES = 25 * 1024 * 1024
# Shorter values are not masked in output by value (a one-letter test secret would mask every "a").
MIN_SECRET_CHARS = 4


class SettingsError(Exception):
    """A misconfiguration, with a message that names the variable to fix."""


def redact_url(url: str) -> str:
    """Return ``url`` with its password (``scheme://user:PASSWORD@host``) shown as ``***``."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # a malformed port or address: show no part of what may follow the scheme
        return url.partition("://")[0] + "://***"
    if not password:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _check_url(name: str, value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{name} must be an http(s) URL, got {redact_url(value)!r}")
    return value.rstrip("/")


class Settings(BaseSettings):
    """Every knob Spark has, typed; secrets are ``SecretStr`` so they never show in logs or reprs."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        frozen=True,
    )

    # GitHub App identity.
    github_app_id: int | None = None
    github_private_key: SecretStr | None = None
    github_private_key_path: Path | None = None
    github_webhook_secret: SecretStr | None = None
    github_api_url: str = "https://api.github.com"
    # For GitHub Enterprise this is https://HOST; the manifest flow posts to {github_url}/settings/apps/new.
    github_url: str = "https://github.com"
    # A personal/installation token for `spark review PR_URL` outside an App installation.
    github_token: SecretStr | None = None

    # Queue. Unset: every Spark process joins the one embedded Redis of spark_data_dir (bot/redis_server.py).
    redis_url: str | None = None
    spark_data_dir: Path = Path(".spark")
    # How long `spark worker` waits for a Redis that does not answer yet before it exits.
    spark_redis_wait_seconds: float = Field(default=60.0, ge=0)

    # Model.
    cerebras_api_key: SecretStr | None = None
    cerebras_base_url: str = "https://api.cerebras.ai"
    spark_model_fast: str = "gpt-oss-120b"
    spark_model_deep: str = "zai-glm-4.7"
    spark_max_completion_tokens: int = Field(default=4096, ge=256, le=65536)
    spark_context_tokens: int = Field(default=32000, ge=2048)
    spark_model_timeout_seconds: float = Field(default=30.0, gt=0)
    # Reasoning effort per task (none, low, medium, high); `.github/spark.yml`'s `reasoning:` overrides each.
    spark_reasoning_fix: Effort = DEFAULT_EFFORTS["fix"]
    spark_reasoning_ask: Effort = DEFAULT_EFFORTS["ask"]
    spark_reasoning_describe: Effort = DEFAULT_EFFORTS["describe"]
    spark_reasoning_review: Effort = DEFAULT_EFFORTS["review"]
    spark_reasoning_escalate: Effort = DEFAULT_EFFORTS["escalate"]

    # Set by the Helm chart: /setup then explains how to keep the App's credentials in a Kubernetes Secret.
    spark_helm_release: str | None = None
    spark_helm_namespace: str = "default"

    # Runtime.
    log_level: str = "INFO"
    spark_log_format: str = "json"
    spark_max_body_bytes: int = Field(default=MAX_WEBHOOK_BODY_BYTES, ge=1024)
    spark_review_debounce_seconds: float = Field(default=3.0, ge=0)
    # Files of one review whose model calls run at once (Cerebras' request and token quotas bound this).
    spark_review_concurrency: int = Field(default=48, ge=1, le=256)
    spark_installation_job_limit: int = Field(default=8, ge=1)
    # GitHub's content-creation limits per installation, and how long a job waits in place for a rate limit
    # before it is deferred; a limit answer naming no time is waited out for at least the secondary wait.
    spark_github_writes_per_minute: int = Field(default=80, ge=1)
    spark_github_writes_per_hour: int = Field(default=500, ge=1)
    spark_github_max_inline_wait_seconds: float = Field(default=10.0, ge=0)
    spark_github_secondary_wait_seconds: float = Field(default=60.0, ge=0)
    # The repository index (bot/index): the machine's store on disk under spark_data_dir, capped (bytes,
    # least recently used evicted first); how long a review or fix waits for an index being built before it
    # goes on without it; the largest file indexed.
    spark_index_max_bytes: int = Field(default=2_000_000_000, ge=10_000_000)
    spark_index_wait_seconds: float = Field(default=1.5, ge=0)
    spark_index_max_file_bytes: int = Field(default=1_000_000, ge=1000)
    # Off in production: benchmarks and tests that count job runs turn it on (see bot.keys.JOBS_RAN).
    spark_run_log: int = Field(default=0, ge=0, le=1_000_000)

    @model_validator(mode="before")
    @classmethod
    def _empty_is_unset(cls, data: Any) -> Any:
        # `GITHUB_APP_ID=` in a .env (a template filled in halfway) means "not set", for every variable.
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value != ""}
        return data

    @field_validator("github_api_url", "github_url", "cerebras_base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _check_url("URL", value)

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        assert value is not None
        if urlsplit(value).scheme not in ("redis", "rediss", "unix"):
            raise ValueError(f"must start with redis://, rediss:// or unix://, got {redact_url(value)!r}")
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        level = value.upper()
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ValueError(f"must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got {value!r}")
        return level

    @model_validator(mode="after")
    def _read_private_key_file(self) -> Settings:
        if self.github_private_key is None and self.github_private_key_path is not None:
            try:
                text = self.github_private_key_path.read_text()
            except OSError as exc:
                raise ValueError(
                    f"GITHUB_PRIVATE_KEY_PATH: cannot read {self.github_private_key_path}: {exc.strerror}"
                ) from exc
            object.__setattr__(self, "github_private_key", SecretStr(text))
        return self

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, env_file: str | Path | None = ".env") -> Settings:
        """Build settings from ``env`` (default: the process environment) and ``env_file``.

        Raises ``SettingsError`` whose message names each variable to fix.
        """
        kwargs: dict[str, Any] = {"_env_file": env_file}
        try:
            if env is None:
                return cls(**kwargs)
            # Explicit values (tests, the demo) win over the process environment and the env file.
            values: dict[str, Any] = {k.lower(): v for k, v in env.items() if k.lower() in cls.model_fields}
            return cls(**kwargs, **values)
        except ValidationError as exc:
            raise SettingsError(_explain(exc)) from None

    @classmethod
    def load_forgiving(
        cls, env: Mapping[str, str] | None = None, env_file: str | Path | None = ".env"
    ) -> tuple[Settings, list[Problem]]:
        """Build settings with each invalid variable replaced by its default; return them and the problems.

        For ``spark doctor``, which must show every other check even when one value is wrong.
        """
        overrides: dict[str, Any] = {}
        problems: list[Problem] = []
        kwargs: dict[str, Any] = {"_env_file": env_file}
        explicit = (
            {} if env is None else {k.lower(): v for k, v in env.items() if k.lower() in cls.model_fields}
        )
        for _ in range(len(cls.model_fields) + 1):
            try:
                return cls(**kwargs, **(explicit | overrides)), problems
            except ValidationError as exc:
                for error in exc.errors():
                    field, message = _field_of(error)
                    # Only a variable's own value is quoted, never a secret's: a check of the whole model
                    # (the key file) has every setting, secrets included, as its input.
                    if error["loc"] and "got " not in message and not _is_secret(field):
                        message += f" (got {_quoted(error.get('input'))})"
                    if field in overrides or field not in cls.model_fields:
                        raise SettingsError(_explain(exc)) from None
                    default = cls.model_fields[field].default
                    overrides[field] = default
                    problems.append(Problem(field.upper(), message, default))
        raise SettingsError("invalid configuration")

    def secret_values(self) -> list[str]:
        """Return every secret value set (and the Redis URL's password): what no output may carry."""
        values = [
            getattr(self, name).get_secret_value()
            for name in type(self).model_fields
            if _is_secret(name) and getattr(self, name) is not None
        ]
        if self.redis_url:
            values.append(urlsplit(self.redis_url).password or "")
        return [value for value in values if len(value) >= MIN_SECRET_CHARS]

    def reasoning_efforts(self) -> dict[Task, Effort]:
        """Return the deployment's reasoning effort per task (``SPARK_REASONING_<TASK>``)."""
        return {task: getattr(self, f"spark_reasoning_{task}") for task in TASKS}

    @property
    def graphql_url(self) -> str:
        """Return GitHub's GraphQL endpoint for the configured REST base URL."""
        base = self.github_api_url
        if base.endswith("/api/v3"):
            return base[: -len("/v3")] + "/graphql"
        return base + "/graphql"

    def require(self, *names: str) -> None:
        """Raise ``SettingsError`` naming every listed setting that is unset."""
        missing = [name.upper() for name in names if getattr(self, name) in (None, "")]
        if "github_private_key" in names and "GITHUB_PRIVATE_KEY" in missing:
            missing[missing.index("GITHUB_PRIVATE_KEY")] = "GITHUB_PRIVATE_KEY (or GITHUB_PRIVATE_KEY_PATH)"
        if missing:
            setting = "setting" if len(missing) == 1 else "settings"
            raise SettingsError(f"missing required {setting}: " + ", ".join(missing))

    def require_web(self) -> None:
        """Check what the webhook receiver needs: verification is never silently off."""
        self.require("github_webhook_secret")

    def require_worker(self) -> None:
        """Check what a worker needs to act on GitHub and call the model."""
        self.require("github_app_id", "github_private_key", "cerebras_api_key")
        self.check_private_key()

    def check_private_key(self) -> None:
        """Raise ``SettingsError`` unless the App's private key is a PEM RSA key."""
        if self.github_private_key is None:
            return
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        try:
            load_pem_private_key(self.github_private_key.get_secret_value().encode(), password=None)
        except (ValueError, TypeError) as exc:
            raise SettingsError(
                "GITHUB_PRIVATE_KEY (or GITHUB_PRIVATE_KEY_PATH): not a PEM private key "
                f"({type(exc).__name__})"
            ) from None


@dataclass(frozen=True)
class Problem:
    """One invalid variable: its name, what is wrong, and the default used instead."""

    name: str
    message: str
    default: Any


def _is_secret(field: str) -> bool:
    """Return whether ``field`` holds a secret (a ``SecretStr``), whose value no message may quote."""
    info = Settings.model_fields.get(field)
    return info is not None and "SecretStr" in str(info.annotation)


def _quoted(value: object) -> str:
    return repr(redact_url(value)) if isinstance(value, str) and "://" in value else repr(value)


def _field_of(error: Any) -> tuple[str, str]:
    """Return the field an error is about (lowercase) and its message."""
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["loc"]:
        return str(error["loc"][0]), message
    # A model-level check names its variable first: "GITHUB_PRIVATE_KEY_PATH: cannot read ...".
    name, _, rest = message.partition(": ")
    return name.lower(), rest or message


def _explain(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        field, message = _field_of(error)
        lines.append(f"{field.upper()}: {message}")
    return "invalid configuration:\n  " + "\n  ".join(lines)
