"""What one job's time went to: its queue wait, named spans and its model calls, kept in seconds.

Replies and logs read them as milliseconds (``as_ms``: the ``*_ms`` keys ``bot.core.fixes.format_timings``
renders), the review's check run as seconds (``as_seconds``); nothing else converts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from bot.adapters.cerebras import Completion


def ms(seconds: float) -> float:
    """Return ``seconds`` in milliseconds."""
    return seconds * 1000


@dataclass
class Timings:
    """Named spans of one job and the figures of its model calls, in seconds; thread-safe to add to.

    ``queue_wait`` is measured from the job's enqueue time. Model calls add up over the job: their count,
    tokens and reasoning tokens, and their time as the wall-clock time some call was running (a review's
    files call the model in parallel: summing their durations would exceed the review's own time); the
    first call's time to its first token of any kind and to its first token of content (the ones users
    feel); the fastest rate. ``notes`` are sentences the job's reply must carry (an answer asked again after
    its reasoning ran into the length limit).
    """

    queue_wait: float = 0.0
    spans: dict[str, float] = field(default_factory=dict)
    clock: Callable[[], float] = time.perf_counter
    calls: int = 0
    first_token: float = 0.0
    first_content: float = 0.0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    tokens_per_second: float = 0.0
    notes: list[str] = field(default_factory=list)
    # A review's files call the model from several threads at once.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # Each call's (start, end) on ``clock``, ended when it was counted.
    _running: list[tuple[float, float]] = field(default_factory=list, repr=False, compare=False)

    @contextmanager
    def span(self, name: str, *, on_error: str | None = None) -> Iterator[None]:
        """Time the block under ``name`` (repeated names add up); a block that raises counts as ``on_error``.

        A refused commit must not show as "commit 6 ms" in a reply that says nothing was committed.
        """
        started = self.clock()
        failed = False
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            key = on_error if failed and on_error is not None else name
            with self._lock:
                self.spans[key] = self.spans.get(key, 0.0) + self.clock() - started

    def relabel(self, name: str, new_name: str) -> None:
        """Count the time spent under ``name`` as ``new_name`` (a commit GitHub refused is no commit)."""
        with self._lock:
            if name in self.spans:
                self.spans[new_name] = self.spans.get(new_name, 0.0) + self.spans.pop(name)

    def total(self, started: float) -> float:
        """Return the seconds since the job was queued: its queue wait plus the time since ``started``.

        ``started`` is a reading of ``clock``, taken when the flow began.
        """
        return self.queue_wait + self.clock() - started

    def count(self, completion: Completion) -> None:
        """Add one model call's figures."""
        with self._lock:
            if self.calls == 0:
                self.first_token, self.first_content = completion.first_token, completion.ttft
            self.calls += 1
            ended = self.clock()
            self._running.append((ended - completion.total, ended))
            self.completion_tokens += completion.completion_tokens
            self.reasoning_tokens += completion.reasoning_tokens
            self.tokens_per_second = max(self.tokens_per_second, completion.tokens_per_second)

    def merge(self, other: Timings) -> None:
        """Add the model calls ``other`` counted (a fix asked early, in a context of its own), its notes."""
        with other._lock:
            calls, running, notes = other.calls, list(other._running), list(other.notes)
            firsts = (other.first_token, other.first_content)
            tokens, reasoning, rate = other.completion_tokens, other.reasoning_tokens, other.tokens_per_second
        with self._lock:
            if self.calls == 0 and calls:
                self.first_token, self.first_content = firsts
            self.calls += calls
            self._running += running
            self.completion_tokens += tokens
            self.reasoning_tokens += reasoning
            self.tokens_per_second = max(self.tokens_per_second, rate)
            self.notes += [n for n in notes if n not in self.notes]

    def as_ms(self, *, total: float | None = None) -> dict[str, float]:
        """Return the queue wait, every span and (after a model call) the model's figures, as ``*_ms`` keys.

        ``total``, in seconds, is given as ``total_ms``.
        """
        with self._lock:
            out = {"queue_wait_ms": ms(self.queue_wait), **{f"{k}_ms": ms(v) for k, v in self.spans.items()}}
            if self.calls:
                out.update(
                    first_token_ms=ms(self.first_token),
                    ttft_ms=ms(self.first_content),
                    model_ms=ms(self._model()),
                    completion_tokens=float(self.completion_tokens),
                    reasoning_tokens=float(self.reasoning_tokens),
                    tokens_per_second=self.tokens_per_second,
                )
        if total is not None:
            out["total_ms"] = ms(total)
        return out

    def as_seconds(self, *, total: float) -> dict[str, float]:
        """Return the total and (after a model call) the first token of any kind and of content and the model
        time, named for people."""
        out = {"total": total}
        if self.calls:
            out.update({"first token": self.first_token, "first content": self.first_content})
            with self._lock:
                out["model"] = self._model()
        return out

    @property
    def model(self) -> float:
        """Return the seconds during which at least one model call was running (parallel calls once)."""
        with self._lock:
            return self._model()

    def _model(self) -> float:
        busy, covered = 0.0, float("-inf")
        for start, end in sorted(self._running):
            if end > covered:
                busy += end - max(start, covered)
                covered = end
        return busy

    def note(self, text: str) -> None:
        """Keep a sentence the job's reply must carry (once)."""
        with self._lock:
            if text not in self.notes:
                self.notes.append(text)
