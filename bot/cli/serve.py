"""``spark serve``: the webhook receiver under granian, started programmatically with deliberate defaults.

granian parses HTTP in Rust and calls the Flask app from Python threads in each worker process. Against
gunicorn's ``gthread`` worker on the same app, side by side, it cut the web process's CPU per delivery by
about a quarter and raised deliveries/s by a third (an ad hoc measurement; see ``docs/benchmarks.md``).
"""

from __future__ import annotations

import argparse
import gc
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import redis
from flask import Flask
from granian.constants import HTTPModes, Interfaces
from granian.http import HTTP1Settings
from granian.log import LogLevels
from granian.server.mp import MPServer

from bot.core.wording import plural
from bot.ports import check_listen
from bot.redis_server import connect, join
from bot.settings import Settings
from bot.web.setup import ENV_FILE_CONFIG, SETUP_TOKEN_CONFIG, needs_setup, setup_token
from bot.web.webhooks import WEBHOOK_PATH


def load_app(settings: Settings, env_file: str) -> Flask:
    """Build the app inside each worker process, so each has its own Redis connections."""
    from bot.web.app import create_app

    app = create_app(settings)
    # The setup page writes the App's credentials to the file `spark --env-file` reads, and opens only with
    # the token run() printed.
    app.config[ENV_FILE_CONFIG] = env_file
    app.config[SETUP_TOKEN_CONFIG] = True
    # The ~82,000 objects loaded so far (Flask, RQ, redis-py, pydantic, ...) live as long as the process,
    # yet every full collection scanned them all: about 30 ms in which the worker answers nothing. Frozen,
    # they are left out of every later collection.
    gc.freeze()
    return app


@dataclass(frozen=True)
class Bind:
    """Where to listen: ``host:port``, ``[v6]:port`` or ``unix:/path``."""

    host: str = "127.0.0.1"
    port: int = 3000
    uds: str | None = None

    @classmethod
    def parse(cls, text: str) -> Bind:
        """Parse ``--bind``; ``ValueError`` names what is wrong."""
        if text.startswith("unix:"):
            return cls(uds=text.removeprefix("unix:"))
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"--bind {text!r}: expected HOST:PORT or unix:PATH")
        return cls(host=host.strip("[]") or "0.0.0.0", port=int(port))


def setup_address(bind: Bind, token: str) -> str:
    """Return where a browser on this machine finds ``/setup``, with the token that opens it."""
    if bind.uds is not None:
        return f"/setup?token={token} on the socket {bind.uds} (through the proxy in front of it)"
    host = "localhost" if bind.host in ("0.0.0.0", "::", "") else bind.host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{bind.port}/setup?token={token}"


def listen_address(bind: Bind) -> str:
    """Return where the receiver listens: ``http://HOST:PORT`` or ``unix:PATH``."""
    if bind.uds is not None:
        return f"unix:{bind.uds}"
    host = f"[{bind.host}]" if ":" in bind.host else bind.host
    return f"http://{host}:{bind.port}"


def setup_pointer(settings: Settings, bind: Bind) -> str:
    """Return the first run's one line: where ``/setup`` is, with the token every web process shares."""
    conn = connect(settings.redis_url, settings.spark_data_dir, role="serve", socket_connect_timeout=5)
    try:
        token = setup_token(conn)
    except redis.RedisError as exc:
        return (
            f"no GitHub App is configured yet, and Redis does not answer ({type(exc).__name__}): start it "
            "(or fix REDIS_URL), then restart spark serve for the address of /setup."
        )
    finally:
        conn.close()
    return (
        f"no GitHub App is configured yet. Open {setup_address(bind, token)} in a browser to register one "
        "(only this address opens the page); webhooks are answered 503 until then."
    )


def build_server(bind: Bind, workers: int, threads: int) -> MPServer:
    """Return the granian server: processes use the cores, extra threads overlap slow clients."""
    # Worker processes, not threads: the GIL lets one thread of a process run Python at a time.
    return MPServer(
        "bot.web.app:create_app",  # a label only: run() passes load_app, which builds the app from settings
        address=bind.host,
        port=bind.port,
        uds=None if bind.uds is None else Path(bind.uds),
        interface=Interfaces.WSGI,
        workers=workers,
        blocking_threads=threads,
        # GitHub and load balancers keep connections alive; HTTP/1.1 only (GitHub never speaks h2 to hooks).
        http=HTTPModes.http1,
        http1_settings=HTTP1Settings(keep_alive=True, header_read_timeout=30_000),
        # A crashed worker comes back; one still busy 20 s after a stop is killed (GitHub waits only 10 s).
        respawn_failed_workers=True,
        workers_kill_timeout=20,
        # The app logs one structured line per delivery; an access log would double it.
        log_access=False,
        log_level=LogLevels.warning,
    )


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Run the receiver until stopped; without a webhook secret it refuses, unless nothing is set up yet."""
    if not needs_setup(settings):
        settings.require_web()
    try:
        bind = Bind.parse(args.bind)
    except ValueError as exc:
        print(f"spark serve: {exc}", file=sys.stderr)
        return 2
    if args.workers < 1 or args.threads < 1:
        print("spark serve: --workers and --threads must be at least 1", file=sys.stderr)
        return 2
    if bind.uds is None:
        # Before anything points a browser at the port: it may be another program's.
        check_listen(bind.host, bind.port, "--bind")
    if settings.redis_url is None:
        # Start (or join) the embedded Redis once, before the web processes start: they all join this one.
        join(settings.spark_data_dir, "serve")
    if needs_setup(settings):
        # Said once, by the parent: the web processes each build the app, but the user needs one pointer.
        print(f"spark serve: {setup_pointer(settings, bind)}", file=sys.stderr, flush=True)
    server = build_server(bind, args.workers, args.threads)
    processes = plural(args.workers, "web process", "web processes")
    print(
        f"spark serve: listening on {listen_address(bind)} with {processes}; "
        f"GitHub delivers webhooks to {WEBHOOK_PATH}",
        file=sys.stderr,
        flush=True,
    )
    server.serve(target_loader=partial(load_app, settings, args.env_file), wrap_loader=False)
    return 0
