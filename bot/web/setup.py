"""One-click App registration: ``GET /setup`` posts the App manifest to GitHub; the callback keeps the result.

GitHub's manifest flow: the browser POSTs ``manifest`` (JSON) and ``state`` to
``{github_url}/settings/apps/new`` (or an organisation's); GitHub shows a confirmation page, creates the
App and redirects to our ``redirect_url`` with ``?code=...&state=...``; we exchange the code at
``POST /app-manifests/{code}/conversions`` for the App's id, private key and webhook secret, and write them to
``.env`` (mode 0600, the key file beside it). The page offers nothing once the App is configured, so a running
installation cannot be re-pointed from a browser.
One module past 400 lines: the page, its callback and the checks of the public URL are one flow that
shares the same state and form; the code exchange itself is the adapter's (``exchange_manifest_code``).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import re
import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis
import yaml
from flask import Blueprint, current_app, render_template_string, request

from bot import keys
from bot.adapters.github_app import exchange_manifest_code
from bot.adapters.github_port import GitHubError
from bot.redis_server import as_text
from bot.settings import Settings
from bot.web.state import SparkState, current_state

MANIFEST_PATH = Path(__file__).resolve().parent / "app.yml"
# GitHub: all three steps of the manifest flow must finish within one hour.
STATE_TTL_SECONDS = keys.SETUP_STATE.seconds
STATE_KEY = keys.SETUP_STATE.pattern
# Set once this deployment has stored credentials, so a second registration is refused before a restart.
CONFIGURED_KEY = keys.SETUP_CONFIGURED.pattern
TOKEN_KEY = keys.SETUP_TOKEN.pattern
# Set by `spark serve`: /setup then opens only with the token it printed (a create_app of its own, in a test,
# leaves it open).
SETUP_TOKEN_CONFIG = "SPARK_SETUP_TOKEN_REQUIRED"
# Flask config key naming the dotenv file the callback writes (default: .env in the working directory).
ENV_FILE_CONFIG = "SPARK_ENV_FILE"
# The manifest keys that hold URLs; a value starting with "/" is relative to this server's public URL.
_URL_KEYS = ("url", "redirect_url", "setup_url", "callback_urls")
_CODE = re.compile(r"[A-Za-z0-9_-]{1,200}")
_ORGANIZATION = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
_EXCHANGE_TIMEOUT_SECONDS = 15


class SetupError(Exception):
    """A step of the manifest flow failed; the message says what to do."""


@dataclass(frozen=True, slots=True)
class AppCredentials:
    """What GitHub returns for a newly created App (secrets kept out of the repr)."""

    app_id: int
    slug: str
    name: str
    html_url: str
    pem: str = field(repr=False)
    webhook_secret: str = field(repr=False)

    @property
    def install_url(self) -> str:
        """Return the page where the App is installed on accounts and repositories."""
        return f"{self.html_url}/installations/new"


def _absolute(public_url: str, value: Any) -> Any:
    if isinstance(value, str) and value.startswith("/"):
        return public_url.rstrip("/") + value
    if isinstance(value, list):
        return [_absolute(public_url, item) for item in value]
    return value


def load_manifest(public_url: str, path: Path = MANIFEST_PATH) -> dict[str, Any]:
    """Return the App manifest (package data) with relative URLs made absolute on ``public_url``."""
    manifest: dict[str, Any] = yaml.safe_load(path.read_text())
    for key in _URL_KEYS:
        if key in manifest:
            manifest[key] = _absolute(public_url, manifest[key])
    hook = dict(manifest.get("hook_attributes", {}))
    if "url" in hook:
        hook["url"] = _absolute(public_url, hook["url"])
        manifest["hook_attributes"] = hook
    return manifest


def registration_url(github_url: str, organization: str | None = None) -> str:
    """Return GitHub's "new App from manifest" URL for the user's account or an organisation."""
    if organization:
        if not _ORGANIZATION.fullmatch(organization):
            raise SetupError(f"not a GitHub organisation name: {organization!r}")
        return f"{github_url}/organizations/{organization}/settings/apps/new"
    return f"{github_url}/settings/apps/new"


def exchange_code(api_url: str, code: str) -> AppCredentials:
    """Trade a manifest ``code`` for the App's credentials at ``POST /app-manifests/{code}/conversions``."""
    if not _CODE.fullmatch(code):
        raise SetupError("the code GitHub sent back is malformed; start again at /setup")
    try:
        data = exchange_manifest_code(api_url, code, timeout=_EXCHANGE_TIMEOUT_SECONDS)
    except GitHubError as exc:
        if exc.status == 0:
            raise SetupError(f"could not reach GitHub at {api_url}: {exc.message}") from None
        raise SetupError(
            f"GitHub refused the code ({exc.status}: {exc.message or 'no message'}); codes expire after an "
            "hour and work once, so start again at /setup"
        ) from None
    try:
        return AppCredentials(
            app_id=int(data["id"]),
            slug=str(data["slug"]),
            name=str(data.get("name") or data["slug"]),
            html_url=str(data["html_url"]),
            pem=str(data["pem"]),
            webhook_secret=str(data["webhook_secret"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SetupError(f"GitHub's answer lacks the App's credentials ({exc!r})") from None


def write_private_file(path: Path, text: str) -> None:
    """Atomically write ``text`` to ``path`` readable by its owner only (0600), never briefly wider."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)  # the umask may only narrow the mode, but say it explicitly
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _env_value(value: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_./:@+=-]*", value):
        return value
    # Double quotes with backslash escapes, as python-dotenv (pydantic-settings' reader) decodes them.
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def update_env_file(path: Path, values: dict[str, str]) -> None:
    """Set ``values`` in the dotenv file at ``path`` (other lines kept), leaving it mode 0600."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    pending = dict(values)
    out = []
    for line in lines:
        key = line.split("=", 1)[0].strip().removeprefix("export ").strip()
        if key in pending:
            out.append(f"{key}={_env_value(pending.pop(key))}")
        else:
            out.append(line)
    out.extend(f"{key}={_env_value(value)}" for key, value in pending.items())
    write_private_file(path, "\n".join(out) + "\n")


def store_credentials(credentials: AppCredentials, env_file: Path) -> Path:
    """Save the private key beside ``env_file`` and the App id, key path and secret in it; return the key."""
    directory = env_file.resolve().parent
    key_path = directory / f"github-app-{credentials.app_id}.private-key.pem"
    # The key first: if .env cannot be written, the key is still on disk and nothing is lost.
    write_private_file(key_path, credentials.pem)
    update_env_file(
        env_file,
        {
            "GITHUB_APP_ID": str(credentials.app_id),
            "GITHUB_PRIVATE_KEY_PATH": str(key_path),
            "GITHUB_WEBHOOK_SECRET": credentials.webhook_secret,
        },
    )
    return key_path


def setup_token(conn: redis.Redis) -> str:
    """Return the token that opens ``/setup``: the one every web process shares, made now if there is none."""
    conn.set(TOKEN_KEY, secrets.token_urlsafe(18), nx=True, ex=keys.SETUP_TOKEN.ttl)
    return as_text(conn.get(TOKEN_KEY))


def _token_holder(spark: SparkState) -> bool:
    """Return whether this request may open ``/setup``: no token is required, or it carries the right one."""
    if not current_app.config.get(SETUP_TOKEN_CONFIG):
        return True
    given = request.args.get("token", "")
    expected = as_text(spark.redis.get(TOKEN_KEY))
    return bool(given and expected) and hmac.compare_digest(given.encode(), expected.encode())


def needs_setup(settings: Settings) -> bool:
    """Return whether nothing of the App is configured yet (first run: serve /setup, the webhook answers 503).

    A partial configuration (say an App id without a webhook secret) is a mistake, not a first run, and still
    refuses to start.
    """
    return (
        settings.github_app_id is None
        and settings.github_private_key is None
        and settings.github_webhook_secret is None
    )


_LAYOUT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Spark setup: {{ title }}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:44rem;margin:3rem auto;padding:0 1rem;color:#1f2328}
h1{font-size:1.6rem} code{background:#f6f8fa;padding:.1rem .3rem;border-radius:4px}
button{font-size:1rem;padding:.6rem 1.2rem;border-radius:6px;border:0;background:#1f883d;color:#fff}
.note{color:#59636e;font-size:.9rem} .error{color:#d1242f}
</style></head><body><h1>{{ title }}</h1>"""

_START = (
    _LAYOUT
    + """
<p>This registers a new GitHub App for this Spark server on <code>{{ github_url }}</code>
{% if organization %}for the organisation <code>{{ organization }}</code>
{%- else %}for your account{% endif %}.
GitHub will show you the App and ask you to confirm; you can change its name there.</p>
<ul>
<li>Webhooks go to <code>{{ manifest.hook_attributes.url }}</code></li>
<li>Events: {% for e in manifest.default_events %}<code>{{ e }}</code>{{ ", " if not loop.last }}{% endfor %}
(plus <code>installation</code> events, which GitHub sends to every App)</li>
<li>Permissions: {% for k, v in manifest.default_permissions.items() %}<code>{{ k }}: {{ v }}</code>
{{- ", " if not loop.last }}{% endfor %}</li>
</ul>
{% if unreachable %}<p class="error" id="unreachable">GitHub cannot deliver webhooks to
<code>{{ public_url }}</code>: {{ unreachable }}, reachable only from this machine or its network. Enter
below the address GitHub can reach: this server's public URL, or a tunnel to it (for a trial, for example
<code>cloudflared tunnel --url http://localhost:{{ port }}</code> or <code>ngrok http {{ port }}</code>), then
press Update.</p>{% endif %}
<p>When you come back, the App's id, private key and webhook secret are written to <code>{{ env_file }}</code>
(readable by this server's user only).</p>
<form id="register" method="post" action="{{ action }}">
<input type="hidden" name="manifest" value="{{ manifest_json }}">
<input type="hidden" name="state" value="{{ state }}">
<button id="create-app" type="submit">Create the GitHub App</button>
</form>
<form method="get" action="{{ url_for('setup.start') }}" class="note">
{% if token %}<input type="hidden" name="token" value="{{ token }}">{% endif %}
<p>Not the right address or account? Public URL <input name="url" value="{{ public_url }}" size="32">
organisation <input name="org" value="{{ organization or '' }}" size="12" placeholder="(your account)">
<button type="submit">Update</button></p></form>
</body></html>"""
)

_DONE = (
    _LAYOUT
    + """
<p id="configured">The GitHub App{% if app %} <strong>{{ app.name }}</strong> (id {{ app.app_id }}){% endif %}
is configured{% if app %}: its id, private key and webhook secret were written to <code>{{ env_file }}</code>
and <code>{{ key_path }}</code>{% endif %}.</p>
{% if app %}<h2>Next steps</h2>
<ol id="next-steps">
{% if helm %}<li id="store-secret">These files are inside this pod, on a volume that does not outlive it:
store the credentials in a Kubernetes Secret and point the release at it (<code>{{ helm.secret }}</code>):
<pre>kubectl -n {{ helm.namespace }} cp {{ helm.pod }}:{{ key_path }} github-app.pem
kubectl -n {{ helm.namespace }} create secret generic {{ helm.secret }} \
  --from-literal=GITHUB_APP_ID={{ app.app_id }} \
  --from-literal=GITHUB_WEBHOOK_SECRET=&lt;the GITHUB_WEBHOOK_SECRET line of {{ env_file }}&gt; \
  --from-file=GITHUB_PRIVATE_KEY=github-app.pem \
  --from-literal=CEREBRAS_API_KEY=&lt;your Cerebras API key&gt;
helm -n {{ helm.namespace }} upgrade {{ helm.release }} deploy/helm/spark --reuse-values \
  --set existingSecret={{ helm.secret }}</pre>
(<code>kubectl -n {{ helm.namespace }} exec {{ helm.pod }} -- cat {{ env_file }}</code> shows the secret.)
Then delete <code>github-app.pem</code>.</li>
{% else %}<li id="worker-settings">Set what the worker still needs in <code>{{ env_file }}</code>:
{% for name in missing %}<code>{{ name }}</code>{{ ", " if not loop.last }}{% endfor %}
{%- if not missing %}nothing more{% endif %} (<code>CEREBRAS_API_KEY</code>: create one at
cloud.cerebras.ai).</li>
<li>Restart Spark (<code>spark serve</code> and <code>spark worker</code>) so it reads the new settings.</li>
{% endif %}<li>Run <code>spark doctor</code>: it checks the key, the App, Redis and the model, and says
what to fix.</li>
<li><a id="install" href="{{ app.install_url }}">Install the App</a> on the repositories to review.</li>
<li>Comment <code>/spark help</code> on a pull request.</li>
</ol>{% else %}<p>There is nothing to set up here.</p>{% endif %}
</body></html>"""
)

_HOME = (
    _LAYOUT
    + """
{% if configured %}<p id="running">This Spark server is running. GitHub sends its webhooks to
<code>/api/github/webhooks</code>; <code>/healthz</code>, <code>/readyz</code> and <code>/metrics</code>
are for your monitoring. <code>spark doctor</code> on the server checks the whole setup.</p>
{% else %}<p id="unconfigured">This Spark server has no GitHub App yet, so it cannot receive webhooks.</p>
{% if token_required %}<p id="setup">Register the GitHub App at the <code>/setup?token=…</code> address
<code>spark serve</code> printed when it started (in its log): one click creates it on GitHub and stores its
credentials here. Only that address opens the page, so nobody else can register an App for this server.</p>
{% else %}<p><a id="setup" href="{{ url_for('setup.start') }}">Register the GitHub App at /setup</a>: one
click creates it on GitHub and stores its credentials here.</p>{% endif %}{% endif %}
</body></html>"""
)

_ERROR = (
    _LAYOUT
    + """<p class="error" id="error">{{ message }}</p>
<p><a href="{{ url_for('setup.start') }}">Start again</a></p></body></html>"""
)


def unreachable_host(public_url: str) -> str | None:
    """Return why GitHub cannot reach ``public_url`` (a loopback or private address), or None."""
    host = (urlsplit(public_url).hostname or "").lower()
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal")):
        return f"{host} is a local name"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if address.is_loopback:
        return f"{host} is a loopback address"
    if address.is_private or address.is_link_local:
        return f"{host} is a private address"
    return None


def _public_url(override: str | None) -> str:
    url = (override or request.host_url).rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SetupError(f"the public URL must be an http(s) URL, got {url!r}")
    return url


def _env_file() -> Path:
    # The dotenv file Settings.load() reads by default; tests (and deployments) may point elsewhere.
    return Path(current_app.config.get(ENV_FILE_CONFIG, ".env"))


def _configured(spark: SparkState) -> bool:
    # Any App setting counts: a web-only deployment has just the webhook secret, and /setup must not let a
    # stranger register another App over it.
    return not needs_setup(spark.settings) or bool(spark.redis.exists(CONFIGURED_KEY))


NO_TOKEN = (
    "This page registers a GitHub App for this server, so it opens only with the one-time address "
    "`spark serve` printed when it started (in its log: /setup?token=...). Open that address."
)


def _error(title: str, message: str, status: int) -> tuple[str, int]:
    return render_template_string(_ERROR, title=title, message=message), status


def setup_blueprint() -> Blueprint:
    """Return the blueprint serving ``/`` (pointing to setup), ``/setup`` and ``/setup/callback``."""
    blueprint = Blueprint("setup", __name__)
    blueprint.add_url_rule("/", "home", home_page, methods=["GET"])
    blueprint.add_url_rule("/setup", "start", start_page, methods=["GET"])
    blueprint.add_url_rule("/setup/callback", "callback", callback_page, methods=["GET"])
    return blueprint


def home_page() -> tuple[str, int]:
    """Say what this server is, and on a first run point to ``/setup``."""
    spark = current_state()
    try:
        configured = _configured(spark)
    except redis.RedisError:
        configured = not needs_setup(spark.settings)
    title = "Spark" if configured else "Spark: set up the GitHub App"
    token_required = bool(current_app.config.get(SETUP_TOKEN_CONFIG))
    page = render_template_string(_HOME, title=title, configured=configured, token_required=token_required)
    return page, 200


def start_page() -> tuple[str, int]:
    """Explain what will be created and offer the button that posts the manifest to GitHub."""
    spark = current_state()
    try:
        if _configured(spark):
            return render_template_string(_DONE, title="Spark is set up", app=None), 200
        if not _token_holder(spark):
            return _error("Setup needs its address", NO_TOKEN, 403)
        public_url = _public_url(request.args.get("url"))
        organization = request.args.get("org") or None
        action = registration_url(spark.settings.github_url, organization)
        manifest = load_manifest(public_url)
        state = secrets.token_urlsafe(32)
        spark.redis.set(STATE_KEY.format(state), "1", ex=STATE_TTL_SECONDS)
    except SetupError as exc:
        return _error("Cannot set up", str(exc), 400)
    except redis.RedisError:
        return _error("Cannot set up", "Redis is unreachable; start it (see /readyz) and reload.", 503)
    page = render_template_string(
        _START,
        title="Register Spark on GitHub",
        github_url=spark.settings.github_url,
        organization=organization,
        manifest=manifest,
        manifest_json=json.dumps(manifest),
        action=action,
        state=state,
        token=request.args.get("token", ""),
        public_url=public_url,
        unreachable=unreachable_host(public_url),
        port=urlsplit(public_url).port or (443 if public_url.startswith("https") else 80),
        env_file=_env_file().resolve(),
    )
    return page, 200


def callback_page() -> tuple[str, int]:
    """Check the state, exchange GitHub's code for the App's credentials, store them, say what comes next."""
    spark = current_state()
    state = request.args.get("state", "")
    code = request.args.get("code", "")
    env_file = _env_file()
    try:
        if _configured(spark):
            return _error("Already set up", "This Spark server is already configured; nothing changed.", 409)
        # GETDEL: a state works once, so a replayed callback URL cannot register twice.
        if not state or spark.redis.getdel(STATE_KEY.format(state)) is None:
            return _error("Cannot finish setup", "Unknown or expired state: start again from /setup.", 400)
        if not _CODE.fullmatch(code):
            return _error("Cannot finish setup", "No valid code from GitHub: start again from /setup.", 400)
        credentials = exchange_code(spark.settings.github_api_url, code)
        key_path = store_credentials(credentials, env_file)
        spark.redis.set(CONFIGURED_KEY, str(credentials.app_id))
    except SetupError as exc:
        return _error("Cannot finish setup", str(exc), 502)
    except redis.RedisError:
        return _error("Cannot finish setup", "Redis is unreachable; start it, then begin at /setup.", 503)
    except OSError as exc:
        return _error("Cannot finish setup", f"Could not write {env_file}: {exc.strerror}.", 500)
    settings = spark.settings
    missing = [name for name, value in (("CEREBRAS_API_KEY", settings.cerebras_api_key),) if value is None]
    helm = None
    if settings.spark_helm_release:
        helm = {
            "release": settings.spark_helm_release,
            "namespace": settings.spark_helm_namespace,
            "secret": f"{settings.spark_helm_release}-app",
            "pod": socket.gethostname(),  # a pod's hostname is its name
        }
    page = render_template_string(
        _DONE,
        title="Spark is registered",
        app=credentials,
        env_file=env_file.resolve(),
        key_path=key_path,
        missing=missing,
        helm=helm,
    )
    return page, 200
