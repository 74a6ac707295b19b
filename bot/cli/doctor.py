"""``spark doctor``: check every setting and dependency Spark needs, and say what to fix.

Each check is one row: a name, a status (ok, fail, skip), what was found, and how to fix it. Checks that
need a setting are skipped when an earlier row already says it is missing, so one problem is reported once.
Exit codes: 0 everything works, 1 something is unreachable or refused, 2 the configuration is unusable.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import orjson

from bot.core.wording import plural
from bot.settings import Problem, Settings, SettingsError

Status = Literal["ok", "fail", "skip"]
# A check that fails for one of these reasons means the configuration itself is unusable (exit 2).
CONFIG_CHECKS = ("settings", "app id", "private key", "webhook secret", "model api key")


@dataclass(frozen=True, slots=True)
class Check:
    """One row of the doctor's table."""

    name: str
    status: Status
    detail: str
    fix: str = ""


def check_settings(settings: Settings, problems: Sequence[Problem] = ()) -> list[Check]:
    """Return the rows for settings that must be present and well formed (no network)."""
    if problems:
        rows = [
            Check(
                "settings",
                "fail",
                f"{plural(len(problems), 'invalid variable')}; the checks below use the default instead",
                "fix the variables named below",
            )
        ]
        rows += [
            Check(
                problem.name,
                "fail",
                problem.message,
                f"fix {problem.name}, or unset it to use the default ({_shown(problem.default)})",
            )
            for problem in problems
        ]
    else:
        rows = [Check("settings", "ok", "loaded from the environment and .env")]
    rows.append(_present(settings, "app id", "github_app_id", "set GITHUB_APP_ID to the App's numeric id"))
    if settings.github_private_key is None:
        rows.append(
            Check(
                "private key",
                "fail",
                "not set",
                "set GITHUB_PRIVATE_KEY (PEM text) or GITHUB_PRIVATE_KEY_PATH (a .pem file)",
            )
        )
    else:
        try:
            settings.check_private_key()
            rows.append(Check("private key", "ok", "a PEM private key"))
        except SettingsError as exc:
            rows.append(
                Check("private key", "fail", str(exc), "download a new key from the App's settings page")
            )
    rows.append(
        _present(
            settings,
            "webhook secret",
            "github_webhook_secret",
            "set GITHUB_WEBHOOK_SECRET to the secret in the App's webhook settings",
        )
    )
    rows.append(
        _present(
            settings,
            "model api key",
            "cerebras_api_key",
            "set CEREBRAS_API_KEY (create one at cloud.cerebras.ai)",
        )
    )
    return rows


def _shown(default: object) -> str:
    return "none" if default is None else str(default)


def _present(settings: Settings, name: str, field: str, fix: str) -> Check:
    if getattr(settings, field) in (None, ""):
        return Check(name, "fail", "not set", fix)
    return Check(name, "ok", "set")


def check_github_app(settings: Settings) -> Check:
    """Call ``GET /app`` with the App's JWT: the key parses and belongs to ``GITHUB_APP_ID``."""
    from urllib3.util.retry import Retry

    from bot.adapters.github_app import GitHubApp
    from bot.adapters.github_port import GitHubError

    if settings.github_app_id is None or settings.github_private_key is None:
        return Check("github app", "skip", "needs GITHUB_APP_ID and GITHUB_PRIVATE_KEY")
    # One answer is enough to diagnose: no retries (the workers' policy would back off for ~15 s).
    app = GitHubApp(
        settings.github_app_id,
        settings.github_private_key.get_secret_value(),
        base_url=settings.github_api_url,
        retry=Retry(total=0, raise_on_status=False),
        timeout=10,
    )
    try:
        slug = app.app_slug()
    except GitHubError as exc:
        hint = (
            "the private key does not belong to GITHUB_APP_ID, or the App was deleted"
            if exc.status in (401, 403, 404)
            else f"check GITHUB_API_URL ({settings.github_api_url}) and the network"
        )
        return Check("github app", "fail", str(exc), hint)
    except Exception as exc:  # a refused connection or DNS error: report it, do not crash the table
        return Check(
            "github app",
            "fail",
            f"{type(exc).__name__}: cannot reach {settings.github_api_url}",
            "check GITHUB_API_URL and the network",
        )
    finally:
        app.close()
    return Check("github app", "ok", f"GET /app answers as '{slug}' at {settings.github_api_url}")


def check_redis(settings: Settings) -> Check:
    """PING the Redis every role uses (``REDIS_URL``, or the embedded one) and say who else uses it."""
    import redis
    from rq import Worker

    from bot.cli.queues import where as redis_in_use
    from bot.redis_server import REDIS_FIX, EmbeddedRedisError, connect, leave, status

    where = redis_in_use(settings)
    try:
        conn = connect(settings.redis_url, settings.spark_data_dir, role="doctor")
        try:
            conn.ping()
            workers = Worker.count(connection=conn)
        finally:
            conn.close()
    except (redis.RedisError, OSError, EmbeddedRedisError) as exc:
        return Check(
            "redis",
            "fail",
            f"{type(exc).__name__} at {where}: {exc}",
            REDIS_FIX,
        )
    roles = f"web, worker and every other role use {where}"
    if not settings.redis_url:
        leave(settings.spark_data_dir)
        embedded = status(settings.spark_data_dir)
        joined = _by_role(embedded.users)
        roles += f" (server pid {embedded.server_pid}; joined by {joined or 'no other Spark process'})"
    return Check("redis", "ok", f"PING answered; {roles}; {plural(workers, 'RQ worker')} listening on it")


def _by_role(users: dict[int, str]) -> str:
    """Return ``web pids 12, 13; worker pid 14``."""
    roles: dict[str, list[int]] = {}
    for pid, role in sorted(users.items()):
        roles.setdefault(role, []).append(pid)
    return "; ".join(
        f"{role} pid{'s' if len(pids) > 1 else ''} {', '.join(map(str, pids))}"
        for role, pids in roles.items()
    )


def check_model(settings: Settings) -> Check:
    """List ``GET /v1/models`` and check that both configured models are served."""
    from bot.adapters.cerebras import ModelClient

    if settings.cerebras_api_key is None:
        return Check("model", "skip", "no CEREBRAS_API_KEY")
    client = ModelClient(
        settings.cerebras_api_key.get_secret_value(),
        base_url=settings.cerebras_base_url,
        timeout=10.0,
        max_retries=0,
    )
    try:
        served = {model.id for model in client.sdk.models.list().data}
    except Exception as exc:  # the SDK's errors carry the status; the table only needs the kind
        status = getattr(exc, "status_code", None)
        hint = (
            "CEREBRAS_API_KEY is wrong or revoked"
            if status == 401
            else f"check CEREBRAS_BASE_URL ({settings.cerebras_base_url}) and the network"
        )
        return Check("model", "fail", f"GET /v1/models: {type(exc).__name__}", hint)
    finally:
        client.close()
    wanted = {
        "SPARK_MODEL_FAST": settings.spark_model_fast,
        "SPARK_MODEL_DEEP": settings.spark_model_deep,
    }
    missing = [f"{var}={name}" for var, name in wanted.items() if name not in served]
    if missing:
        return Check(
            "model",
            "fail",
            "not served: " + ", ".join(missing),
            "choose one of: " + ", ".join(sorted(served)),
        )
    return Check("model", "ok", f"{', '.join(wanted.values())} served at {settings.cerebras_base_url}")


def check_index(settings: Settings) -> Check:
    """Return the repository index store's row: its size against the cap, its rows, SQLite's quick check."""
    from bot.index.store import LocalStore, store_path

    path = store_path(settings.spark_data_dir)
    if not path.exists():
        return Check("index cache", "ok", f"empty: {path} is made by the first job that indexes a repository")
    try:
        health = LocalStore(path, settings.spark_index_max_bytes).health()
    except (OSError, sqlite3.Error) as exc:
        return Check(
            "index cache", "fail", f"{path}: {exc}", "check that SPARK_DATA_DIR is a writable local disk"
        )
    rows = health.rows
    detail = (
        f"{health.bytes / 1e6:.1f} MB of {health.max_bytes / 1e6:.0f} MB at {path}; "
        f"{plural(rows['symbols'], 'indexed file')}, {plural(rows['listings'], 'commit')}: {health.message}"
    )
    if not health.ok:
        return Check(
            "index cache", "fail", detail, "delete the file (it is a cache) or raise SPARK_INDEX_MAX_BYTES"
        )
    return Check("index cache", "ok", detail)


def diagnose(settings: Settings, problems: Sequence[Problem] = ()) -> list[Check]:
    """Run every check in order; network checks are skipped when the settings they need are missing."""
    rows = check_settings(settings, problems)
    failed = {row.name for row in rows if row.status == "fail"}
    # What each network check needs: rows that must pass, and variables that must not be invalid.
    steps: list[tuple[str, set[str], Callable[[Settings], Check]]] = [
        ("github app", {"app id", "private key", "GITHUB_API_URL"}, check_github_app),
        ("redis", {"REDIS_URL", "SPARK_DATA_DIR"}, check_redis),
        ("index cache", {"SPARK_DATA_DIR", "SPARK_INDEX_MAX_BYTES"}, check_index),
        (
            "model",
            {"model api key", "CEREBRAS_BASE_URL", "SPARK_MODEL_FAST", "SPARK_MODEL_DEEP"},
            check_model,
        ),
    ]
    for name, needs, check in steps:
        blocked = sorted(needs & failed)
        if blocked:
            rows.append(Check(name, "skip", "needs " + " and ".join(blocked) + " first"))
        else:
            rows.append(check(settings))
    return rows


def exit_code(rows: list[Check]) -> int:
    """Return 0 when all is well, 2 when the configuration is unusable, else 1."""
    failed = {row.name for row in rows if row.status == "fail"}
    if failed & set(CONFIG_CHECKS):
        return 2
    return 1 if failed else 0


def render(rows: list[Check]) -> str:
    """Return the checks as a plain-text table, with the fixes below it."""
    marks = {"ok": "ok", "fail": "FAIL", "skip": "skip"}
    width = max(len(row.name) for row in rows)
    lines = [f"{'check'.ljust(width)}  status  detail"]
    lines += [f"{row.name.ljust(width)}  {marks[row.status].ljust(6)}  {row.detail}" for row in rows]
    fixes = [f"- {row.name}: {row.fix}" for row in rows if row.status == "fail" and row.fix]
    if fixes:
        lines += ["", "To fix:", *fixes]
    else:
        lines += ["", "Everything Spark needs is in place."]
    return "\n".join(lines)


def run(settings: Settings, args: argparse.Namespace) -> int:
    """``spark doctor [--json]``: print the checks; exit 0 ok, 1 something wrong, 2 config unusable."""
    rows = diagnose(settings, getattr(args, "settings_problems", ()))
    code = exit_code(rows)
    if args.json:
        data = {"ok": code == 0, "exit_code": code, "checks": [asdict(row) for row in rows]}
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(render(rows))
    return code
