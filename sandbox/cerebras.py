"""A local Cerebras: the chat-completions wire format the real ``cerebras-cloud-sdk`` expects, scripted.

Nothing here is a model. Every reply is text a scenario wrote down in advance (a ``Script``), chosen per
request by the target file path or the ``/spark`` command found in the request's messages, or else by order.
A request no script matches gets a clear error, never an invented answer, and every request is kept in a log
that names the script that answered it. Replies carry ``system_fingerprint = "fp_spark_sandbox"`` and an
``x-spark-sandbox-script`` header, so nothing downstream can mistake them for a model's work.

Speed is simulated so latency figures mean something: the first token arrives after ``ttft_ms`` and the rest
at ``tokens_per_second``. Tokens are counted with a documented heuristic, ``count_tokens``: one token per four
characters, rounded up (close to what BPE tokenizers give for English and code).

Reasoning models reason as the real ones do when a run asks them to (``Reasoning``: tokens per effort level):
the reasoning streams first, at the same throughput, as ``delta.reasoning`` (``reasoning_format`` parsed, the
default), not at all (hidden) or glued before the content (raw); it counts in ``completion_tokens`` and in
``completion_tokens_details.reasoning_tokens``, and ``max_completion_tokens`` bounds both together (the answer
is cut with ``finish_reason: length``). gpt-oss takes ``reasoning_effort`` low, medium (its default) or high
and refuses none; GLM takes none to low..high; other models take no reasoning parameter.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

DEFAULT_MODELS = ("gpt-oss-120b", "zai-glm-4.7", "llama3.1-8b")
DEFAULT_API_KEY = "sandbox-key"
FINGERPRINT = "fp_spark_sandbox"
SCRIPT_HEADER = "x-spark-sandbox-script"
CHARS_PER_TOKEN = 4
# Budgets the rate-limit headers count down from (the shape of Cerebras' documented example).
REQUESTS_PER_DAY = 1_000_000
TOKENS_PER_MINUTE = 1_000_000
# model -> (the efforts it takes, its default effort); the rest do not reason.
REASONING_MODELS = {
    "gpt-oss-120b": (("low", "medium", "high"), "medium"),
    "zai-glm-4.7": (("none", "low", "medium", "high"), "medium"),
}
REASONING_FORMATS = ("none", "parsed", "text_parsed", "raw", "hidden")
# What the local model "thinks" when a script gives no reasoning text: filler, never shown as content.
_THOUGHT = "Weighing the request against the file. "


def count_tokens(text: str) -> int:
    """Return the heuristic token count of ``text``: ceil(chars / 4), and 0 for empty text."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class Speed:
    """How fast scripted replies come out: time to first token, then a steady token rate."""

    ttft_ms: float = 120.0
    tokens_per_second: float = 1000.0
    # Tokens per streamed chunk; Cerebras sends a few tokens per SSE event.
    chunk_tokens: int = 4


@dataclass(frozen=True, slots=True)
class Reasoning:
    """How many tokens a reasoning model spends reasoning before its answer, per effort level."""

    low: int = 0
    medium: int = 0
    high: int = 0

    @classmethod
    def flat(cls, tokens: int) -> Reasoning:
        """Return the same reasoning at every effort level."""
        return cls(tokens, tokens, tokens)

    def tokens(self, effort: str) -> int:
        """Return the tokens spent at ``effort`` (none: 0)."""
        return int(getattr(self, effort, 0)) if effort != "none" else 0


@dataclass(frozen=True, slots=True)
class Script:
    """One scripted reply and what it answers: a target ``path``, a ``/spark`` ``command``, or the next one.

    A script with no matcher answers any request, in the order scripts were given. A script is used once
    unless ``repeat`` is set, so two scripts for the same file answer a first attempt and its retry.
    """

    reply: str
    name: str = ""
    path: str | None = None
    command: str | None = None
    repeat: bool = False
    reasoning: str = ""

    def matches(self, text: str) -> bool:
        """Return True when every matcher this script has is found in the request's message ``text``."""
        # The path must stand alone: "src/calc.py" does not answer a request about "src/calc.pyi".
        if self.path is not None and not re.search(rf"(?<![\w./-]){re.escape(self.path)}(?![\w/-])", text):
            return False
        return self.command is None or (
            re.search(rf"/spark\s+{re.escape(self.command)}\b", text, re.IGNORECASE) is not None
        )


class FaultKind(StrEnum):
    """Failures the local Cerebras can be told to produce."""

    RATE_LIMIT = "rate_limit"  # 429 with retry-after
    SERVER_ERROR = "server_error"  # a 5xx
    STALL = "stall"  # a stream that sends some chunks, then nothing
    MALFORMED = "malformed"  # a 200 whose body is not valid JSON
    EMPTY = "empty"  # a 200 with no content at all


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected failure, served to the next ``times`` chat requests (before any script is used)."""

    kind: FaultKind
    times: int = 1
    status: int = 500
    retry_after: float = 0.05
    after_chunks: int = 1
    # How long a stalled stream stays silent before the server drops it (the client usually times out first).
    stall_seconds: float = 30.0


@dataclass(slots=True)
class RequestRecord:
    """What one chat request asked for and what the sandbox did with it."""

    index: int
    model: str
    stream: bool
    messages: list[dict[str, Any]]
    # The reasoning parameters and length limit the request sent (None: not sent).
    reasoning_effort: str | None = None
    reasoning_format: str | None = None
    max_completion_tokens: int | None = None
    reasoning_tokens: int = 0
    finish_reason: str = ""
    status: int = 200
    script: str | None = None
    fault: str | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    chunks_sent: int = 0
    cancelled: bool = False
    received_at: float = 0.0
    # The first streamed token of any kind (reasoning included), and the first of content.
    first_token_at: float | None = None
    first_content_at: float | None = None
    finished_at: float | None = None


class ModelSandbox:
    """The local Cerebras server and its Python handle: scripts in, request log out."""

    def __init__(
        self,
        scripts: Iterable[Script] = (),
        *,
        speed: Speed | None = None,
        reasoning: Reasoning | None = None,
        faults: Iterable[Fault] = (),
        api_key: str = DEFAULT_API_KEY,
        models: Sequence[str] = DEFAULT_MODELS,
        label: str = "sandbox",
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.speed = speed or Speed()
        self.reasoning = reasoning or Reasoning()
        self.api_key = api_key
        self.models = tuple(models)
        self.label = label
        self._scripts: list[Script] = []
        self._faults: list[Fault] = []
        self._log: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self._closing = threading.Event()
        self._tokens_used = 0
        self._host, self._port = host, port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.add_scripts(scripts)
        for fault in faults:
            self.inject(fault)

    # -- handle --

    @property
    def url(self) -> str:
        """Return the base URL to give the SDK (``Cerebras(base_url=...)``); the SDK adds ``/v1`` itself."""
        if self._server is None:
            raise RuntimeError("ModelSandbox is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ModelSandbox:
        """Start serving on a background thread and return self."""
        self._closing.clear()
        self._server = _Server((self._host, self._port), _Handler, self)
        # A short poll interval keeps stop() fast (shutdown waits for the serve loop to notice).
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="model-sandbox", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; stalled streams are released."""
        self._closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> ModelSandbox:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def add_scripts(self, scripts: Iterable[Script]) -> None:
        """Append scripted replies (named ``script-N`` when they have no name)."""
        with self._lock:
            for script in scripts:
                name = script.name or f"script-{len(self._scripts) + 1}"
                self._scripts.append(replace(script, name=name))

    def clear_scripts(self) -> None:
        """Drop every script not used yet (a benchmark starting its next case)."""
        with self._lock:
            self._scripts.clear()

    def inject(self, fault: Fault) -> None:
        """Queue a fault for the next ``fault.times`` chat requests."""
        with self._lock:
            self._faults.append(fault)

    def set_speed(self, speed: Speed) -> None:
        """Change the simulated speed for later requests."""
        self.speed = speed

    def set_reasoning(self, reasoning: Reasoning) -> None:
        """Change how much reasoning models reason for later requests."""
        self.reasoning = reasoning

    @property
    def requests(self) -> list[RequestRecord]:
        """Return a copy of the request log, oldest first."""
        with self._lock:
            return list(self._log)

    @property
    def unused_scripts(self) -> list[Script]:
        """Return the scripts no request has used yet (repeatable ones stay listed)."""
        with self._lock:
            used = {record.script for record in self._log}
            return [s for s in self._scripts if s.repeat or s.name not in used]

    # -- decisions (called by the request handler) --

    def _begin(self, request: dict[str, Any], model: str, messages: list[dict[str, Any]]) -> RequestRecord:
        limit = request.get("max_completion_tokens", request.get("max_tokens"))
        record = RequestRecord(
            index=next(self._counter),
            model=model,
            stream=bool(request.get("stream")),
            messages=messages,
            reasoning_effort=request.get("reasoning_effort"),
            reasoning_format=request.get("reasoning_format"),
            max_completion_tokens=limit if isinstance(limit, int) else None,
            received_at=time.monotonic(),
            prompt_tokens=sum(count_tokens(_content_text(m)) for m in messages),
        )
        with self._lock:
            self._log.append(record)
        return record

    def _take_fault(self) -> Fault | None:
        with self._lock:
            if not self._faults:
                return None
            fault = self._faults[0]
            if fault.times <= 1:
                self._faults.pop(0)
            else:
                self._faults[0] = replace(fault, times=fault.times - 1)
            return fault

    def _choose(self, messages: list[dict[str, Any]], *, consume: Callable[[Script], bool]) -> Script | None:
        text = "\n".join(_content_text(m) for m in messages)
        with self._lock:
            for i, script in enumerate(self._scripts):
                if script.matches(text):
                    if not script.repeat and consume(script):
                        self._scripts.pop(i)
                    return script
        return None

    def _rate_headers(self, tokens: int) -> dict[str, str]:
        with self._lock:
            self._tokens_used += tokens
            used_requests = len(self._log)
            used_tokens = self._tokens_used
        now = time.time()
        return {
            "x-ratelimit-limit-requests-day": str(REQUESTS_PER_DAY),
            "x-ratelimit-remaining-requests-day": str(max(0, REQUESTS_PER_DAY - used_requests)),
            "x-ratelimit-reset-requests-day": f"{86400 - now % 86400:.6f}",
            "x-ratelimit-limit-tokens-minute": str(TOKENS_PER_MINUTE),
            "x-ratelimit-remaining-tokens-minute": str(max(0, TOKENS_PER_MINUTE - used_tokens)),
            "x-ratelimit-reset-tokens-minute": f"{60 - now % 60:.6f}",
        }

    def _no_script_message(self) -> str:
        left = [s.name for s in self.unused_scripts]
        return (
            f"the {self.label} scenario has no scripted reply for this request "
            f"(matched by target path, '/spark <command>' or order; unused scripts: {left or 'none'}). "
            "This is a local sandbox: it never invents an answer."
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: ModelSandbox):
        self.owner = owner
        super().__init__(address, handler)


def _content_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # text parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _error_body(message: str, type_: str, code: str, param: str | None = None) -> dict[str, Any]:
    # Cerebras' error bodies are top-level objects (not nested under "error").
    return {"message": message, "type": type_, "param": param, "code": code}


def _pieces(text: str, chunk_chars: int) -> Iterator[str]:
    for start in range(0, len(text), chunk_chars):
        yield text[start : start + chunk_chars]


class _ClientGone(Exception):
    """The client closed the connection mid-stream (a cancelled request)."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse behaves as against the real API
    # TCP_NODELAY: headers and each streamed chunk are separate writes; Nagle would delay them ~40 ms.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the sandbox quiet; the request log is the record."""

    # -- plumbing --

    @property
    def owner(self) -> ModelSandbox:
        return self.server.owner

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self._send_raw(status, data, "application/json", headers)

    def _send_raw(self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _write_chunk(self, data: bytes) -> None:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise _ClientGone from exc

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, raising ``_ClientGone`` as soon as the client hangs up or the server stops."""
        deadline = time.monotonic() + seconds
        while True:
            if self._peer_closed():
                raise _ClientGone
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            # Short slices: a cancelled request must stop within a few milliseconds, not at the next token.
            if self.owner._closing.wait(min(remaining, 0.01)):
                raise _ClientGone

    def _peer_closed(self) -> bool:
        """Return True when the client has closed its end (it sends nothing else while awaiting a reply)."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return bool(self.connection.recv(1, socket.MSG_PEEK) == b"")
        except OSError:
            return True

    def _authorized(self) -> bool:
        if self.headers.get("Authorization", "") == f"Bearer {self.owner.api_key}":
            return True
        body = _error_body("Wrong API Key", "invalid_request_error", "wrong_api_key", "api_key")
        self._send_json(HTTPStatus.UNAUTHORIZED, body)
        return False

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    # -- routes --

    def do_GET(self) -> None:
        """Serve ``/v1/tcp_warming``, ``/v1/models`` and ``/v1/models/{id}``."""
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/tcp_warming":
            self._send_raw(HTTPStatus.OK, b"OK", "text/plain")
            return
        if not self._authorized():
            return
        if path == "/v1/models":
            self._send_json(HTTPStatus.OK, {"object": "list", "data": [_model(m) for m in self.owner.models]})
        elif path.startswith("/v1/models/") and path.removeprefix("/v1/models/") in self.owner.models:
            self._send_json(HTTPStatus.OK, _model(path.removeprefix("/v1/models/")))
        elif path.startswith("/v1/models/"):
            self._model_not_found(path.removeprefix("/v1/models/"))
        else:
            self._not_found()

    def do_POST(self) -> None:
        """Serve ``/v1/chat/completions``."""
        raw = self._read_body()
        if self.path.split("?", 1)[0].rstrip("/") != "/v1/chat/completions":
            self._not_found()
            return
        if not self._authorized():
            return
        try:
            request = json.loads(raw)
            model, messages = request["model"], request["messages"]
            if not isinstance(model, str) or not isinstance(messages, list):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            body = _error_body(
                "request body must be JSON with 'model' (string) and 'messages' (list)",
                "invalid_request_error",
                "bad_request",
                "messages",
            )
            self._send_json(HTTPStatus.BAD_REQUEST, body)
            return
        if model not in self.owner.models:
            self._model_not_found(model)
            return
        refusal = _reasoning_refusal(request, model)
        if refusal is not None:
            self._send_json(
                HTTPStatus.BAD_REQUEST,
                _error_body(refusal[1], "invalid_request_error", "wrong_api_format", refusal[0]),
                {"x-should-retry": "false"},
            )
            return
        self._chat(request, model, messages)

    def _not_found(self) -> None:
        self._send_json(HTTPStatus.NOT_FOUND, _error_body("Not found", "not_found_error", "not_found"))

    def _model_not_found(self, model: str) -> None:
        message = f"Model {model} does not exist or you do not have access to it."
        self._send_json(
            HTTPStatus.NOT_FOUND, _error_body(message, "not_found_error", "model_not_found", "model")
        )

    # -- chat --

    def _chat(self, request: dict[str, Any], model: str, messages: list[dict[str, Any]]) -> None:
        owner = self.owner
        stream = bool(request.get("stream"))
        record = owner._begin(request, model, messages)
        fault = owner._take_fault()
        # A faulted request does not use up its script, nor one whose reasoning ran out of room before its
        # answer began: the retry that follows should get it.
        script = owner._choose(
            messages,
            consume=lambda s: fault is None and _reasoning_fits(owner.reasoning, record, s),
        )
        if fault is not None:
            record.fault = fault.kind.value
        if fault is not None and fault.kind in (FaultKind.RATE_LIMIT, FaultKind.SERVER_ERROR):
            self._fail(record, fault)
            return
        if script is None and fault is None:
            record.status, record.error = 400, owner._no_script_message()
            body = _error_body(record.error, "invalid_request_error", "no_scripted_reply", "messages")
            self._send_json(HTTPStatus.BAD_REQUEST, body, {"x-should-retry": "false"})
            record.finished_at = time.monotonic()
            return
        record.script = script.name if script and fault is None else None
        reply = script.reply if script and (fault is None or fault.kind == FaultKind.STALL) else ""
        reasoning = _reasoning_text(owner.reasoning, record, script) if reply else ""
        reasoning, reply = _within_limit(record, reasoning, reply)
        completion_id = f"chatcmpl-sandbox-{record.index}"
        headers = owner._rate_headers(record.prompt_tokens + count_tokens(reply))
        headers[SCRIPT_HEADER] = record.script or f"(fault: {record.fault})"
        if fault is not None and fault.kind == FaultKind.MALFORMED:
            self._malformed(record, stream, headers)
        elif stream:
            self._stream(record, completion_id, model, (reasoning, reply), fault, headers)
        else:
            self._complete(record, completion_id, model, (reasoning, reply), headers)

    def _stall(self, record: RequestRecord, fault: Fault) -> None:
        chunks = "chunk" if record.chunks_sent == 1 else "chunks"
        record.error = f"stream stalled after {record.chunks_sent} {chunks} (injected by the sandbox)"
        self._pause(fault.stall_seconds)
        raise _ClientGone

    def _fail(self, record: RequestRecord, fault: Fault) -> None:
        if fault.kind == FaultKind.RATE_LIMIT:
            record.status = 429
            body = _error_body(
                "Requests per minute limit exceeded - too many requests sent.",
                "too_many_requests_error",
                "request_quota_exceeded",
                "quota",
            )
            headers = {
                "retry-after": f"{fault.retry_after:g}",
                "retry-after-ms": str(int(fault.retry_after * 1000)),
            }
        else:
            record.status = fault.status
            body = _error_body(
                "Internal server error (injected by the sandbox)", "server_error", "internal_error"
            )
            headers = {}
        record.error = body["message"]
        self._send_json(record.status, body, headers)
        record.finished_at = time.monotonic()

    def _malformed(self, record: RequestRecord, stream: bool, headers: dict[str, str]) -> None:
        record.error = "malformed body (injected by the sandbox)"
        data = (
            b'data: {"id": "chatcmpl-broken", "choices": [\n\n'
            if stream
            else b'{"id": "chatcmpl-broken", "cho'
        )
        self._send_raw(HTTPStatus.OK, data, "text/event-stream" if stream else "application/json", headers)
        record.finished_at = time.monotonic()

    def _timing(self, record: RequestRecord, tokens: int) -> dict[str, float]:
        speed = self.owner.speed
        prompt_time = speed.ttft_ms / 1000
        completion_time = tokens / speed.tokens_per_second
        return {
            "queue_time": 0.0,
            "prompt_time": prompt_time,
            "completion_time": completion_time,
            "total_time": prompt_time + completion_time,
            "created": time.time(),
        }

    def _usage(self, record: RequestRecord, tokens: int, reasoning_tokens: int) -> dict[str, Any]:
        record.completion_tokens, record.reasoning_tokens = tokens, reasoning_tokens
        return {
            "prompt_tokens": record.prompt_tokens,
            "completion_tokens": tokens,
            "total_tokens": record.prompt_tokens + tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": reasoning_tokens,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def _complete(
        self,
        record: RequestRecord,
        completion_id: str,
        model: str,
        texts: tuple[str, str],
        headers: dict[str, str],
    ) -> None:
        speed = self.owner.speed
        reasoning, reply = texts
        tokens = count_tokens(reply) + count_tokens(reasoning)
        # A non-streamed answer arrives when the last token would have (unless the client gives up first).
        try:
            self._pause(speed.ttft_ms / 1000 + tokens / speed.tokens_per_second)
        except _ClientGone:
            record.cancelled, record.finished_at = True, time.monotonic()
            self.close_connection = True
            return
        message: dict[str, Any] = {"role": "assistant", "content": reply}
        shown = _shown_reasoning(record, model, reasoning)
        if shown.get("reasoning"):
            message["reasoning"] = shown["reasoning"]
        message["content"] = shown.get("content", "") + reply
        body = {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": FINGERPRINT,
            "choices": [{"index": 0, "finish_reason": record.finish_reason, "message": message}],
            "usage": self._usage(record, tokens, count_tokens(reasoning)),
            "time_info": self._timing(record, tokens),
        }
        record.first_token_at = record.first_content_at = record.finished_at = time.monotonic()
        self._send_json(HTTPStatus.OK, body, headers)

    def _stream(
        self,
        record: RequestRecord,
        completion_id: str,
        model: str,
        texts: tuple[str, str],
        fault: Fault | None,
        headers: dict[str, str],
    ) -> None:
        speed = self.owner.speed
        reasoning, reply = texts
        created = int(time.time())

        def chunk(delta: dict[str, Any], **extra: Any) -> bytes:
            choice: dict[str, Any] = {"index": 0, "delta": delta}
            if "finish_reason" in extra:
                choice["finish_reason"] = extra.pop("finish_reason")
            body = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": FINGERPRINT,
                "choices": [choice],
                **extra,
            }
            return b"data: " + json.dumps(body).encode() + b"\n\n"

        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        size = speed.chunk_tokens * CHARS_PER_TOKEN
        shown = _shown_reasoning(record, model, reasoning)
        deltas = [{key: p} for key, text in shown.items() for p in _pieces(text, size)]
        deltas += [{"content": p} for p in _pieces(reply, size)]
        reasoning_tokens, total = count_tokens(reasoning), count_tokens(reasoning) + count_tokens(reply)
        start = record.received_at + speed.ttft_ms / 1000
        stall = fault if fault is not None and fault.kind == FaultKind.STALL else None
        # Hidden reasoning is still generated: the first content comes after its time.
        tokens = reasoning_tokens if not shown else 0
        try:
            self._write_chunk(chunk({"role": "assistant"}))
            for delta in deltas:
                if stall is not None and record.chunks_sent >= stall.after_chunks:
                    self._stall(record, stall)
                [(key, text)] = delta.items()
                # Absolute schedule, so sleeping overhead does not accumulate into a slower rate.
                self._pause(start + tokens / speed.tokens_per_second - time.monotonic())
                tokens += count_tokens(text)
                self._write_chunk(chunk(delta))
                record.chunks_sent += 1
                now = time.monotonic()
                if record.first_token_at is None:
                    record.first_token_at = now
                if key == "content" and record.first_content_at is None:
                    record.first_content_at = now
            if stall is not None:
                self._stall(record, stall)
            self._pause(start + total / speed.tokens_per_second - time.monotonic())
            last = chunk(
                {},
                finish_reason=record.finish_reason,
                usage=self._usage(record, total, reasoning_tokens),
                time_info=self._timing(record, total),
            )
            self._write_chunk(last)
            self._write_chunk(b"")  # end of the chunked body
        except _ClientGone:
            record.cancelled = record.error is None
            self.close_connection = True
        record.finished_at = time.monotonic()


def _reasoning_refusal(request: dict[str, Any], model: str) -> tuple[str, str] | None:
    """Return (parameter, message) when the request's reasoning parameters are not for ``model``."""
    effort, form = request.get("reasoning_effort"), request.get("reasoning_format")
    if form is not None and form not in REASONING_FORMATS:
        return "reasoning_format", f"reasoning_format must be one of {', '.join(REASONING_FORMATS)}"
    if effort is None:
        return None
    accepted = REASONING_MODELS.get(model, ((), ""))[0]
    if effort not in accepted:
        takes = f"one of {', '.join(accepted)}" if accepted else "not supported"
        return "reasoning_effort", f"reasoning_effort {effort!r} is not valid for {model}: {takes}"
    return None


def _format(record: RequestRecord) -> str:
    return record.reasoning_format or "none"


def _reasoning_text(reasoning: Reasoning, record: RequestRecord, script: Script | None) -> str:
    """Return what the model reasons before its answer: the script's words, or filler of the run's length."""
    known = REASONING_MODELS.get(record.model)
    if known is None:
        return ""
    effort = record.reasoning_effort or known[1]
    tokens = reasoning.tokens(effort)
    if effort == "none":
        return ""
    if script is not None and script.reasoning:
        return script.reasoning
    if tokens <= 0:
        return ""
    return (_THOUGHT * (tokens * CHARS_PER_TOKEN // len(_THOUGHT) + 1))[: tokens * CHARS_PER_TOKEN]


def _reasoning_fits(reasoning: Reasoning, record: RequestRecord, script: Script) -> bool:
    """Return whether any of the answer comes out after the reasoning, within the length limit."""
    limit = record.max_completion_tokens
    return limit is None or count_tokens(_reasoning_text(reasoning, record, script)) < limit


def _within_limit(record: RequestRecord, reasoning: str, reply: str) -> tuple[str, str]:
    """Cut reasoning and answer to ``max_completion_tokens`` (which counts both); set the finish reason."""
    limit = record.max_completion_tokens
    record.finish_reason = "stop"
    if limit is None or count_tokens(reasoning) + count_tokens(reply) <= limit:
        return reasoning, reply
    record.finish_reason = "length"
    if count_tokens(reasoning) >= limit:
        return reasoning[: limit * CHARS_PER_TOKEN], ""
    room = limit - count_tokens(reasoning)
    return reasoning, reply[: room * CHARS_PER_TOKEN]


def _shown_reasoning(record: RequestRecord, model: str, reasoning: str) -> dict[str, str]:
    """Return where the reasoning goes in the answer for the request's ``reasoning_format``."""
    if not reasoning or _format(record) == "hidden":
        return {}
    if _format(record) == "raw":
        # GLM wraps its thinking in tags; gpt-oss glues it to the content without a separator.
        return {"content": f"<think>{reasoning}</think>" if model.startswith("zai-glm") else reasoning}
    return {"reasoning": reasoning}


def _model(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "Cerebras"}


__all__ = [
    "DEFAULT_API_KEY",
    "DEFAULT_MODELS",
    "Fault",
    "FaultKind",
    "ModelSandbox",
    "Reasoning",
    "RequestRecord",
    "Script",
    "Speed",
    "count_tokens",
]
