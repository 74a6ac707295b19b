"""The flows' thread pools: a job's independent GitHub reads and its model calls, side by side.

A worker process runs one job at a time, so the read pool's size is one job's widest moment: a review's first
round trip (the pull request, its diff, threads and review comments, the config and every file read ahead), or
a fix's first round trip and then its targets, each a read and then a model call. Forty-eight leaves room
for a 40-file review's reads at once; a thread that only waits on a socket costs little. Tasks on that
pool never wait on other tasks of the pool, so a queue behind busy threads cannot deadlock; a review's files,
which wait on their reads and then call the model, run on a pool of their own (``submit_waiting``, sized by
``SPARK_REVIEW_CONCURRENCY``). The pools live as long as the process (idle threads stay warm).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

POOL_SIZE = 48
_POOL = ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="spark-flow")
# Tasks that wait on the pool above (a review's files waiting for their reads, a fix started ahead waiting for
# its targets' edits) and call the model: a pool of their own, so none waits on a task queued behind it. Sized
# once, by the first caller.
_FILES: ThreadPoolExecutor | None = None
_FILES_LOCK = threading.Lock()


def submit(func: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    """Run ``func`` on the pool in a copy of the caller's context (the job's log ids come along)."""
    return _POOL.submit(contextvars.copy_context().run, func, *args, **kwargs)


def submit_waiting(size: int, func: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    """Run ``func`` (work that waits on the pool's tasks, then calls the model) on the second pool."""
    global _FILES
    with _FILES_LOCK:
        if _FILES is None:
            _FILES = ThreadPoolExecutor(max_workers=size, thread_name_prefix="spark-waiting")
    return _FILES.submit(contextvars.copy_context().run, func, *args, **kwargs)
