"""The local Cerebras, driven only through the real ``cerebras-cloud-sdk`` client over HTTP."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from cerebras.cloud.sdk import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    Cerebras,
    InternalServerError,
    NotFoundError,
    RateLimitError,
)

from sandbox.cerebras import (
    DEFAULT_API_KEY,
    FINGERPRINT,
    Fault,
    FaultKind,
    ModelSandbox,
    Script,
    Speed,
    count_tokens,
)

FAST = Speed(ttft_ms=5, tokens_per_second=100_000)
FIX = "<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n"


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You fix code."}, {"role": "user", "content": text}]


@pytest.fixture()
def sandbox() -> Iterator[ModelSandbox]:
    with ModelSandbox(speed=FAST, label="test") as server:
        yield server


def client(server: ModelSandbox, **kwargs: object) -> Cerebras:
    return Cerebras(api_key=DEFAULT_API_KEY, base_url=server.url, warm_tcp_connection=False, **kwargs)  # type: ignore[arg-type]


def test_non_streaming_reply_is_the_matched_script_with_usage(sandbox: ModelSandbox) -> None:
    sandbox.add_scripts([Script(reply="other", path="lib/other.py"), Script(reply=FIX, path="src/calc.py")])
    reply = client(sandbox).chat.completions.create(
        model="gpt-oss-120b", messages=ask("Target file: src/calc.py\n/spark fix the sum")
    )
    assert reply.choices[0].message.content == FIX  # type: ignore[union-attr]
    assert reply.system_fingerprint == FINGERPRINT
    assert reply.usage is not None and reply.usage.completion_tokens == count_tokens(FIX)
    assert reply.time_info is not None and reply.time_info.completion_time is not None
    [record] = sandbox.requests
    assert record.script == "script-2" and record.status == 200 and not record.stream


def test_streaming_chunks_have_the_sdk_shape_and_the_last_carries_usage(sandbox: ModelSandbox) -> None:
    sandbox.add_scripts([Script(reply=FIX, command="fix", name="the-fix")])
    chunks = list(
        client(sandbox).chat.completions.create(
            model="gpt-oss-120b", messages=ask("user said: /spark FIX please"), stream=True
        )
    )
    # Every chunk parsed as a stream chunk (a missing field would make the SDK build a dict delta).
    assert all(type(c).__name__ == "ChatChunkResponse" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)  # type: ignore[union-attr]
    assert text == FIX
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"  # type: ignore[union-attr]
    assert last.usage is not None and last.usage.completion_tokens == count_tokens(FIX)
    assert last.time_info is not None
    assert sandbox.requests[0].script == "the-fix" and sandbox.requests[0].chunks_sent > 1


def test_raw_response_exposes_rate_limit_and_script_headers(sandbox: ModelSandbox) -> None:
    sandbox.add_scripts([Script(reply="ok", name="only")])
    raw = client(sandbox).chat.completions.with_raw_response.create(model="gpt-oss-120b", messages=ask("hi"))
    assert raw.headers["x-spark-sandbox-script"] == "only"
    assert int(raw.headers["x-ratelimit-remaining-requests-day"]) < int(
        raw.headers["x-ratelimit-limit-requests-day"]
    )
    assert float(raw.headers["x-ratelimit-reset-tokens-minute"]) <= 60


def test_scripts_by_order_are_used_once_and_then_a_clear_error(sandbox: ModelSandbox) -> None:
    sandbox.add_scripts([Script(reply="first"), Script(reply="second")])
    sdk = client(sandbox)
    answers = [sdk.chat.completions.create(model="gpt-oss-120b", messages=ask("x")) for _ in range(2)]
    assert [a.choices[0].message.content for a in answers] == ["first", "second"]  # type: ignore[union-attr]
    with pytest.raises(BadRequestError) as caught:
        sdk.chat.completions.create(model="gpt-oss-120b", messages=ask("x"))
    assert "no scripted reply" in str(caught.value) and "never invents" in str(caught.value)
    assert sandbox.requests[-1].script is None and sandbox.requests[-1].status == 400
    assert len(sandbox.requests) == 3  # a missing script is not retried


def test_wrong_key_is_401_in_cerebras_shape(sandbox: ModelSandbox) -> None:
    sdk = Cerebras(api_key="nope", base_url=sandbox.url, warm_tcp_connection=False)
    with pytest.raises(AuthenticationError) as caught:
        sdk.models.list()
    assert caught.value.status_code == 401
    assert isinstance(caught.value.body, dict) and caught.value.body["code"] == "wrong_api_key"


def test_models_list_retrieve_and_unknown(sandbox: ModelSandbox) -> None:
    sdk = client(sandbox)
    assert "gpt-oss-120b" in [m.id for m in sdk.models.list().data]
    assert sdk.models.retrieve("zai-glm-4.7").id == "zai-glm-4.7"
    with pytest.raises(NotFoundError):
        sdk.models.retrieve("no-such-model")
    with pytest.raises(NotFoundError):
        sdk.chat.completions.create(model="no-such-model", messages=ask("x"))


def test_tcp_warming_answers_so_a_warming_client_constructs_fast(sandbox: ModelSandbox) -> None:
    began = time.monotonic()
    Cerebras(api_key=DEFAULT_API_KEY, base_url=sandbox.url).close()
    assert time.monotonic() - began < 1.0  # a missing route would cost >1 s of SDK retries


def test_rate_limit_is_retried_by_the_sdk_honouring_retry_after(sandbox: ModelSandbox) -> None:
    sandbox.add_scripts([Script(reply="after the limit", name="s")])
    sandbox.inject(Fault(FaultKind.RATE_LIMIT, times=2, retry_after=0.05))
    reply = client(sandbox).chat.completions.create(model="gpt-oss-120b", messages=ask("x"))
    assert reply.choices[0].message.content == "after the limit"  # type: ignore[union-attr]
    assert [(r.status, r.fault, r.script) for r in sandbox.requests] == [
        (429, "rate_limit", None),
        (429, "rate_limit", None),
        (200, None, "s"),
    ]


def test_rate_limit_beyond_retries_raises(sandbox: ModelSandbox) -> None:
    sandbox.inject(Fault(FaultKind.RATE_LIMIT, times=5, retry_after=0.01))
    with pytest.raises(RateLimitError):
        client(sandbox, max_retries=1).chat.completions.create(model="gpt-oss-120b", messages=ask("x"))
    assert len(sandbox.requests) == 2


def test_server_error_without_retries_raises(sandbox: ModelSandbox) -> None:
    sandbox.inject(Fault(FaultKind.SERVER_ERROR, status=503))
    with pytest.raises(InternalServerError) as caught:
        client(sandbox, max_retries=0).chat.completions.create(
            model="gpt-oss-120b", messages=ask("x"), stream=True
        )
    assert caught.value.status_code == 503


def test_stalled_stream_times_out_after_the_chunks_it_sent(sandbox: ModelSandbox) -> None:
    sandbox.add_scripts([Script(reply="x" * 400, name="long")])
    sandbox.inject(Fault(FaultKind.STALL, after_chunks=2, stall_seconds=5))
    sdk = client(sandbox, max_retries=0, timeout=httpx.Timeout(0.3, connect=1.0))
    received: list[str] = []
    with pytest.raises((APITimeoutError, APIConnectionError, httpx.ReadTimeout)):
        for chunk in sdk.chat.completions.create(model="gpt-oss-120b", messages=ask("x"), stream=True):
            if chunk.choices and chunk.choices[0].delta.content:  # type: ignore[union-attr]
                received.append(chunk.choices[0].delta.content)  # type: ignore[union-attr]
    assert "".join(received) == "x" * 32  # two chunks of four tokens
    assert sandbox.requests[0].fault == "stall"
    assert [s.name for s in sandbox.unused_scripts] == ["long"]  # kept for the retry
    deadline = time.monotonic() + 2  # the server lets go of a stalled stream once the client hangs up
    while sandbox.requests[0].finished_at is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sandbox.requests[0].finished_at is not None and "stalled after 2 chunks" in str(
        sandbox.requests[0].error
    )


def test_malformed_body_is_an_error_not_a_reply(sandbox: ModelSandbox) -> None:
    sandbox.inject(Fault(FaultKind.MALFORMED))
    with pytest.raises(Exception) as caught:
        client(sandbox).chat.completions.create(model="gpt-oss-120b", messages=ask("x"))
    assert "json" in type(caught.value).__name__.lower() or "Expecting" in str(caught.value)


def test_empty_output(sandbox: ModelSandbox) -> None:
    sandbox.add_scripts([Script(reply="kept")])
    sandbox.inject(Fault(FaultKind.EMPTY))
    chunks = list(
        client(sandbox).chat.completions.create(model="gpt-oss-120b", messages=ask("x"), stream=True)
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ""  # type: ignore[union-attr]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 0


def test_speed_ttft_and_rate_are_simulated() -> None:
    reply = "y" * 4000  # 1000 tokens at 10,000 tok/s = 0.1 s after a 50 ms first token
    with ModelSandbox([Script(reply=reply)], speed=Speed(ttft_ms=50, tokens_per_second=10_000)) as server:
        began = time.monotonic()
        stream = client(server).chat.completions.create(model="gpt-oss-120b", messages=ask("x"), stream=True)
        first = None
        for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:  # type: ignore[union-attr]
                first = time.monotonic() - began
        total = time.monotonic() - began
    assert first is not None and 0.04 <= first < 0.5
    assert 0.14 <= total < 1.5


def test_closing_the_stream_stops_the_server_sending() -> None:
    reply = "z" * 40_000  # 10,000 tokens at 1,000 tok/s would take 10 s
    with ModelSandbox([Script(reply=reply)], speed=Speed(ttft_ms=1, tokens_per_second=1000)) as server:
        stream = client(server).chat.completions.create(model="gpt-oss-120b", messages=ask("x"), stream=True)
        for i, _ in enumerate(stream):
            if i == 3:
                break
        stream.close()
        deadline = time.monotonic() + 3
        while server.requests[0].finished_at is None and time.monotonic() < deadline:
            time.sleep(0.02)
        record = server.requests[0]
    assert record.cancelled and record.finished_at is not None
    assert record.chunks_sent < 100


def test_path_matching_needs_the_whole_path() -> None:
    script = Script(reply="r", path="src/calc.py")
    assert script.matches("Target file: src/calc.py\n") and script.matches("fix `src/calc.py`.")
    assert not script.matches("Target file: src/calc.pyi") and not script.matches("lib/src/calc.py")


def test_a_client_giving_up_before_the_first_token_is_noticed_at_once() -> None:
    with ModelSandbox([Script(reply="late")], speed=Speed(ttft_ms=3000)) as server:
        sdk = client(server, max_retries=0, timeout=httpx.Timeout(0.2, connect=1.0))
        with pytest.raises((APITimeoutError, httpx.ReadTimeout)):
            list(sdk.chat.completions.create(model="gpt-oss-120b", messages=ask("x"), stream=True))
        deadline = time.monotonic() + 2
        while server.requests[0].finished_at is None and time.monotonic() < deadline:
            time.sleep(0.01)
        record = server.requests[0]
    assert record.cancelled and record.chunks_sent == 0
    assert record.finished_at is not None and record.finished_at - record.received_at < 1.0
