"""Jobs/s and TCP connects per 100 jobs: Spark's ``SimpleWorker`` runtime vs RQ's default forking ``Worker``.

Both run the same job (one GitHub call through the GitHub adapter and one streamed model call through the
Cerebras adapter) against the local sandboxes, on a private Redis, in the same run. Connections are counted
server-side, at each sandbox's ``accept()``; installation-token mints from the sandbox's request log.

    python -m bench.worker_throughput [--jobs N] [--no-model]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from rq import Queue, Worker
from rq.job import JobStatus
from rq.registry import FinishedJobRegistry

from bot.logs import configure_logging
from bot.redis_server import PrivateRedis
from bot.settings import Settings
from sandbox.cerebras import DEFAULT_API_KEY, ModelSandbox, Script, Speed
from sandbox.github import GitHubSandbox
from workers import context
from workers.runtime import work

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "spark-interactive"
REPO = "octo/bench"
MODEL = "gpt-oss-120b"
# By dotted path, so the job resolves the same whether this module runs as __main__ or via `python -m bench`.
JOB = "bench.worker_throughput.call_upstreams"


def call_upstreams(installation_id: int, repo: str, number: int, use_model: bool) -> str:
    """The benchmark job: read the pull request, then (optionally) stream a short model reply."""
    clients = context.process()
    head = clients.github.installation(installation_id).pull(repo, number).head_sha
    if use_model:
        clients.model.complete([{"role": "user", "content": "ping"}], MODEL, 64)
    return head


class AcceptCounter:
    """Counts TCP connections a socketserver-based sandbox accepts (wraps that server's ``get_request``).

    It also turns Nagle's algorithm off on each accepted socket, as production servers do: Python's
    ``http.server`` writes headers and the first chunk separately, and Nagle plus the client's delayed ACK
    would add ~40 ms to every response, drowning the per-job overhead this benchmark compares.
    """

    def __init__(self, server: Any) -> None:
        self.count = 0
        self._lock = threading.Lock()
        accept: Callable[[], tuple[socket.socket, Any]] = server.get_request

        def counted() -> tuple[socket.socket, Any]:
            conn = accept()
            conn[0].setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.count += 1
            return conn

        server.get_request = counted

    def take(self) -> int:
        """Return the count so far and start again from zero."""
        with self._lock:
            count, self.count = self.count, 0
        return count


@dataclass
class Figures:
    """One worker's run."""

    name: str
    jobs: int
    seconds: float
    github_connects: int
    model_connects: int
    token_mints: int
    redis_connects: int
    p50_job_ms: float

    @property
    def jobs_per_second(self) -> float:
        """Return finished jobs per second of working time."""
        return self.jobs / self.seconds if self.seconds else 0.0

    def per_100(self, value: int) -> float:
        """Return ``value`` per 100 jobs."""
        return value * 100 / self.jobs


def _worker_env(redis_url: str, github: GitHubSandbox, model_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CEREBRAS_", "REDIS_"))}
    env.update(
        REDIS_URL=redis_url,
        GITHUB_APP_ID=str(github.app_id),
        GITHUB_PRIVATE_KEY=github.private_key_pem,
        GITHUB_API_URL=github.url,
        CEREBRAS_API_KEY=DEFAULT_API_KEY,
        CEREBRAS_BASE_URL=model_url,
        LOG_LEVEL="WARNING",
        PYTHONPATH=str(ROOT),
    )
    return env


def run_worker(kind: str) -> int:
    """Worker-process entry: drain the queue once with ``kind`` ("simple": Spark's runtime, "fork": RQ's)."""
    settings = Settings.load(env_file=None)
    configure_logging(settings)
    if kind == "simple":
        return work(settings, burst=True, queue_names=(QUEUE,))
    conn = redis.Redis.from_url(settings.redis_url or "")
    queue = Queue(QUEUE, connection=conn)
    # The forking worker at its best: the parent runs the job once before forking, so every horse inherits
    # warm imports and SDK model classes; then it closes its clients, because sockets must not cross a fork.
    first = queue.fetch_job(queue.job_ids[0])
    context.install(settings, conn)
    if first is not None:
        call_upstreams(*first.args)
    context.uninstall()
    context.install(settings, conn)  # each horse builds its own clients from these settings
    Worker([queue], connection=conn).work(burst=True, logging_level="WARNING")
    return 0


def _measure(
    name: str,
    kind: str,
    jobs: int,
    conn: redis.Redis,
    env: dict[str, str],
    counters: tuple[AcceptCounter, AcceptCounter],
    github: GitHubSandbox,
    job_args: tuple[Any, ...],
) -> Figures:
    queue = Queue(QUEUE, connection=conn)
    queue.empty()  # type: ignore[no-untyped-call]
    for counter in counters:
        counter.take()
    mints_before = sum(1 for r in github.request_log if r.path.endswith("/access_tokens"))
    redis_before = int(conn.info("stats")["total_connections_received"])
    queue.enqueue_many([Queue.prepare_data(JOB, job_args, result_ttl=600) for _ in range(jobs)])
    command = [sys.executable, "-m", "bench.worker_throughput", "--worker", kind]
    subprocess.run(command, cwd=ROOT, env=env, check=True)
    registry = FinishedJobRegistry(queue=queue)
    finished = [queue.fetch_job(job_id) for job_id in registry.get_job_ids()]
    done = [job for job in finished if job is not None and job.get_status() == JobStatus.FINISHED]
    if len(done) != jobs:
        raise RuntimeError(f"{name}: {len(done)} of {jobs} jobs finished")
    durations = sorted(
        (j.ended_at - j.started_at).total_seconds() for j in done if j.started_at and j.ended_at
    )
    started = min(job.started_at for job in done if job.started_at)
    ended = max(job.ended_at for job in done if job.ended_at)
    for job in done:
        job.delete()
    return Figures(
        name=name,
        jobs=jobs,
        seconds=(ended - started).total_seconds(),
        github_connects=counters[0].take(),
        model_connects=counters[1].take(),
        token_mints=sum(1 for r in github.request_log if r.path.endswith("/access_tokens")) - mints_before,
        redis_connects=int(conn.info("stats")["total_connections_received"]) - redis_before,
        p50_job_ms=durations[len(durations) // 2] * 1000,
    )


def _print(results: list[Figures], use_model: bool) -> None:
    print(
        f"{'worker':<30}{'jobs':>6}{'jobs/s':>9}{'p50 job ms':>12}{'GitHub conn/100':>17}"
        f"{'model conn/100':>16}{'mints/100':>11}{'Redis conn/100':>16}"
    )
    for r in results:
        print(
            f"{r.name:<30}{r.jobs:>6}{r.jobs_per_second:>9.1f}{r.p50_job_ms:>12.1f}"
            f"{r.per_100(r.github_connects):>17.1f}"
            f"{r.per_100(r.model_connects) if use_model else 0:>16.1f}{r.per_100(r.token_mints):>11.1f}"
            f"{r.per_100(r.redis_connects):>16.1f}"
        )
    simple, fork = results
    ratio = simple.jobs_per_second / fork.jobs_per_second if fork.jobs_per_second else float("inf")
    print(f"ratio jobs/s (spark worker / forking Worker): {ratio:.2f}x  (target >= 3x)")
    print(
        f"spark worker connects per 100 jobs: GitHub {simple.per_100(simple.github_connects):.2f}, "
        f"model {simple.per_100(simple.model_connects):.2f}  (target <= 1 per upstream)"
    )


def main(argv: list[str] | None = None) -> int:
    """Run both workers over the same jobs and print jobs/s and connects per 100 jobs."""
    parser = argparse.ArgumentParser(prog="bench.worker_throughput")
    parser.add_argument(
        "--jobs", type=int, default=200, help="jobs for Spark's worker (default: %(default)s)"
    )
    parser.add_argument(
        "--fork-jobs", type=int, default=40, help="jobs for the forking worker (default: %(default)s)"
    )
    parser.add_argument("--no-model", action="store_true", help="jobs make only the GitHub call")
    parser.add_argument("--worker", choices=("simple", "fork"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv if argv is not None else [])
    if args.worker:
        return run_worker(args.worker)
    use_model = not args.no_model
    # The model answers at once: the benchmark measures the worker's overhead, not generation time.
    speed = Speed(ttft_ms=0, tokens_per_second=1_000_000)
    with PrivateRedis() as private, GitHubSandbox() as github, ModelSandbox(speed=speed) as model:
        installation_id = github.create_installation("octo")
        github.create_repo(REPO, {"app.py": "x = 1\n"}, installation_id=installation_id)
        number = github.open_pull_request(REPO, "feature", {"app.py": "x = 2\n"})
        model.add_scripts([Script("pong", repeat=True)])
        # The forking run's counts include its parent's one warm-up call (about 2.5 per 100 at 40 jobs).
        counters = (AcceptCounter(github.server._server), AcceptCounter(model._server))
        conn = redis.Redis.from_url(private.url)
        env = _worker_env(private.url, github, model.url)
        job_args = (installation_id, REPO, number, use_model)
        print(
            f"{args.jobs} jobs (forking worker: {args.fork_jobs}); each: GET pull request"
            + (" + one streamed model call (sandbox, 0 ms TTFT)" if use_model else "")
        )
        results = [
            _measure(
                "spark worker (SimpleWorker)", "simple", args.jobs, conn, env, counters, github, job_args
            ),
            _measure(
                "rq Worker (fork per job)", "fork", args.fork_jobs, conn, env, counters, github, job_args
            ),
        ]
        _print(results, use_model)
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
