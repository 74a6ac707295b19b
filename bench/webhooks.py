"""Intake benchmark: ``spark serve`` (granian) against a naive Flask + gunicorn receiver, same load.

A third receiver, a no-op Probot app on Node (``bench/probot``), sets the latency to meet: it verifies and
parses each delivery and answers, storing nothing. It runs when ``node`` and ``npm`` are on the PATH (the
first run installs Probot from the npm registry into ``bench/probot/node_modules``).

Spark and the naive receiver each get their own private Redis. A separate load-generator process (asyncio,
persistent HTTP/1.1 connections where the server keeps them) sends N signed copies of the real
``pull_request.opened`` delivery with unique delivery ids at concurrency 1, 16 and 64, and reports
deliveries/s and latency; server CPU is read from /proc (each server's main process and its workers) and
from Redis' own ``INFO cpu``. Afterwards the jobs in each Redis are counted: every 2xx answer must be a
queued job.

Run: ``python -m bench webhooks`` (or ``python -m bench.webhooks``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from flask import Flask, request
from rq import Queue

from bot import processes
from bot.cli.main import build_parser
from bot.intake.signature import sign
from bot.redis_server import PrivateRedis, free_port
from sandbox.github.auth import generate_private_key_pem

ROOT = Path(__file__).resolve().parent.parent
SHARED_PAYLOAD = ROOT.parent / "shared" / "github" / "webhooks" / "pull_request" / "opened.payload.json"
OWN_PAYLOAD = ROOT / "tests" / "fixtures" / "webhooks" / "pull_request" / "opened.json"
SECRET = "bench-webhook-secret"
# (concurrency, deliveries per round): enough for stable rates, small enough for a run of about a minute.
LEVELS = ((1, 300), (16, 1500), (64, 1500))
ROUNDS = 3
# With wrk the levels run for a time instead of a count (wrk has no request count), and requests still in
# flight when wrk stops are stored but never answered, so "every 2xx is a job" becomes "at least": opt in with
# SPARK_BENCH_WRK=1 to see both servers under a client that costs them almost no CPU.
WRK_SECONDS = {1: 2, 16: 3, 64: 3}
USE_WRK = os.environ.get("SPARK_BENCH_WRK") == "1" and shutil.which("wrk") is not None
WARMUP = 300
# spark serve runs with its defaults (printed with the figures); SPARK_BENCH_SERVE adds options, e.g.
# "--workers 2 --threads 2", to compare settings.
SPARK_SERVE_OPTIONS = os.environ.get("SPARK_BENCH_SERVE", "").split()


def naive_app(redis_url: str, secret: str) -> Flask:
    """The reference receiver: verify, parse with Flask, enqueue the whole payload with RQ's defaults."""
    app = Flask("naive")
    queue = Queue(connection=redis.Redis.from_url(redis_url))

    @app.post("/webhook")
    def webhook() -> tuple[str, int]:
        body = request.get_data()
        expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, request.headers.get("X-Hub-Signature-256", "")):
            return "bad signature", 401
        queue.enqueue("workers.jobs.review", request.get_json())
        return "queued", 202

    return app


# ---- load generator (runs in its own process) -----------------------------------------------------------


async def _load(
    host: str, port: int, path: str, body: bytes, n: int, concurrency: int, tag: str
) -> dict[str, Any]:
    signature = sign(SECRET.encode(), body)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: GitHub-Hookshot/bench\r\n"
        f"Content-Type: application/json\r\nX-GitHub-Event: pull_request\r\n"
        f"X-Hub-Signature-256: {signature}\r\nContent-Length: {len(body)}\r\nX-GitHub-Delivery: "
    ).encode()
    counter = itertools.count()
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    connects = 0

    async def client() -> None:
        nonlocal connects
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        while (i := next(counter)) < n:
            started = time.perf_counter()
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port)
                connects += 1
            assert reader is not None
            writer.write(head + f"{tag}-{i:07d}\r\n\r\n".encode() + body)
            status_line, _, header_block = (await reader.readuntil(b"\r\n\r\n")).partition(b"\r\n")
            headers = {
                k.strip().lower(): v.strip()
                for k, _, v in (line.partition(b":") for line in header_block.split(b"\r\n") if line)
            }
            await reader.readexactly(int(headers.get(b"content-length", b"0")))
            latencies.append(time.perf_counter() - started)
            status = int(status_line.split()[1])
            statuses[status] = statuses.get(status, 0) + 1
            if headers.get(b"connection", b"").lower() == b"close":
                writer.close()
                reader = writer = None
        if writer is not None:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "n": n,
        "elapsed": elapsed,
        "rate": n / elapsed,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "statuses": statuses,
        "connects": connects,
    }


# wrk (C, event loop) generates load far more cheaply than any Python client, so the servers, not the client,
# get the machine's two cores. One thread: at these rates it is never the bottleneck.
WRK_SCRIPT = """
local counter = 0
ok, other = 0, 0
wrk.method = "POST"
local f = io.open(%(payload)s, "rb")
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-GitHub-Event"] = "pull_request"
wrk.headers["X-Hub-Signature-256"] = %(signature)s
wrk.headers["User-Agent"] = "GitHub-Hookshot/bench"
local threads = {}
function setup(thread) table.insert(threads, thread) end
function request()
  counter = counter + 1
  wrk.headers["X-GitHub-Delivery"] = %(tag)s .. "-" .. counter
  return wrk.format(nil, %(path)s)
end
function response(status, headers, body)
  if status >= 200 and status < 300 then ok = ok + 1 else other = other + 1 end
end
function done(summary, latency, requests)
  local good, bad = 0, 0
  for _, t in ipairs(threads) do good = good + t:get("ok"); bad = bad + t:get("other") end
  local form = 'WRK {"n": %%d, "elapsed": %%f, "p50_us": %%d, "p99_us": %%d, "ok": %%d, "other": %%d}\\n'
  io.write(string.format(form, summary.requests, summary.duration / 1e6,
    latency:percentile(50), latency:percentile(99), good, bad))
end
"""


def wrk_level(port: int, path: str, payload: Path, seconds: float, concurrency: int) -> dict[str, Any]:
    """Send signed deliveries with wrk for ``seconds`` at ``concurrency``; return the load figures."""
    tag = uuid.uuid4().hex
    signature = sign(SECRET.encode(), payload.read_bytes())
    # JSON string literals are valid Lua string literals for these ASCII values.
    values = {"payload": str(payload), "signature": signature, "tag": tag, "path": path}
    script = WRK_SCRIPT % {key: json.dumps(value) for key, value in values.items()}
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as lua:
        lua.write(script)
        lua.flush()
        command = ["wrk", "-t1", f"-c{concurrency}", f"-d{seconds}s", "--timeout", "10s", "-s", lua.name]
        command.append(f"http://127.0.0.1:{port}{path}")
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    data = json.loads(out.split("WRK ", 1)[1].splitlines()[0])
    statuses = {202: data["ok"]} if not data["other"] else {202: data["ok"], 0: data["other"]}
    return {
        "n": data["n"],
        "elapsed": data["elapsed"],
        "rate": data["n"] / data["elapsed"],
        "p50_ms": data["p50_us"] / 1000,
        "p99_ms": data["p99_us"] / 1000,
        "statuses": statuses,
        "connects": "-",
    }


def load_main(argv: list[str]) -> int:
    """Entry point of the load-generator process: prints one JSON result line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--payload", required=True)
    parser.add_argument("-n", type=int, required=True)
    parser.add_argument("-c", type=int, required=True)
    parser.add_argument("--tag", required=True)
    args = parser.parse_args(argv)
    body = Path(args.payload).read_bytes()
    result = asyncio.run(_load("127.0.0.1", args.port, args.path, body, args.n, args.c, args.tag))
    print(json.dumps(result))
    return 0


# ---- orchestration ----------------------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """Return user+system CPU of ``pid`` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    total, stack = 0.0, [pid]
    while stack:
        current = stack.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        stack += children.get(current, [])
    return total


def _redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """Wait until ``process`` listens on ``port``; fail if it exits first or nothing listens in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on port {port} after {timeout} s")


@dataclass
class Receiver:
    """One server under test: its process, port, webhook path, Redis and the queue its jobs land on."""

    name: str
    process: subprocess.Popen[bytes]
    port: int
    path: str
    # None for the Probot reference, which stores nothing.
    redis: redis.Redis | None
    queue_key: str
    accepted: int = 0

    def run_level(self, payload: Path, n: int, concurrency: int) -> dict[str, Any]:
        """Send ``n`` deliveries (wrk: for a time that sends about as many) at ``concurrency``; add CPU."""
        cpu_before, redis_before = _cpu_seconds(self.process.pid), self._redis_cpu()
        if USE_WRK:
            result = wrk_level(self.port, self.path, payload, WRK_SECONDS[concurrency], concurrency)
            return self._account(result, cpu_before, redis_before)
        command = [
            sys.executable,
            "-m",
            "bench.webhooks",
            "load",
            "--port",
            str(self.port),
            "--path",
            self.path,
        ]
        command += [
            "--payload",
            str(payload),
            "-n",
            str(n),
            "-c",
            str(concurrency),
            "--tag",
            uuid.uuid4().hex,
        ]
        out = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True).stdout
        return self._account(json.loads(out), cpu_before, redis_before)

    def _account(self, result: dict[str, Any], cpu_before: float, redis_before: float) -> dict[str, Any]:
        n = result["n"]
        result["cpu_ms"] = (_cpu_seconds(self.process.pid) - cpu_before) * 1000 / n
        result["redis_cpu_ms"] = (self._redis_cpu() - redis_before) * 1000 / n
        self.accepted += sum(
            count for status, count in result["statuses"].items() if 200 <= int(status) < 300
        )
        return result

    def _redis_cpu(self) -> float:
        return _redis_cpu(self.redis) if self.redis is not None else 0.0

    def stop(self) -> None:
        """Stop the server."""
        processes.stop(self.process, timeout=20)


def start_spark(redis_url: str) -> Receiver:
    """Start ``spark serve`` (real granian, its default settings) on a free port."""
    port = free_port()
    env = {**os.environ, "GITHUB_WEBHOOK_SECRET": SECRET, "REDIS_URL": redis_url, "LOG_LEVEL": "INFO"}
    command = [
        sys.executable,
        "-m",
        "bot.cli.main",
        "--env-file",
        os.devnull,
        "serve",
        "--bind",
        f"127.0.0.1:{port}",
    ]
    command += SPARK_SERVE_OPTIONS
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_for_port(port, process)
    client = redis.Redis.from_url(redis_url)
    return Receiver("spark", process, port, "/api/github/webhooks", client, "rq:queue:spark-review")


def start_naive(redis_url: str) -> Receiver:
    """Start the naive receiver under gunicorn with gunicorn's default settings."""
    port = free_port()
    command = [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}"]
    command += [f"bench.webhooks:naive_app({redis_url!r}, {SECRET!r})"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, process)
    client = redis.Redis.from_url(redis_url)
    return Receiver("naive", process, port, "/webhook", client, "rq:queue:default")


PROBOT_DIR = ROOT / "bench" / "probot"


def start_probot() -> Receiver | None:
    """Start the no-op Probot receiver, installing Probot first if needed; None without node and npm."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        print("probot: skipped (node and npm are needed for the reference receiver)")
        return None
    if not (PROBOT_DIR / "node_modules" / "probot").is_dir():
        print("probot: installing Probot from the npm registry (first run only)")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--silent"], cwd=PROBOT_DIR, check=True)
    port = free_port()
    # Probot logs each request at "info", as a deployed app would; like Spark's, its log goes nowhere here.
    env = {
        **os.environ,
        "APP_ID": "1",
        "PRIVATE_KEY": generate_private_key_pem(),
        "WEBHOOK_SECRET": SECRET,
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "LOG_LEVEL": "info",
        "NODE_ENV": "production",
    }
    command = [node, "node_modules/probot/bin/probot.js", "run", "./index.js"]
    process = subprocess.Popen(
        command, cwd=PROBOT_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_for_port(port, process)
    return Receiver("probot", process, port, "/api/github/webhooks", None, "")


def _row(name: str, concurrency: int, r: dict[str, Any]) -> str:
    errors = sum(count for status, count in r["statuses"].items() if not 200 <= int(status) < 300)
    redis_cpu = f"{r['redis_cpu_ms']:>9.3f}" if name != "probot" else f"{'-':>9}"
    return (
        f"{name:<6} {concurrency:>3} {r['rate']:>12.0f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} "
        f"{r['cpu_ms']:>9.3f} {redis_cpu} {r['connects']:>8} {errors:>6}"
    )


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> int:
    """Run the receivers through every concurrency level, taking turns; print figures, ratios and p99s."""
    payload = SHARED_PAYLOAD if SHARED_PAYLOAD.is_file() else OWN_PAYLOAD
    source = "../shared" if payload == SHARED_PAYLOAD else "tests/fixtures"
    print(f"payload: {payload.name} from {source} ({payload.stat().st_size} bytes); cores: {os.cpu_count()}")
    defaults = build_parser().parse_args(["serve"])
    options = (
        " ".join(SPARK_SERVE_OPTIONS) or f"defaults: {defaults.workers} workers x {defaults.threads} threads"
    )
    print(f"spark: spark serve (granian, {options})")
    generator = "wrk (one thread), each round for a fixed time" if USE_WRK else "Python asyncio, N per round"
    print(f"load generator: {generator}, in its own process")
    print("naive: Flask + gunicorn defaults (1 sync worker), RQ defaults, whole payload enqueued")
    print(
        "probot: a no-op Probot app on Node (verifies, parses, answers; stores nothing): the latency to meet"
    )
    print(
        f"{ROUNDS} rounds per level, the servers taking turns in rotating order (the machine's speed drifts;"
    )
    print("a ratio is taken within a round, and the median round is reported)")
    rounds: dict[int, list[dict[str, dict[str, Any]]]] = {c: [] for c, _ in LEVELS}
    with PrivateRedis() as spark_redis, PrivateRedis() as naive_redis:
        receivers: list[Receiver] = []
        try:
            receivers.append(start_spark(spark_redis.url))
            receivers.append(start_naive(naive_redis.url))
            probot = start_probot()
            if probot is not None:
                receivers.append(probot)
            for receiver in receivers:
                receiver.run_level(payload, WARMUP, 16)
            for concurrency, n in LEVELS:
                for index in range(ROUNDS):
                    # Rotate who goes first, so no server always meets the machine in the same state.
                    shift = index % len(receivers)
                    order = receivers[shift:] + receivers[:shift]
                    rounds[concurrency].append({r.name: r.run_level(payload, n, concurrency) for r in order})
            counts = {
                r.name: (r.accepted, int(r.redis.llen(r.queue_key))) for r in receivers if r.redis is not None
            }
        finally:
            for receiver in receivers:
                receiver.stop()
    names = [r.name for r in receivers]
    print()
    print("server   c  deliveries/s   p50 ms   p99 ms  CPU ms/d  Redis ms/d  connects  non-2xx")
    for concurrency, _ in LEVELS:
        for results in rounds[concurrency]:
            for name in names:
                print(_row(name, concurrency, results[name]))
    print()
    for concurrency, _ in LEVELS:
        ratios = [r["spark"]["rate"] / r["naive"]["rate"] for r in rounds[concurrency]]
        # The median round's CPU figures, so the CPU ratio comes from the round the rate ratio does.
        middle = rounds[concurrency][ratios.index(_median(ratios))]
        ours, naive = middle["spark"], middle["naive"]
        p99 = {name: _median([r[name]["p99_ms"] for r in rounds[concurrency]]) for name in names}
        print(
            f"c={concurrency:<3} spark/naive: {_median(ratios):.2f}x deliveries/s "
            f"(rounds {', '.join(f'{ratio:.2f}x' for ratio in ratios)}), "
            f"CPU/delivery {ours['cpu_ms'] / naive['cpu_ms']:.2f}x; "
            f"median p99 ms: {', '.join(f'{name} {value:.2f}' for name, value in p99.items())}"
        )
    ok = True
    for name, (accepted, queued) in counts.items():
        print(f"durability {name}: {accepted} deliveries answered 2xx, {queued} jobs in Redis")
        # wrk leaves requests in flight when it stops: stored, never answered.
        ok = ok and (accepted <= queued if USE_WRK else accepted == queued)
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["load"]:
        sys.exit(load_main(sys.argv[2:]))
    sys.exit(main())
