"""Prometheus metrics: every metric Spark records and helpers to record and expose them (no web framework).

Metric objects live at module level, as prometheus-client intends, so any process (web workers,
``spark worker``) records into the same families. With several web processes, prometheus-client's
multi-process mode is switched on by ``PROMETHEUS_MULTIPROC_DIR`` in the process environment (the
deployment sets it; the library reads it at import); each process then writes its samples to files in
that directory and a scrape sums them.
Queue depth is not recorded at all: it is read from Redis at scrape time, so it is never stale.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import redis
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bot.logs import get_logger

# Buckets sized for what Spark promises: intake in milliseconds, jobs and model streams in seconds.
_INTAKE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_JOB_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_TTFT_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0)
_TOKENS_PER_SECOND_BUCKETS = (50, 100, 250, 500, 1000, 1500, 2000, 3000, 5000)

DELIVERIES = Counter(
    "spark_webhook_deliveries",
    "Webhook deliveries received, by event and outcome (queued, ignored, duplicate, rejected, unavailable).",
    ["event", "outcome"],
)
INTAKE_LATENCY = Histogram(
    "spark_webhook_intake_seconds",
    "Time from request start to the webhook response (verify, decide, enqueue).",
    ["event"],
    buckets=_INTAKE_BUCKETS,
)
JOB_DURATION = Histogram(
    "spark_job_duration_seconds",
    "Wall time of a worker job, by kind (review, command, cancel, ...) and outcome (ok, error, cancelled).",
    ["kind", "outcome"],
    buckets=_JOB_BUCKETS,
)
MODEL_TTFT = Histogram(
    "spark_model_ttft_seconds",
    "Time from sending a model request to its first streamed token of content.",
    ["model"],
    buckets=_TTFT_BUCKETS,
)
MODEL_FIRST_TOKEN = Histogram(
    "spark_model_first_token_seconds",
    "Time from sending a model request to its first streamed token of any kind (reasoning included).",
    ["model"],
    buckets=_TTFT_BUCKETS,
)
MODEL_REASONING_TOKENS = Counter(
    "spark_model_reasoning_tokens",
    "Completion tokens the model spent reasoning (also counted in spark_model_completion_tokens).",
    ["model"],
)
MODEL_CUTOFF_RETRIES = Counter(
    "spark_model_cutoff_retries",
    "Model calls asked again (less effort, more room) after reasoning ran into the length limit.",
    ["model"],
)
MODEL_TOKENS_PER_SECOND = Histogram(
    "spark_model_tokens_per_second",
    "Completion tokens per second of a model stream, measured from the first token.",
    ["model"],
    buckets=_TOKENS_PER_SECOND_BUCKETS,
)
MODEL_TOKENS = Counter(
    "spark_model_completion_tokens",
    "Completion tokens received from the model.",
    ["model"],
)
GITHUB_CALLS = Counter(
    "spark_github_api_calls",
    "GitHub API calls, by API (rest, graphql), HTTP method and status code.",
    ["api", "method", "status"],
)
GITHUB_RATE_LIMIT_REMAINING = Gauge(
    "spark_github_rate_limit_remaining",
    "The x-ratelimit-remaining GitHub last returned, per installation.",
    ["installation"],
    # The newest answer from GitHub is the truth, whichever process saw it.
    multiprocess_mode="mostrecent",
)
FIXES_COMMITTED = Counter(
    "spark_fixes_committed",
    "Fix commits pushed to pull-request branches.",
)
SUGGESTIONS_POSTED = Counter(
    "spark_suggestions_posted",
    "```suggestion review comments posted.",
)
FIX_ESCALATIONS = Counter(
    "spark_fix_escalations",
    "Fixes handed to the deep model after the fast model's retry failed, by outcome (verified, failed).",
    ["outcome"],
)
QUEUE_DEPTH_NAME = "spark_queue_depth"


# (event, outcome) -> that delivery's counter and histogram: ``labels()`` costs more than the update itself on
# the intake path. Bounded: events are GitHub's (only verified deliveries' events are labels), outcomes few.
_DELIVERY_SERIES: dict[tuple[str, str], tuple[Counter, Histogram]] = {}


def record_delivery(event: str, outcome: str, seconds: float) -> None:
    """Count one webhook delivery and observe how long intake took."""
    series = _DELIVERY_SERIES.get((event, outcome))
    if series is None:
        series = (DELIVERIES.labels(event, outcome), INTAKE_LATENCY.labels(event))
        _DELIVERY_SERIES[(event, outcome)] = series
    series[0].inc()
    series[1].observe(seconds)


@contextmanager
def timed_job(kind: str) -> Iterator[dict[str, str]]:
    """Time a job: outcome ``ok``, ``error`` if it raises, or what the body sets in ``state["outcome"]``."""
    state = {"outcome": "ok"}
    start = time.perf_counter()
    try:
        yield state
    except BaseException:
        state["outcome"] = "error"
        raise
    finally:
        JOB_DURATION.labels(kind=kind, outcome=state["outcome"]).observe(time.perf_counter() - start)


def record_model_stream(
    model: str,
    first_token_seconds: float,
    ttft_seconds: float | None,
    tokens: int,
    reasoning_tokens: int,
    tokens_per_second: float,
) -> None:
    """Record one model stream: its first token of any kind and of content (None: no content came), the
    completion and reasoning tokens, and tokens/s of its generation."""
    MODEL_FIRST_TOKEN.labels(model=model).observe(first_token_seconds)
    if ttft_seconds is not None:
        MODEL_TTFT.labels(model=model).observe(ttft_seconds)
    MODEL_TOKENS.labels(model=model).inc(tokens)
    MODEL_REASONING_TOKENS.labels(model=model).inc(reasoning_tokens)
    if tokens > 0 and tokens_per_second > 0:
        MODEL_TOKENS_PER_SECOND.labels(model=model).observe(tokens_per_second)


def record_github_call(
    api: str,
    method: str,
    status: int | str,
    *,
    installation_id: int | None = None,
    remaining: int | None = None,
) -> None:
    """Count one GitHub API call and, when GitHub said so, the installation's remaining rate limit."""
    GITHUB_CALLS.labels(api=api, method=method.upper(), status=str(status)).inc()
    if installation_id is not None and remaining is not None:
        GITHUB_RATE_LIMIT_REMAINING.labels(installation=str(installation_id)).set(remaining)


class QueueDepthCollector(Collector):
    """Report each RQ queue's length, read from Redis when scraped."""

    def __init__(self, connection: redis.Redis, queues: Sequence[str]) -> None:
        self._connection = connection
        self._queues = tuple(queues)

    def collect(self) -> Iterable[GaugeMetricFamily]:
        """Yield one gauge sample per queue (absent when Redis cannot be reached)."""
        family = GaugeMetricFamily(QUEUE_DEPTH_NAME, "Jobs waiting in each RQ queue.", labels=["queue"])
        try:
            # One round trip for all queues; RQ keeps a queue's job ids in the list rq:queue:<name>.
            with self._connection.pipeline(transaction=False) as pipe:
                for name in self._queues:
                    pipe.llen(f"rq:queue:{name}")
                depths = pipe.execute()
        except redis.RedisError:
            # A scrape must not fail because Redis is down; /readyz reports that.
            return
        for name, depth in zip(self._queues, depths, strict=True):
            family.add_metric([name], float(depth))
        yield family


def scrape_registry() -> CollectorRegistry:
    """Return the registry to expose: the web workers' multi-process aggregate, else this process's own."""
    try:
        registry = CollectorRegistry()
        # prometheus-client decides multi-process mode from PROMETHEUS_MULTIPROC_DIR; follow its decision
        # rather than reading the environment a second time.
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return registry
    except ValueError:
        return REGISTRY


def render_metrics(connection: redis.Redis, queues: Sequence[str]) -> bytes:
    """Return the Prometheus text exposition of every metric plus the live queue depths."""
    registry = CollectorRegistry()
    registry.register(QueueDepthCollector(connection, queues))
    return generate_latest(scrape_registry()) + generate_latest(registry)


def start_metrics_server(port: int, addr: str = "0.0.0.0") -> None:
    """Serve the metrics on ``addr:port``: this process's, or in multi-process mode every process's sum."""
    start_http_server(port, addr=addr, registry=scrape_registry())
    get_logger("metrics").info("metrics_listening", url=f"http://{addr}:{port}/metrics")


def process_exited(pid: int) -> None:
    """Tell prometheus-client that a process of a multi-process command has exited (no-op otherwise)."""
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
