"""The Cerebras adapter (`ModelClient`) with the real cerebras-cloud-sdk against the local sandbox."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis

from bot.adapters.cerebras import ModelClient, ModelError
from bot.cancel import CancelToken, cancel_pr
from bot.redis_server import free_port
from sandbox.cerebras import (
    DEFAULT_API_KEY,
    Fault,
    FaultKind,
    ModelSandbox,
    Reasoning,
    Script,
    Speed,
    count_tokens,
)

MODEL = "gpt-oss-120b"
MESSAGES = [{"role": "user", "content": "fix app.py"}]
REPLY = "app.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n"


class CancelAfter:
    """A cancel check that fires on its ``n``-th question (counts how often it was asked)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.asked = 0

    def cancelled(self) -> bool:
        self.asked += 1
        return self.asked >= self.n


@pytest.fixture()
def sandbox() -> Iterator[ModelSandbox]:
    with ModelSandbox(speed=Speed(ttft_ms=20, tokens_per_second=20_000)) as server:
        yield server


def client_for(sandbox: ModelSandbox, **kwargs: float) -> ModelClient:
    return ModelClient(DEFAULT_API_KEY, base_url=sandbox.url, **kwargs)  # type: ignore[arg-type]


def wait_finished(sandbox: ModelSandbox, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while sandbox.requests[-1].finished_at is None:
        assert time.monotonic() < deadline, "the sandbox stream never ended"
        time.sleep(0.01)


def test_complete_streams_the_reply_with_usage_and_timings(sandbox: ModelSandbox) -> None:
    sandbox.add_scripts([Script(REPLY)])
    client = client_for(sandbox)
    result = client.complete(MESSAGES, MODEL, 1024)
    assert result.text == REPLY
    assert result.finish_reason == "stop"
    assert not result.cancelled
    assert result.completion_tokens == count_tokens(REPLY)
    assert result.prompt_tokens > 0
    assert result.ttft >= 0.02
    assert result.total >= result.ttft
    assert result.tokens_per_second > 0
    assert "completion_time" in result.server_time
    assert sandbox.requests[0].stream is True


def test_the_client_is_reused_across_calls(sandbox: ModelSandbox) -> None:
    sandbox.add_scripts([Script(REPLY, repeat=True)])
    client = client_for(sandbox)
    texts = {client.complete(MESSAGES, MODEL, 256).text for _ in range(5)}
    assert texts == {REPLY}
    assert len(sandbox.requests) == 5


def test_cancel_closes_the_stream_and_the_server_stops_sending(sandbox: ModelSandbox) -> None:
    long_reply = "line of code\n" * 2000
    sandbox.set_speed(Speed(ttft_ms=10, tokens_per_second=2_000))
    sandbox.add_scripts([Script(long_reply)])
    result = client_for(sandbox).complete(MESSAGES, MODEL, 20_000, cancel=CancelAfter(5))
    assert result.cancelled
    assert result.finish_reason == "cancelled"
    assert len(result.text) < len(long_reply)
    wait_finished(sandbox)
    record = sandbox.requests[-1]
    assert record.cancelled
    assert record.chunks_sent < count_tokens(long_reply) // Speed().chunk_tokens


def test_a_redis_cancel_flag_stops_a_running_stream(sandbox: ModelSandbox, redis_conn: redis.Redis) -> None:
    long_reply = "token " * 4000
    sandbox.set_speed(Speed(ttft_ms=10, tokens_per_second=1_000))  # about six seconds of output
    sandbox.add_scripts([Script(long_reply)])
    token = CancelToken.start(redis_conn, "1:o/r#1", "fix", order=1, interval=0.05)
    timer = threading.Timer(0.3, cancel_pr, args=(redis_conn, "1:o/r#1"))
    timer.start()
    started = time.monotonic()
    result = client_for(sandbox).complete(MESSAGES, MODEL, 20_000, cancel=token)
    timer.join()
    assert result.cancelled
    assert "stopped" in token.reason
    assert time.monotonic() - started < 3.0
    wait_finished(sandbox)
    assert sandbox.requests[-1].cancelled


def test_a_cancel_cuts_a_stalled_stream_at_once(sandbox: ModelSandbox) -> None:
    sandbox.inject(Fault(FaultKind.STALL, times=1, after_chunks=1, stall_seconds=5))
    sandbox.add_scripts([Script(REPLY * 20)])
    fire_at = time.monotonic() + 0.3

    class Deadline:
        def cancelled(self) -> bool:
            return time.monotonic() >= fire_at

    result = client_for(sandbox, timeout=10).complete(MESSAGES, MODEL, 256, cancel=Deadline())
    assert result.cancelled
    assert time.monotonic() - fire_at < 1.0  # not the 5 s stall, nor the 10 s read timeout


def test_rate_limit_after_the_sdk_retry_is_a_clear_error(sandbox: ModelSandbox) -> None:
    sandbox.inject(Fault(FaultKind.RATE_LIMIT, times=2, status=429, retry_after=0.01))
    with pytest.raises(ModelError) as caught:
        client_for(sandbox).complete(MESSAGES, MODEL, 256)
    assert caught.value.kind == "rate_limited"
    assert "rate limited" in caught.value.user_message
    assert len(sandbox.requests) == 2  # one try and the one retry the adapter allows


def test_one_transient_server_error_is_retried(sandbox: ModelSandbox) -> None:
    sandbox.inject(Fault(FaultKind.SERVER_ERROR, times=1, status=503, retry_after=0.01))
    sandbox.add_scripts([Script(REPLY)])
    assert client_for(sandbox).complete(MESSAGES, MODEL, 256).text == REPLY


def test_persistent_server_errors_say_the_model_is_unavailable(sandbox: ModelSandbox) -> None:
    sandbox.inject(Fault(FaultKind.SERVER_ERROR, times=2, status=500, retry_after=0.01))
    with pytest.raises(ModelError) as caught:
        client_for(sandbox).complete(MESSAGES, MODEL, 256)
    assert caught.value.kind == "unavailable"


def test_a_stalled_stream_times_out(sandbox: ModelSandbox) -> None:
    sandbox.inject(Fault(FaultKind.STALL, times=2, after_chunks=1, stall_seconds=5))
    sandbox.add_scripts([Script(REPLY * 20)])
    with pytest.raises(ModelError) as caught:
        client_for(sandbox, timeout=0.3, max_retries=0).complete(MESSAGES, MODEL, 256)
    assert caught.value.kind == "timed_out"


def test_an_unknown_model_is_reported(sandbox: ModelSandbox) -> None:
    with pytest.raises(ModelError) as caught:
        client_for(sandbox).complete(MESSAGES, "no-such-model", 256)
    assert caught.value.kind == "unavailable"
    assert "not available" in caught.value.user_message


def test_warm_opens_the_pool_once_and_fails_fast_on_a_dead_endpoint(sandbox: ModelSandbox) -> None:
    assert client_for(sandbox).warm() is True
    dead = ModelClient(DEFAULT_API_KEY, base_url=f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    assert dead.warm() is False
    assert time.monotonic() - started < 1.0


def test_reasoning_streams_before_the_content_and_is_counted_apart(sandbox: ModelSandbox) -> None:
    """The local model reasons first at its throughput; the client keeps the reasoning out of the text and
    times its first token of any kind and of content apart."""
    sandbox.set_speed(Speed(ttft_ms=20, tokens_per_second=2_000))
    sandbox.set_reasoning(Reasoning(low=100, medium=500))
    sandbox.add_scripts([Script(REPLY, repeat=True)])
    client = client_for(sandbox)
    low = client.complete(MESSAGES, MODEL, 4096, reasoning_effort="low", reasoning_format="parsed")
    assert low.text == REPLY
    assert low.reasoning_tokens == 100
    assert low.completion_tokens == 100 + count_tokens(REPLY)
    # 100 reasoning tokens at 2,000 tok/s: the content starts about 50 ms after the first token.
    assert low.ttft - low.first_token >= 0.04
    record = sandbox.requests[-1]
    assert (record.reasoning_effort, record.reasoning_format) == ("low", "parsed")
    assert record.first_token_at is not None and record.first_content_at is not None
    assert record.first_content_at > record.first_token_at
    default = client.complete(MESSAGES, MODEL, 4096)  # no effort sent: gpt-oss reasons at medium
    assert default.reasoning_tokens == 500 and default.text == REPLY


def test_reasoning_formats_and_efforts_the_api_refuses(sandbox: ModelSandbox) -> None:
    sandbox.set_reasoning(Reasoning.flat(40))
    sandbox.add_scripts([Script(REPLY, repeat=True)])
    client = client_for(sandbox)
    hidden = client.complete(MESSAGES, MODEL, 4096, reasoning_format="hidden")
    assert hidden.text == REPLY and hidden.reasoning_tokens == 40
    raw = client.complete(MESSAGES, MODEL, 4096, reasoning_format="raw")
    assert raw.text.endswith(REPLY) and raw.text != REPLY  # what "parsed" keeps out of the content
    with pytest.raises(ModelError, match=r"reasoning_effort 'none' is not valid for gpt-oss-120b"):
        client.complete(MESSAGES, MODEL, 4096, reasoning_effort="none")
    with pytest.raises(ModelError, match=r"not valid for llama3\.1-8b"):
        client.complete(MESSAGES, "llama3.1-8b", 4096, reasoning_effort="low")
    glm = client.complete(MESSAGES, "zai-glm-4.7", 4096, reasoning_effort="none")
    assert glm.reasoning_tokens == 0 and glm.first_token == glm.ttft


def test_reasoning_counts_against_the_length_limit(sandbox: ModelSandbox) -> None:
    sandbox.set_reasoning(Reasoning.flat(300))
    sandbox.add_scripts([Script(REPLY)])
    cut = client_for(sandbox).complete(MESSAGES, MODEL, 256, reasoning_format="parsed")
    assert cut.finish_reason == "length"
    assert (cut.text, cut.reasoning_tokens, cut.completion_tokens) == ("", 256, 256)
