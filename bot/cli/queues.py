"""``spark queues``: the depth of Spark's queues and the workers listening, on the Redis every role uses.

``REDIS_URL`` or, when it is unset, the embedded server of ``SPARK_DATA_DIR``: the Redis ``spark worker`` and
``spark serve`` use, which a plain ``rq info`` (localhost by default) does not find.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson
from rq import Queue, Worker

from bot.core.wording import plural
from bot.intake.routing import INTERACTIVE, REVIEW
from bot.redis_server import as_text, connect, leave
from bot.settings import Settings, redact_url

# Each queue's counts, in the order shown: waiting, running, waiting on another job, due later, failed.
COLUMNS = ("queued", "started", "deferred", "scheduled", "failed")


def where(settings: Settings) -> str:
    """Return which Redis every role uses, its password hidden."""
    if settings.redis_url:
        return f"REDIS_URL {redact_url(settings.redis_url)}"
    return f"embedded server unix://{settings.spark_data_dir.resolve() / 'redis.sock'}"


def snapshot(settings: Settings) -> dict[str, Any]:
    """Return the queues' counts and the workers, read from the Redis every role uses."""
    conn = connect(settings.redis_url, settings.spark_data_dir, role="queues")
    try:
        queues = {}
        for name in (INTERACTIVE, REVIEW):
            queue = Queue(name, connection=conn)
            counts = (
                queue.count,
                queue.started_job_registry.count,
                queue.deferred_job_registry.count,
                queue.scheduled_job_registry.count,
                queue.failed_job_registry.count,
            )
            queues[name] = dict(zip(COLUMNS, counts, strict=True))
        workers = [
            {
                "name": worker.name,
                "pid": worker.pid,
                "state": as_text(worker.get_state()),
                "queues": worker.queue_names(),
                "job": worker.get_current_job_id(),
            }
            for worker in sorted(Worker.all(connection=conn), key=lambda w: w.name)
        ]
    finally:
        conn.close()
        if not settings.redis_url:
            leave(settings.spark_data_dir)
    return {"redis": where(settings), "queues": queues, "workers": workers}


def render(data: dict[str, Any]) -> str:
    """Return the snapshot as a table of queues and a line per worker."""
    width = max(len(name) for name in data["queues"])
    lines = [f"Redis: {data['redis']}", "", "queue".ljust(width) + "".join(f"{c:>11}" for c in COLUMNS)]
    for name, counts in data["queues"].items():
        lines.append(name.ljust(width) + "".join(f"{counts[c]:>11}" for c in COLUMNS))
    lines += ["", plural(len(data["workers"]), "worker") + (":" if data["workers"] else "")]
    for worker in data["workers"]:
        job = f", job {worker['job']}" if worker["job"] else ""
        lines.append(f"  {worker['name']} pid {worker['pid']}: {worker['state']}{job}")
    return "\n".join(lines)


def run(settings: Settings, args: argparse.Namespace) -> int:
    """``spark queues [--json]``: print the snapshot; exit 1 when Redis does not answer."""
    import redis

    try:
        data = snapshot(settings)
    except (redis.RedisError, OSError) as exc:
        print(f"spark queues: {type(exc).__name__} at {where(settings)}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(render(data))
    return 0
