"""What each part of a delivery's intake costs, in CPU per call, side by side with what it replaced.

- the parse of the real 28 KB ``pull_request.opened`` payload: orjson building all of it, against msgspec
  decoding only the fields handlers read (``bot.intake.payloads``);
- one Redis command: redis-py's ``PING`` against the bare socket calls (redis-py's own share);
- the whole enqueue of that delivery's job (``DeliveryQueue.enqueue``: WATCH, EXISTS, then MULTI ... EXEC with
  RQ's ``enqueue_many`` on the transaction's pipeline) beside RQ's plain ``enqueue_call`` of the same job
  (which records no delivery id and is not idempotent), with Redis' own time per delivery;
- a full garbage collection in a loaded ``spark serve`` worker, before and after ``gc.freeze()``.

Each figure is the median of 5 batches, CPU time of this process (``time.process_time``), so waiting on Redis
does not count but the socket calls do. Run: ``python -m bench intake_costs``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson
import redis
from rq import Queue

from bot.intake.enqueue import DeliveryQueue
from bot.intake.events import decode_payload, parse_delivery
from bot.intake.handlers import router
from bot.intake.payloads import PullRequestEvent
from bot.redis_server import PrivateRedis

ROOT = Path(__file__).resolve().parent.parent
SHARED_PAYLOAD = ROOT.parent / "shared" / "github" / "webhooks" / "pull_request" / "opened.payload.json"
OWN_PAYLOAD = ROOT / "tests" / "fixtures" / "webhooks" / "pull_request" / "opened.json"
BATCHES = 5
CALLS = 2000


def cpu_us(call: Callable[[], object], calls: int = CALLS) -> float:
    """Return the median over batches of the CPU microseconds one ``call()`` takes."""
    call()
    batches = []
    for _ in range(BATCHES):
        started = time.process_time()
        for _ in range(calls):
            call()
        batches.append((time.process_time() - started) * 1e6 / calls)
    return sorted(batches)[BATCHES // 2]


def _row(label: str, value: float, unit: str = "us CPU") -> None:
    print(f"  {label:<52} {value:8.1f} {unit}")


def parse(body: bytes) -> None:
    """Print the cost of parsing the payload whole and of decoding only the fields handlers read."""
    print("parse of the payload:")
    _row("orjson.loads (the whole payload)", cpu_us(lambda: orjson.loads(body)))
    _row(
        "msgspec into bot.intake.payloads.PullRequestEvent",
        cpu_us(lambda: decode_payload(body, PullRequestEvent)),
    )


def redis_command(client: redis.Redis, port: int) -> None:
    """Print the cost of one command through redis-py and through bare sockets."""
    print("one Redis command:")
    _row("PING through redis-py", cpu_us(client.ping))
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def bare_ping() -> None:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            sock.recv(64)

        _row("PING, the bare socket calls", cpu_us(bare_ping))


def enqueue(client: redis.Redis, body: bytes) -> None:
    """Print the CPU of enqueueing the delivery's job, RQ's plain enqueue beside it, and Redis' own time."""
    delivery = parse_delivery("pull_request", "bench", "application/json", body, router.decode)
    decision = router.decide(delivery)
    queue = DeliveryQueue(client)
    client.config_resetstat()
    before = _redis_usec(client)
    _row(
        "DeliveryQueue.enqueue (the job, 3 round trips)",
        cpu_us(lambda: queue.enqueue(_new_id(), decision.jobs, decision.signals)),
    )
    calls = 1 + BATCHES * CALLS
    _row("  Redis' own time per delivery (INFO commandstats)", (_redis_usec(client) - before) / calls, "us")
    spec = decision.jobs[0]
    rq_queue = Queue(spec.queue, connection=client)
    _row(
        "RQ's enqueue_call alone (no delivery id)",
        cpu_us(lambda: rq_queue.enqueue_call(spec.func, kwargs=spec.kwargs, job_id=_new_id())),
    )


def _redis_usec(client: redis.Redis) -> float:
    """Return the microseconds Redis spent in commands since its stats were reset (INFO commandstats)."""
    return float(sum(stats["usec"] for stats in client.info("commandstats").values()))


def _new_id() -> str:
    return uuid.uuid4().hex


# Run in a child: a freeze lasts as long as the process. The app is built as ``load_app`` builds it, and then
# frozen as ``load_app`` freezes it.
GC_PROBE = """
import gc, time
from bot.settings import Settings
from bot.web.app import create_app
app = create_app(Settings.load())
def full_collection():
    started = time.perf_counter()
    gc.collect()
    return (time.perf_counter() - started) * 1000
before = sorted(full_collection() for _ in range(5))[2]
gc.freeze()
after = sorted(full_collection() for _ in range(5))[2]
print(gc.get_freeze_count(), before, after)
"""


def collection(redis_url: str) -> None:
    """Print a full garbage collection's pause in a loaded web worker, before and after freezing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "REDIS_", "SPARK_"))}
    env.update(GITHUB_WEBHOOK_SECRET="bench", REDIS_URL=redis_url, LOG_LEVEL="WARNING")
    out = subprocess.run(
        [sys.executable, "-c", GC_PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    objects, before, after = int(out[0]), float(out[1]), float(out[2])
    print(f"full garbage collection in a loaded web worker ({objects:,} objects once loaded):")
    _row("not frozen", before, "ms")
    _row("after gc.freeze() (what load_app does)", after, "ms")


def main() -> int:
    """Print every part's cost."""
    payload = SHARED_PAYLOAD if SHARED_PAYLOAD.is_file() else OWN_PAYLOAD
    body = payload.read_bytes()
    source = "../shared" if payload == SHARED_PAYLOAD else "tests/fixtures"
    print(f"payload: {payload.name} from {source} ({len(body):,} bytes); median of {BATCHES} x {CALLS} calls")
    parse(body)
    with PrivateRedis() as server:
        client = redis.Redis.from_url(server.url)
        redis_command(client, server.port)
        enqueue(client, body)
        collection(server.url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
