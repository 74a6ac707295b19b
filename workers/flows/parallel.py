"""The flows' one thread pool: a job's independent GitHub reads and its model calls, side by side.

A worker process runs one job at a time, so the pool's size is one job's widest moment: a review's three
early reads (diff, threads, review comments) beside its files (at most ``FILE_CONCURRENCY`` at once, see
``workers.flows.review``), or a fix's first round trip (four calls) and then its targets (at most four, each
a read and then a model call) beside the config and the tree. Sixteen leaves room over both; a thread that
only waits on a socket costs little. Tasks on the pool never wait on other tasks of the pool, so a queue
behind busy threads cannot deadlock. The pool lives as long as the process (idle threads stay warm).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

POOL_SIZE = 16
_POOL = ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="spark-flow")


def submit(func: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    """Run ``func`` on the pool in a copy of the caller's context (the job's log ids come along)."""
    return _POOL.submit(contextvars.copy_context().run, func, *args, **kwargs)
