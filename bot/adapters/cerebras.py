"""A thin adapter over the Cerebras SDK: one client per process, streamed completions that stop on cancel.

Client choices, made deliberately:
- ``warm_tcp_connection=False`` in the constructor. The SDK's warm-up is a blocking ``GET /v1/tcp_warming``
  that is retried (up to ~4 s when the endpoint hangs), and ``with_options`` would repeat it on every call.
  ``ModelClient.warm()`` does the same GET once, with no retries and a 1 s timeout, when a worker starts, so
  the first job finds a connected (TLS-established) pool and a dead endpoint delays nothing.
- ``max_retries=1``: a 429 retry re-reserves token quota on Cerebras' side, so blind retries make throttling
  worse; one retry (honouring ``retry-after``) covers a transient 5xx or reset, then the user hears about it.
- Always ``stream=True``: the read timeout then applies between chunks, cancellation closes the stream
  between chunks (or, via ``Watchdog``, in the middle of a stalled read), and the last chunk carries
  ``usage`` and ``time_info``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import httpx
from cerebras.cloud.sdk import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    Cerebras,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
)

from bot.metrics import record_model_stream
from bot.settings import Settings

MAX_RETRIES = 1
ErrorKind = Literal["rate_limited", "unavailable", "timed_out", "rejected", "cancelled", "failed"]


class CancelCheck(Protocol):
    """Anything that can say, cheaply, whether the work was cancelled (``bot.cancel.CancelToken``)."""

    def cancelled(self) -> bool:
        """Return True once the work is no longer wanted."""
        ...


class ModelError(Exception):
    """A model call failed; ``user_message`` can be shown on the pull request as is."""

    def __init__(self, kind: ErrorKind, user_message: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail or user_message}")
        self.kind = kind
        self.user_message = user_message
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Completion:
    """A streamed completion: the text and how it went (times in seconds, from the client's clock)."""

    text: str
    finish_reason: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    # Time to the first content token as the worker saw it (request sent -> first content chunk).
    ttft: float
    total: float
    # Output speed: completion tokens over the server's completion_time (client-side time when absent).
    tokens_per_second: float
    server_time: dict[str, float]
    cancelled: bool = False
    # Time to the first token of any kind (a reasoning delta comes before any content), and the tokens the
    # model spent reasoning (usage's completion_tokens_details; counted in completion_tokens too).
    first_token: float = 0.0
    reasoning_tokens: int = 0


class Watchdog(threading.Thread):
    """Watches ``cancel`` while a stream is read and cuts the connection the moment it fires.

    Checking between chunks is not enough: a stalled stream blocks in ``recv`` until the read timeout.
    Closing an httpx response from another thread does not wake that read; shutting the socket down does.
    """

    def __init__(self, cancel: CancelCheck, response: httpx.Response, poll: float = 0.05) -> None:
        super().__init__(name="spark-stream-watchdog", daemon=True)
        self.cancel = cancel
        self.response = response
        self.poll = poll
        self.done = threading.Event()
        self.fired = False
        self.start()

    def run(self) -> None:
        """Poll until the stream ends or the cancel fires (the token throttles its own Redis calls)."""
        while not self.done.wait(self.poll):
            if self.cancel.cancelled():
                self.fired = True
                interrupt(self.response)
                return


def interrupt(response: httpx.Response) -> None:
    """Wake any read blocked on the response's connection by shutting its socket down."""
    network_stream = response.extensions.get("network_stream")
    sock = network_stream.get_extra_info("socket") if network_stream is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def map_error(exc: Exception) -> ModelError:
    """Turn an SDK exception into a ``ModelError`` with a message fit for a pull-request comment."""
    detail = str(exc)
    if isinstance(exc, RateLimitError):
        return ModelError("rate_limited", "The model is rate limited; try again in a minute.", detail)
    # Mid-stream failures surface as raw httpx errors: the SDK wraps only the request, not the iteration.
    if isinstance(exc, APITimeoutError | httpx.TimeoutException):
        return ModelError("timed_out", "The model did not answer in time; try again.", detail)
    if isinstance(exc, APIConnectionError | httpx.TransportError):
        return ModelError("unavailable", "The model could not be reached; try again shortly.", detail)
    if isinstance(exc, AuthenticationError | PermissionDeniedError):
        return ModelError("rejected", "The model API rejected Spark's key; an admin must fix it.", detail)
    if isinstance(exc, NotFoundError):
        return ModelError("unavailable", "The configured model is not available.", detail)
    if isinstance(exc, BadRequestError):
        # The API says why (a context too long, a bad parameter, ...): pass its reason on, never a guess.
        return ModelError("rejected", f"The model rejected the request: {_api_reason(exc)}", detail)
    if isinstance(exc, APIStatusError) and exc.status_code >= 500:
        return ModelError("unavailable", "The model service is having trouble; try again shortly.", detail)
    return ModelError("failed", "The model call failed.", detail)


def _api_reason(exc: APIStatusError) -> str:
    """Return the API's own explanation of an error answer (its JSON ``message``), else the SDK's."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return exc.message


class ModelClient:
    """The process-wide Cerebras client; build once, reuse for every job."""

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = "https://api.cerebras.ai",
        timeout: float = 30.0,
        max_retries: int = MAX_RETRIES,
        http_client: httpx.Client | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.sdk = Cerebras(
            api_key=api_key,
            base_url=base_url,
            timeout=httpx.Timeout(timeout, connect=5.0),
            max_retries=max_retries,
            warm_tcp_connection=False,
            http_client=http_client,
        )
        self._clock = clock

    @classmethod
    def from_settings(cls, settings: Settings) -> ModelClient:
        """Build the client from settings (``require_worker`` has checked the key is present)."""
        settings.require("cerebras_api_key")
        assert settings.cerebras_api_key is not None
        return cls(
            settings.cerebras_api_key.get_secret_value(),
            base_url=settings.cerebras_base_url,
            timeout=settings.spark_model_timeout_seconds,
        )

    def warm(self) -> bool:
        """Open the pool with one un-retried ``GET /v1/tcp_warming``; return whether it answered."""
        try:
            self.sdk.get("/v1/tcp_warming", cast_to=str, options={"timeout": 1.0, "max_retries": 0})
        except Exception:  # warming is an optimisation; the first real call reports errors
            return False
        return True

    def close(self) -> None:
        """Close the connection pool."""
        self.sdk.close()

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        model: str,
        max_completion_tokens: int,
        cancel: CancelCheck | None = None,
        sent: threading.Event | None = None,
        **options: Any,
    ) -> Completion:
        """Stream a chat completion; close the stream as soon as ``cancel`` fires (then ``cancelled=True``).

        ``sent`` is set once the request is out (the response's head is in, or the SDK gave up).
        Raises ``ModelError`` for SDK errors once the SDK's own retry is spent.
        """
        started = self._clock()
        first: float | None = None
        first_any: float | None = None
        parts: list[str] = []
        finish_reason = ""
        model_name = model
        usage: Any = None
        time_info: Any = None
        stopped = False
        try:
            stream: Any = self.sdk.chat.completions.create(
                messages=list(messages),  # type: ignore[arg-type]
                model=model,
                max_completion_tokens=max_completion_tokens,
                stream=True,
                **options,
            )
        except (APIConnectionError, APIStatusError) as exc:
            raise map_error(exc) from exc
        finally:
            if sent is not None:
                sent.set()
        watchdog = Watchdog(cancel, stream.response) if cancel is not None else None
        try:
            for chunk in stream:
                if cancel is not None and cancel.cancelled():
                    stopped = True
                    break
                model_name = getattr(chunk, "model", None) or model_name
                for choice in getattr(chunk, "choices", None) or ():
                    content = getattr(choice.delta, "content", None)
                    # Reasoning arrives apart (reasoning_format "parsed"): timed, never kept.
                    reasoning = getattr(choice.delta, "reasoning", None)
                    if (first is None and content) or (first_any is None and reasoning):
                        now = self._clock()
                        first_any = now if first_any is None else first_any
                        first = now if content and first is None else first
                    if content:
                        parts.append(content)
                    if choice.finish_reason:
                        finish_reason = str(choice.finish_reason)
                usage = getattr(chunk, "usage", None) or usage
                time_info = getattr(chunk, "time_info", None) or time_info
        except (APIConnectionError, APIStatusError, httpx.TransportError) as exc:
            if watchdog is None or not watchdog.fired:
                raise map_error(exc) from exc
            stopped = True  # the watchdog cut a stalled stream: a cancel, not an error
        finally:
            if watchdog is not None:
                watchdog.done.set()
            # Closing the response is what stops the server generating for a cancelled job.
            stream.close()
        total = self._clock() - started
        firsts = (first_any, first)
        text = "".join(parts)
        completion = _completion(
            text, finish_reason, model_name, usage, time_info, started, firsts, total, stopped
        )
        if first_any is not None:
            record_model_stream(
                model,
                completion.first_token,
                completion.ttft if first is not None else None,
                completion.completion_tokens,
                completion.reasoning_tokens,
                completion.tokens_per_second,
            )
        return completion


def _completion(
    text: str,
    finish_reason: str,
    model: str,
    usage: Any,
    time_info: Any,
    started: float,
    firsts: tuple[float | None, float | None],
    total: float,
    cancelled: bool,
) -> Completion:
    first_any, first = firsts
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    details = getattr(usage, "completion_tokens_details", None)
    reasoning_tokens = int(getattr(details, "reasoning_tokens", 0) or 0)
    server_time = {
        name: float(getattr(time_info, name))
        for name in ("queue_time", "prompt_time", "completion_time", "total_time")
        if getattr(time_info, name, None) is not None
    }
    ttft = (first - started) if first is not None else total
    generation = server_time.get("completion_time") or max(total - ttft, 1e-9)
    return Completion(
        text=text,
        finish_reason=finish_reason or ("cancelled" if cancelled else ""),
        model=model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        ttft=ttft,
        total=total,
        tokens_per_second=completion_tokens / generation if completion_tokens else 0.0,
        server_time=server_time,
        cancelled=cancelled,
        first_token=(first_any - started) if first_any is not None else ttft,
        reasoning_tokens=reasoning_tokens,
    )
