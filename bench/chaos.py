"""Reliability under load and faults, against the real stack: ``spark serve`` (granian), ``spark worker``
processes, a private Redis with an append-only file, and the local GitHub, all on 127.0.0.1.

The building blocks (``ChaosStack``, ``mixed_deliveries``, ``send``, ``settle``, ``tally``) are shared by
``tests/reliability`` (small counts, in CI) and by ``main`` (the full counts, for ``docs/reliability.md``).
Counting: every 2xx answer of the receiver must name a delivery stored in Redis (``spark:delivery:<id>``),
and every job stored must appear in ``spark:jobs:ran`` (which every job appends to before it acts) at least
once: fewer is lost. A job that appears more often than once plus the retries RQ recorded after a failure
**ran again** (at-least-once delivery: a worker that lost Redis after the job's work could not record its end,
and the reaper ran the job once more when that worker was gone). Whether that did harm is read from the local
GitHub afterwards: every object Spark creates carries its identity (a comment's or review's ``reply`` marker,
a check run's external id, a reaction's subject), so a second object with one identity is a **duplicated**
visible effect, and a job that ran again without one had its visible effects once.

Run: ``python -m bench chaos`` (or ``python -m bench.chaos --deliveries 20000 --concurrency 64``).
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import itertools
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import orjson
import redis
from rq import Queue, Worker
from rq.job import Job
from rq.registry import StartedJobRegistry

from bench.fuzz_intake import corpus, decide
from bench.webhooks import wait_for_port
from bot import keys, processes
from bot.core import markers
from bot.intake.enqueue import DELIVERY_KEY, POLICIES, QUEUED_KEY, stored_job_ids
from bot.intake.routing import INTERACTIVE, REVIEW
from bot.intake.signature import sign
from bot.redis_server import PrivateRedis, as_text, free_port
from sandbox import scenario as scenarios
from sandbox.cerebras import ModelSandbox
from sandbox.github import GitHubSandbox

ROOT = Path(__file__).resolve().parent.parent
SECRET = "chaos-webhook-secret"
# The pull request every load delivery is aimed at; the model finds nothing, fast, however often asked.
SEED_SCENARIO = """
name: chaos-target
repository:
  owner: acme
  name: load
  files:
    src/app.py: |
      def double(x):
          return 2 * x
pull_request:
  title: Triple
  author: alice
  head_branch: triple
  files:
    src/app.py: |
      def double(x):
          return 2 * x


      def triple(x):
          return 3 * x
collaborators:
  alice: write
events:
  - wait: 0
model:
  speed: {ttft_ms: 20, tokens_per_second: 5000}
  replies:
    - repeat: true
      reply: |
        NO_FINDINGS
"""
RAN_KEY = keys.JOBS_RAN.pattern  # written by workers.jobs with SPARK_RUN_LOG set (see Stack.env)
QUEUES = (INTERACTIVE, REVIEW)
PATH = "/api/github/webhooks"

Outbound = tuple[str, str, bytes]  # (X-GitHub-Delivery, X-GitHub-Event, body)


@dataclass(frozen=True, slots=True)
class Sent:
    """One delivery as the load generator saw it: its id, the HTTP status and the receiver's ``status``."""

    delivery_id: str
    status: int
    outcome: str
    at: float
    attempts: int = 1


@dataclass(frozen=True, slots=True)
class Target:
    """The seeded pull request the load's deliveries are pointed at, so their jobs do real work."""

    installation_id: int
    owner: str
    repo: str
    number: int
    head_sha: str


def aim(payload: dict[str, Any], target: Target) -> dict[str, Any]:
    """Return a copy of ``payload`` pointed at ``target`` (installation, repository, PR number, head)."""
    data: dict[str, Any] = orjson.loads(orjson.dumps(payload))
    if isinstance(data.get("installation"), dict):
        data["installation"]["id"] = target.installation_id
    repo = data.get("repository")
    if isinstance(repo, dict):
        repo.update(name=target.repo, full_name=f"{target.owner}/{target.repo}")
        if isinstance(repo.get("owner"), dict):
            repo["owner"]["login"] = target.owner
    for key in ("pull_request", "issue"):
        if isinstance(data.get(key), dict):
            data[key]["number"] = target.number
    if isinstance(data.get("pull_request"), dict) and isinstance(data["pull_request"].get("head"), dict):
        data["pull_request"]["head"]["sha"] = target.head_sha
    if isinstance(data.get("check_run"), dict):
        data["check_run"]["head_sha"] = target.head_sha
        for pull in data["check_run"].get("pull_requests") or []:
            if isinstance(pull, dict):
                pull["number"] = target.number
    return data


def mixed_deliveries(
    n: int, seed: int = 1, replay_share: float = 0.03, target: Target | None = None
) -> list[Outbound]:
    """Return ``n`` deliveries drawn from the real fixtures, some of them replays of earlier ids."""
    rng = random.Random(seed)
    samples = [
        (event, orjson.dumps(aim(payload, target) if target else payload)) for event, payload in corpus()
    ]
    out: list[Outbound] = []
    for _ in range(n):
        if out and rng.random() < replay_share:
            out.append(rng.choice(out))  # GitHub redelivers with the same id and body
            continue
        event, body = rng.choice(samples)
        out.append((str(uuid.uuid4()), event, body))
    return out


def send(
    port: int,
    deliveries: list[Outbound],
    concurrency: int,
    retry_for: float = 0.0,
    rate: float | None = None,
) -> list[Sent]:
    """Post every delivery, signed, from ``concurrency`` threads with keep-alive connections.

    With ``rate``, the threads together send at most about that many deliveries per second (so a load
    lasts long enough for a fault to strike in the middle of it).

    With ``retry_for``, a delivery that failed (no answer, or 5xx) is sent again with the same id for up to
    that many seconds, as an operator's redelivery would; only its last answer is recorded.
    """
    todo: queue.SimpleQueue[Outbound | None] = queue.SimpleQueue()
    for item in deliveries:
        todo.put(item)
    for _ in range(concurrency):
        todo.put(None)
    results: list[Sent] = []
    lock = threading.Lock()

    def worker() -> None:
        poster = _Poster(port)
        mine: list[Sent] = []
        while (item := todo.get()) is not None:
            first = time.monotonic()
            attempts = 1
            while True:
                sent = poster.post(*item)
                if sent.status not in (0, 502, 503) or time.monotonic() - first > retry_for:
                    break
                attempts += 1
                time.sleep(0.05)
            mine.append(dataclasses.replace(sent, attempts=attempts))
            if rate:
                time.sleep(concurrency / rate)
        poster.conn.close()
        with lock:
            results.extend(mine)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


class _Poster:
    """One keep-alive connection to the receiver, reopened after a failure."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def post(self, delivery_id: str, event: str, body: bytes) -> Sent:
        """Post one signed delivery; return its answer (status 0 when the connection failed)."""
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery_id,
            "X-Hub-Signature-256": sign(SECRET.encode(), body),
            "User-Agent": "GitHub-Hookshot/chaos",
        }
        try:
            self.conn.request("POST", PATH, body=body, headers=headers)
            response = self.conn.getresponse()
            data = response.read()
            status = response.status
            outcome = str(json.loads(data).get("status", "error")) if data else ""
        except (OSError, http.client.HTTPException, ValueError):
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            status, outcome = 0, "connection failed"
        return Sent(delivery_id, status, outcome, time.monotonic())


@dataclass
class ChaosStack:
    """Redis (append-only), the local GitHub, ``spark serve`` and ``spark worker --processes N``."""

    workdir: Path
    worker_processes: int = 2
    web_workers: int = 2
    extra_env: dict[str, str] = field(default_factory=dict)
    redis_server: PrivateRedis = field(init=False)
    github: GitHubSandbox = field(init=False)
    model: ModelSandbox = field(init=False)
    target: Target = field(init=False)
    web: subprocess.Popen[bytes] | None = None
    worker: subprocess.Popen[bytes] | None = None
    port: int = 0

    def start(self) -> ChaosStack:
        """Start everything and wait until the receiver listens and the workers have registered."""
        self.redis_server = PrivateRedis(persist=True).start()
        self.github = GitHubSandbox(webhook_secret=SECRET)
        # The chaos runs measure loss under load, not GitHub's write budget: one installation's thousands of
        # jobs would otherwise spend most of the run waiting out the content-creation limits.
        self.github.faults.content.per_minute = self.github.faults.content.per_hour = 10**6
        self.github.start()
        scenario = scenarios.parse(SEED_SCENARIO, source="<chaos seed>")
        self.model = scenario.model_sandbox().start()
        scene = scenarios.apply(scenario, self.github)
        owner, name = scene.repo.split("/")
        installation = self.github.state.repo(scene.repo).installation_id
        assert installation is not None, "the seed scenario installs the App"
        head = self.github.head_sha(scene.repo, scene.pr_number)
        self.target = Target(installation, owner, name, scene.pr_number, head)
        self.port = free_port()
        self.github.webhook_url = f"http://127.0.0.1:{self.port}{PATH}"
        self.start_web()
        self.start_workers()
        return self

    @property
    def redis(self) -> redis.Redis:
        """Return a fresh client of the stack's Redis."""
        return redis.Redis.from_url(self.redis_server.url)

    def env(self) -> dict[str, str]:
        """Return the environment of the stack's Spark processes (none of the caller's settings)."""
        prefixes = ("GITHUB_", "CEREBRAS_", "SPARK_", "REDIS_URL", "LOG_LEVEL")
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith(prefixes)}
        env.update(
            GITHUB_APP_ID=str(self.github.app_id),
            GITHUB_PRIVATE_KEY=self.github.private_key_pem,
            GITHUB_WEBHOOK_SECRET=SECRET,
            GITHUB_API_URL=self.github.url,
            GITHUB_URL=self.github.url,
            REDIS_URL=self.redis_server.url,
            CEREBRAS_API_KEY=self.model.api_key,
            CEREBRAS_BASE_URL=self.model.url,
            SPARK_DATA_DIR=str(self.workdir),
            SPARK_REVIEW_DEBOUNCE_SECONDS="0",
            SPARK_RUN_LOG="1000000",
            SPARK_GITHUB_WRITES_PER_MINUTE="1000000",
            SPARK_GITHUB_WRITES_PER_HOUR="1000000",
            LOG_LEVEL="WARNING",
            **self.extra_env,
        )
        return env

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"{name}.log").open("ab")
        command = [sys.executable, "-m", "bot.cli.main", "--env-file", os.devnull, *args]
        process = subprocess.Popen(command, cwd=ROOT, env=self.env(), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        return process

    def start_web(self) -> None:
        """Start ``spark serve`` (granian) on the stack's port."""
        bind = f"127.0.0.1:{self.port}"
        self.web = self._spawn("web", "serve", "--bind", bind, "--workers", str(self.web_workers))
        wait_for_port(self.port, self.web)

    def start_workers(self, timeout: float = 60) -> None:
        """Start ``spark worker --processes N`` and wait until its N workers are registered."""
        conn = self.redis
        before = Worker.count(connection=conn)
        self.worker = self._spawn("worker", "worker", "--processes", str(self.worker_processes))
        deadline = time.monotonic() + timeout
        while Worker.count(connection=conn) < before + self.worker_processes:
            if self.worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"workers did not start; see {self.workdir / 'worker.log'}")
            time.sleep(0.05)
        conn.close()

    def stop(self) -> None:
        """Stop every process and server of the stack."""
        for process in (self.worker, self.web):
            if process is not None:
                processes.stop(process, timeout=30)
        self.github.stop()
        self.model.stop()
        self.redis_server.close()

    def __enter__(self) -> ChaosStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def signal_and_wait(process: subprocess.Popen[bytes] | None, signum: int, timeout: float = 60) -> int:
    """Send ``signum`` to a process and return its exit code once it has exited."""
    assert process is not None
    process.send_signal(signum)
    return process.wait(timeout=timeout)


def dropped_jobs(conn: redis.Redis) -> int:
    """Return how many jobs the intake queued that are still "queued" (call when the queues are empty)."""
    job_ids = cast("list[bytes]", conn.zrange(QUEUED_KEY, 0, -1))  # a client without decode_responses
    with conn.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hget(f"{Job.redis_job_namespace_prefix}{as_text(job_id)}", "status")
        return sum(status == b"queued" for status in pipe.execute())


def settle(conn: redis.Redis, timeout: float = 300, quiet: float = 1.0) -> None:
    """Wait until both queues are empty and no job is running, for ``quiet`` seconds in a row."""
    deadline = time.monotonic() + timeout
    calm_since: float | None = None
    while True:
        busy = sum(
            int(conn.llen(Queue(name, connection=conn).key))
            + StartedJobRegistry(name, connection=conn).get_job_count(cleanup=False)
            for name in QUEUES
        )
        # A job a worker popped but never started (Redis went away in between) is in no queue and no registry
        # until the reaper queues it again: still work to wait for.
        busy = busy or dropped_jobs(conn)
        now = time.monotonic()
        if busy:
            calm_since = None
        elif calm_since is None:
            calm_since = now
        elif now - calm_since >= quiet:
            return
        if now > deadline:
            raise TimeoutError(f"{busy} jobs still queued or running after {timeout} s")
        time.sleep(0.1)


@dataclass
class Tally:
    """What happened to a load: answers by status, deliveries stored, jobs run, lost and duplicated."""

    sent: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    accepted_2xx: int = 0
    unstored_2xx: int = 0
    jobs: int = 0
    runs: int = 0
    retries: int = 0
    lost: int = 0
    # Jobs run more often than RQ recorded (``ran_again``) and, of those, how many runs came from a worker
    # other than the one before (the first died or lost Redis, the reaper queued the job again).
    ran_again: int = 0
    ran_again_other_worker: int = 0
    # Second visible effects: objects on GitHub whose identity another object already has.
    duplicated: int = 0
    failed_jobs: int = 0
    lost_ids: list[str] = field(default_factory=list)
    ran_again_ids: list[str] = field(default_factory=list)
    # Each job run again: its name and each run's worker and start (epoch seconds).
    ran_again_runs: list[dict[str, Any]] = field(default_factory=list)
    duplicated_effects: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Return the figures as JSON-able data."""
        data = {k: v for k, v in self.__dict__.items() if not k.endswith("_ids")}
        data["answers"] = dict(sorted(self.answers.items()))
        return data


def visible_duplicates(github: GitHubSandbox) -> list[str]:
    """Return a description of every second object with one identity on the local GitHub: comments and
    reviews by their ``reply`` marker, check runs by external id, reactions by subject, content and author."""
    state = github.state
    seen: Counter[tuple[str, ...]] = Counter()
    with state.lock:
        for comment in state.issue_comments.values():
            key = markers.trailing(comment.body, "reply")
            if key is not None:
                seen["issue comment", comment.repo, str(comment.number), key] += 1
        for review_comment in state.review_comments.values():
            key = markers.trailing(review_comment.body, "reply")
            if key is not None:
                seen["review comment", review_comment.repo, str(review_comment.number), key] += 1
        for review in state.reviews.values():
            key = markers.trailing(review.body, "reply")
            if key is not None:
                seen["review", review.repo, str(review.number), key] += 1
        for run in state.check_runs.values():
            if run.external_id:
                seen["check run", run.repo, run.head_sha, run.external_id] += 1
        for reaction in state.reactions.values():
            subject = (reaction.subject, str(reaction.subject_id))
            seen["reaction", *subject, reaction.content, reaction.author] += 1
    return [" ".join(key) for key, count in sorted(seen.items()) for _ in range(count - 1)]


def tally(conn: redis.Redis, sent: list[Sent], github: GitHubSandbox | None = None) -> Tally:
    """Count lost work, jobs run again and second visible effects for ``sent`` (call after ``settle``)."""
    result = Tally(sent=len(sent))
    job_ids: set[str] = set()
    for item in sent:
        result.answers[f"{item.status} {item.outcome}".strip()] += 1
        if not 200 <= item.status < 300 or item.outcome in ("ignored", "pong"):
            continue
        result.accepted_2xx += 1
        stored = conn.get(DELIVERY_KEY.format(item.delivery_id))
        if stored is None:
            result.unstored_2xx += 1
            continue
        job_ids.update(stored_job_ids(stored))
    runs: Counter[str] = Counter()
    entries: dict[str, list[dict[str, Any]]] = {}
    for raw in conn.lrange(RAN_KEY, 0, -1):
        entry = orjson.loads(raw)
        runs[str(entry["job_id"])] += 1
        entries.setdefault(str(entry["job_id"]), []).append(entry)
    result.jobs = len(job_ids)
    for job_id in sorted(job_ids):
        ran = runs.get(job_id, 0)
        result.runs += ran
        job = Job.fetch(job_id, connection=conn) if Job.exists(job_id, connection=conn) else None
        if job is None or ran == 0:
            result.lost += 1
            result.lost_ids.append(job_id)
            continue
        allowed = POLICIES[job.origin].retries
        retried = allowed - (job.retries_left if job.retries_left is not None else allowed)
        # A job deferred for GitHub's rate limits (it returned RQ's Retry) runs again by design.
        retried += job.number_of_retries or 0
        result.retries += retried
        status = job.get_status(refresh=False)
        result.failed_jobs += getattr(status, "value", status) == "failed"
        if ran > 1 + retried:
            result.ran_again += ran - 1 - retried
            result.ran_again_ids.append(job_id)
            # Runs again on another worker than the run before, at most as many as ran again: a retry RQ
            # recorded may have moved to another worker too, and is not a run again.
            moved = sum(a.get("worker") != b.get("worker") for a, b in itertools.pairwise(entries[job_id]))
            result.ran_again_other_worker += min(moved, ran - 1 - retried)
            ran = entries[job_id]
            result.ran_again_runs.append(
                {"job": ran[0]["job"], "runs": [(e.get("worker"), e.get("at")) for e in ran]}
            )
    if github is not None:
        result.duplicated_effects = visible_duplicates(github)
        result.duplicated = len(result.duplicated_effects)
    return result


# ---- scenarios (the tests run them small; main runs them at full size) -----------------------------------


def run_load(workdir: Path, n: int, concurrency: int, processes: int = 2) -> dict[str, Any]:
    """Send ``n`` mixed deliveries at ``concurrency``; return the tally and rates."""
    with ChaosStack(workdir, worker_processes=processes) as stack:
        deliveries = mixed_deliveries(n, target=stack.target)
        began = time.monotonic()
        sent = send(stack.port, deliveries, concurrency)
        intake_s = time.monotonic() - began
        conn = stack.redis
        settle(conn, timeout=max(300, n / 10))
        done_s = time.monotonic() - began
        counted = tally(conn, sent, stack.github)
        ops = _redis_commands(conn)
        # How the local GitHub answered the workers (a 403 here is its primary rate limit per installation).
        github_answers = Counter(str(r.status) for r in stack.github.request_log)
    return {
        **counted.as_dict(),
        "github_answers": dict(sorted(github_answers.items())),
        "concurrency": concurrency,
        "worker_processes": processes,
        "intake_per_s": n / intake_s,
        "jobs_per_s": counted.runs / done_s,
        "redis_commands_per_delivery": ops / n,
        "seconds": done_s,
    }


def _redis_commands(conn: redis.Redis) -> int:
    stats = conn.info("stats")
    return int(stats.get("total_commands_processed", 0))


# How long the Redis outage scenario's load lasts (it is paced); the outage starts a quarter of the way in.
LOAD_SECONDS = 4.0


def run_redis_outage(workdir: Path, n: int, concurrency: int, down_s: float = 1.5) -> dict[str, Any]:
    """Stop Redis for ``down_s`` in the middle of a load (direct posts and sandbox webhooks), restart it,
    redeliver the sandbox's failed deliveries with ``spark redeliver``; return the tally."""
    with ChaosStack(workdir) as stack:
        deliveries = mixed_deliveries(n, seed=2, replay_share=0, target=stack.target)
        # Webhooks that queue a job, so each must end up stored once Redis is back.
        aimed = [(e, aim(p, stack.target)) for e, p in corpus()]
        samples = [(e, p) for e, p in aimed if decide(e, orjson.dumps(p)).startswith("202 queued")]
        hooks: list[str] = []
        outage: dict[str, float] = {}

        def chaos() -> None:
            time.sleep(LOAD_SECONDS / 4)
            outage["down"], outage["down_epoch"] = time.monotonic(), time.time()
            stack.redis_server.stop()
            # Webhooks the local GitHub sends while Redis is down fail and wait for `spark redeliver`.
            for i in range(20):
                event, payload = samples[i % len(samples)]
                hooks.append(stack.github.hookshot.send(event, payload, None, None).guid)
                time.sleep(down_s / 20)
            stack.redis_server.start()
            outage["up"], outage["up_epoch"] = time.monotonic(), time.time()

        thread = threading.Thread(target=chaos)
        thread.start()
        # Paced so the outage falls in the middle of the load whatever the machine's speed.
        sent = send(stack.port, deliveries, concurrency, rate=n / LOAD_SECONDS)
        thread.join()
        stack.github.hookshot.wait(timeout=60)
        failed_hooks = sum(1 for d in stack.github.deliveries if not 200 <= d.status_code < 300)
        # Workers may have died with Redis: the supervisor restarts them; give it a moment to reconnect.
        conn = stack.redis
        redeliver = subprocess.run(
            [
                sys.executable,
                "-m",
                "bot.cli.main",
                "--env-file",
                os.devnull,
                "redeliver",
                "--since",
                "1h",
                "--json",
            ],
            cwd=ROOT,
            env=stack.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        stack.github.hookshot.wait(timeout=60)
        # The direct posts that failed are redelivered too (same id and body), as GitHub would on request.
        failed_ids = {s.delivery_id for s in sent if not 200 <= s.status < 300}
        again = send(stack.port, [d for d in deliveries if d[0] in failed_ids], concurrency)
        settle(conn, timeout=max(300, n / 10))
        delivered = {d.guid for d in stack.github.deliveries if 200 <= d.status_code < 300}
        hook_sent = [Sent(guid, 202, "queued", 0.0) for guid in hooks if guid in delivered]
        final = {s.delivery_id: s for s in sent + again}  # the last answer per delivery
        counted = tally(conn, list(final.values()) + hook_sent, stack.github)
        unrecovered = [g for g in hooks if conn.get(DELIVERY_KEY.format(g)) is None]
        during = [s for s in sent if outage["down"] <= s.at <= outage["up"]]
    return {
        **counted.as_dict(),
        "down_s": outage["up"] - outage["down"],
        # When each job that ran again ran, in seconds from Redis going down (negative: before).
        "ran_again_at": [
            {
                "job": item["job"],
                "runs": [(worker, round(at - outage["down_epoch"], 3)) for worker, at in item["runs"]],
            }
            for item in counted.ran_again_runs
        ],
        "redis_up_after_s": round(outage["up_epoch"] - outage["down_epoch"], 3),
        "answers_while_down": dict(Counter(f"{s.status}" for s in during)),
        "webhooks_failed_while_down": failed_hooks,
        "redeliver_exit": redeliver.returncode,
        "redeliver": _summary(redeliver.stdout),
        "webhooks_unrecovered": len(unrecovered),
        "direct_failed_then_resent": len(failed_ids),
        "direct_still_failing": sum(not 200 <= s.status < 300 for s in again),
    }


def _summary(output: str) -> dict[str, Any]:
    """Return the counts of ``spark redeliver --json`` output (or the output itself if it is not JSON)."""
    try:
        data = json.loads(output)
    except ValueError:
        return {"output": output[-500:]}
    return {k: v for k, v in data.items() if isinstance(v, int)} if isinstance(data, dict) else {}


def run_sigterm(workdir: Path, n: int, concurrency: int) -> dict[str, Any]:
    """SIGTERM the web server and the workers in the middle of a load, restart both; return the tally."""
    with ChaosStack(workdir) as stack:
        deliveries = mixed_deliveries(n, seed=3, replay_share=0, target=stack.target)
        codes: dict[str, int] = {}

        def chaos() -> None:
            # Mid-load: the receiver finishes the requests it holds and stops taking new connections (the
            # sender sees a failed delivery, which GitHub lets one redeliver); then the workers finish or
            # requeue their jobs.
            time.sleep(0.3)
            codes["web"] = signal_and_wait(stack.web, signal.SIGTERM)
            stack.start_web()
            codes["worker"] = signal_and_wait(stack.worker, signal.SIGTERM)
            stack.start_workers()

        thread = threading.Thread(target=chaos)
        thread.start()
        sent = send(stack.port, deliveries, concurrency, retry_for=60)
        thread.join()
        conn = stack.redis
        settle(conn, timeout=max(300, n / 10))
        counted = tally(conn, sent, stack.github)
    resent = sum(s.attempts > 1 for s in sent)
    return {**counted.as_dict(), "exit_codes": codes, "deliveries_resent_during_restart": resent}


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--deliveries``, ``--concurrency``, ``--json OUT``; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--deliveries", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--scaling", default="1,2,4", help="worker process counts to compare")
    parser.add_argument("--json", dest="json_out", default=None)
    args = parser.parse_args([] if argv is None else argv)
    import tempfile

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="spark-chaos-") as tmp:
        base = Path(tmp)
        steps: list[tuple[str, Any]] = [
            ("load", lambda d: run_load(d, args.deliveries, args.concurrency)),
            (
                "redis_outage",
                lambda d: run_redis_outage(d, max(500, args.deliveries // 10), args.concurrency),
            ),
            ("sigterm", lambda d: run_sigterm(d, max(500, args.deliveries // 10), args.concurrency)),
        ]
        for processes in (int(p) for p in args.scaling.split(",") if p):
            n = max(300, args.deliveries // 10)
            steps.append(
                (f"workers_{processes}", lambda d, p=processes, n=n: run_load(d, n, args.concurrency, p))
            )
        for name, step in steps:
            workdir = base / name
            workdir.mkdir()
            results[name] = step(workdir)
            print(f"{name}: {json.dumps(results[name], default=str)}", flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2, default=str))
    bad = [name for name, r in results.items() if r["lost"] or r["unstored_2xx"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
