"""``spark serve``: the webhook receiver under gunicorn, started programmatically with deliberate defaults."""

from __future__ import annotations

import argparse
from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication

from bot.metrics import mark_process_dead
from bot.settings import Settings
from bot.setup import ENV_FILE_CONFIG, needs_setup


class SparkServer(BaseApplication):  # type: ignore[misc]
    """A gunicorn application serving ``create_app(settings)`` in each worker process."""

    def __init__(self, settings: Settings, options: dict[str, Any], env_file: str = ".env") -> None:
        self.settings = settings
        self.options = options
        self.env_file = env_file
        super().__init__()

    def load_config(self) -> None:
        """Apply the options to gunicorn's config."""
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Flask:
        """Build the app inside the worker, so each process has its own Redis connections."""
        from bot.web import create_app

        app = create_app(self.settings)
        # The setup page writes the App's credentials to the file `spark --env-file` reads.
        app.config[ENV_FILE_CONFIG] = self.env_file
        return app


def gunicorn_options(bind: str, workers: int, threads: int) -> dict[str, Any]:
    """Return gunicorn settings for the intake: threads overlap Redis waits, processes use the cores."""
    return {
        "bind": bind,
        "workers": workers,
        "threads": threads,
        # gthread keeps connections alive (GitHub's and load balancers'), which the sync worker cannot.
        "worker_class": "gthread",
        "keepalive": 75,
        # GitHub gives up after 10 s; a request still running by then is lost anyway.
        "timeout": 30,
        "graceful_timeout": 20,
        # The app logs one structured line per delivery; gunicorn's access log would double it.
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "warning",
        "proc_name": "spark-web",
        # Drop a dead worker's live gauges from the shared metrics directory.
        "child_exit": lambda _server, worker: mark_process_dead(worker.pid),
    }


def run(settings: Settings, args: argparse.Namespace) -> int:
    """Run the receiver until stopped; without a webhook secret it refuses, unless nothing is set up yet."""
    if not needs_setup(settings):
        settings.require_web()
    options = gunicorn_options(args.bind, args.workers, args.threads)
    SparkServer(settings, options, env_file=args.env_file).run()
    return 0
