"""Every HTTP adapter against a real loopback server: transcripts cut at random byte boundaries,
and each injected fault ending in the right structured error — never a hang, never a stray
exception."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
from wire_server import Reply, WireServer, collect
from wire_transcripts import (
    ANTHROPIC_OVERLOADED,
    ANTHROPIC_STREAM,
    ANTHROPIC_TRUNCATED,
    GROQ_ERROR_EVENT,
    OLLAMA_ERROR_LINE,
    OLLAMA_STREAM,
    OLLAMA_TRUNCATED,
    OPENAI_INVALID_JSON,
    OPENAI_TOOL_CALL,
    OPENAI_TRUNCATED,
    OPENROUTER_ERROR_CHUNK,
    ndjson,
    summarize,
)

from ipyagent.agentlib.errors import (
    AgentError,
    AuthenticationError,
    ContextOverflowError,
    ModelNotFoundError,
    ProtocolError,
    ProviderError,
    ProviderUnavailable,
    RateLimitError,
    TransportError,
)
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.model import ModelRequest
from ipyagent.agentlib.providers._http import HTTPProvider
from ipyagent.agentlib.providers.anthropic import AnthropicProvider
from ipyagent.agentlib.providers.ollama import OllamaProvider
from ipyagent.agentlib.providers.openai import OpenAIProvider

REQUEST = ModelRequest(model="m", messages=[Message.user("hi")])


@dataclass
class Kind:
    name: str
    make: Callable[..., HTTPProvider]
    ok: bytes
    content_type: str
    truncated: bytes
    invalid_json: bytes
    check: Callable[..., None]


def _check_openai(s: object) -> None:
    summary = summarize(s)  # type: ignore[arg-type]
    assert summary.calls == {0: {"id": "call_ZR5x", "name": "get_capital", "arguments": '{"country":"UK"}'}}
    assert summary.finish == "tool_calls"
    assert summary.usage is not None and summary.usage.input_tokens == 53


def _check_anthropic(s: object) -> None:
    summary = summarize(s)  # type: ignore[arg-type]
    assert summary.text == "Looking it up."
    assert summary.calls[2] == {"id": "toolu_01", "name": "get_rate", "arguments": '{"cur": "EUR"}'}
    assert summary.finish == "tool_calls"


def _check_ollama(s: object) -> None:
    summary = summarize(s)  # type: ignore[arg-type]
    assert summary.text == "The"
    assert summary.calls[0]["name"] == "get_weather"
    assert summary.usage is not None and summary.usage.output_tokens == 290


KINDS = [
    Kind(
        "openai",
        lambda url, **kw: OpenAIProvider(
            "m", base_url=url + "/v1", api_key="sk-test-key", endpoint="openai", **kw
        ),
        OPENAI_TOOL_CALL,
        "text/event-stream",
        OPENAI_TRUNCATED,
        OPENAI_INVALID_JSON,
        _check_openai,
    ),
    Kind(
        "anthropic",
        lambda url, **kw: AnthropicProvider(
            "m", base_url=url, api_key="sk-test-key", endpoint="anthropic", **kw
        ),
        ANTHROPIC_STREAM,
        "text/event-stream",
        ANTHROPIC_TRUNCATED,
        ANTHROPIC_STREAM.replace(b'"type":"message_delta"', b'"type":"message_delta",,', 1),
        _check_anthropic,
    ),
    Kind(
        "ollama",
        lambda url, **kw: OllamaProvider("m", base_url=url, endpoint="ollama", **kw),
        OLLAMA_STREAM,
        "application/x-ndjson",
        OLLAMA_TRUNCATED,
        ndjson({"message": {"content": "a"}, "done": False}) + b'{"message": {"content": \n',
        _check_ollama,
    ),
]


@pytest.fixture(params=KINDS, ids=lambda k: k.name)
def kind(request: pytest.FixtureRequest) -> Kind:
    return request.param  # type: ignore[no-any-return]


async def _fails(server: WireServer, kind: Kind, reply: Reply, **kw: object) -> AgentError:
    server.queue(reply)
    with pytest.raises(AgentError) as info:
        await collect(kind.make(server.base_url, **kw).stream(REQUEST))
    return info.value


@pytest.mark.parametrize("seed", range(6))
async def test_transcript_cut_anywhere(server: WireServer, kind: Kind, seed: int) -> None:
    server.queue(Reply(kind.ok, content_type=kind.content_type, pieces=40, seed=seed))
    kind.check(await collect(kind.make(server.base_url).stream(REQUEST)))


async def test_slow_trickle_still_completes(server: WireServer, kind: Kind) -> None:
    server.queue(Reply(kind.ok, content_type=kind.content_type, pieces=25, delay=0.02))
    kind.check(await collect(kind.make(server.base_url, timeout=2.0).stream(REQUEST)))


async def test_429_with_retry_after(server: WireServer, kind: Kind) -> None:
    body = b'{"error": {"type": "rate_limit_error", "message": "Slow down"}}'
    err = await _fails(server, kind, Reply(body, 429, {"Retry-After": "7"}, "application/json"))
    assert isinstance(err, RateLimitError)
    assert err.retryable and err.retry_after == 7.0 and err.info.status_code == 429
    assert "Slow down" in str(err)


async def test_quota_429_is_not_retryable(server: WireServer, kind: Kind) -> None:
    body = b'{"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}'
    err = await _fails(server, kind, Reply(body, 429, content_type="application/json"))
    assert isinstance(err, RateLimitError) and not err.retryable and err.code == "quota_exceeded"


async def test_500_then_success(server: WireServer, kind: Kind) -> None:
    err = await _fails(server, kind, Reply(b"<html>Internal error</html>", 500, content_type="text/html"))
    assert isinstance(err, ProviderUnavailable) and err.retryable
    server.queue(Reply(kind.ok, content_type=kind.content_type))
    kind.check(await collect(kind.make(server.base_url).stream(REQUEST)))


async def test_529_overloaded(server: WireServer, kind: Kind) -> None:
    body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    err = await _fails(server, kind, Reply(body, 529, content_type="application/json"))
    assert isinstance(err, ProviderUnavailable) and err.retryable and err.code == "overloaded"


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_errors_are_not_retryable(server: WireServer, kind: Kind, status: int) -> None:
    body = b'{"error": {"message": "invalid x-api-key", "type": "authentication_error"}}'
    err = await _fails(server, kind, Reply(body, status, content_type="application/json"))
    assert isinstance(err, AuthenticationError) and not err.retryable
    assert "key" in err.hint


async def test_unknown_model(server: WireServer, kind: Kind) -> None:
    body = b'{"error": "model \\"nope\\" not found, try pulling it first"}'
    err = await _fails(server, kind, Reply(body, 404, content_type="application/json"))
    assert isinstance(err, ModelNotFoundError) and not err.retryable
    assert err.hint


async def test_context_overflow(server: WireServer, kind: Kind) -> None:
    body = (
        b'{"error": {"message": "This model\'s maximum context length is 8192 tokens.", '
        b'"type": "invalid_request_error", "code": "context_length_exceeded"}}'
    )
    err = await _fails(server, kind, Reply(body, 400, content_type="application/json"))
    assert isinstance(err, ContextOverflowError) and not err.retryable


async def test_reset_mid_stream(server: WireServer, kind: Kind) -> None:
    err = await _fails(
        server, kind, Reply(kind.ok, content_type=kind.content_type, fault="reset", fault_at=200)
    )
    assert isinstance(err, TransportError) and err.retryable


async def test_connection_closed_mid_body(server: WireServer, kind: Kind) -> None:
    err = await _fails(
        server, kind, Reply(kind.ok, content_type=kind.content_type, fault="cut", fault_at=150)
    )
    assert isinstance(err, TransportError) and err.retryable and err.code == "connection_closed"


async def test_stream_truncated_without_end_marker(server: WireServer, kind: Kind) -> None:
    err = await _fails(server, kind, Reply(kind.truncated, content_type=kind.content_type))
    assert isinstance(err, ProtocolError) and err.retryable and err.code == "incomplete_stream"


async def test_truncated_mid_line(server: WireServer, kind: Kind) -> None:
    reply = Reply(kind.ok, content_type=kind.content_type, fault="truncate", fault_at=len(kind.truncated) + 7)
    err = await _fails(server, kind, reply)
    assert isinstance(err, ProtocolError) and err.retryable


async def test_invalid_json_chunk(server: WireServer, kind: Kind) -> None:
    err = await _fails(server, kind, Reply(kind.invalid_json, content_type=kind.content_type))
    assert isinstance(err, ProtocolError) and not err.retryable and err.code == "invalid_json"


async def test_stall_hits_the_read_timeout(server: WireServer, kind: Kind) -> None:
    reply = Reply(kind.ok, content_type=kind.content_type, fault="stall", fault_at=100)
    err = await _fails(server, kind, reply, timeout=0.3)
    assert isinstance(err, TransportError) and err.retryable and err.code == "read_timeout"


async def test_connection_refused(kind: Kind) -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(TransportError) as info:
        await collect(kind.make(f"http://127.0.0.1:{port}").stream(REQUEST))
    assert info.value.retryable and info.value.code == "connection_failed"


# -- errors inside a 200 stream ------------------------------------------------------------------


def _openai(server: WireServer) -> OpenAIProvider:
    return OpenAIProvider("m", base_url=server.base_url, api_key="sk-test-key", endpoint="openrouter")


async def test_openrouter_error_chunk(server: WireServer) -> None:
    server.queue(Reply(OPENROUTER_ERROR_CHUNK))
    with pytest.raises(ProviderUnavailable) as info:
        await collect(_openai(server).stream(REQUEST))
    assert info.value.retryable and "Upstream provider failed" in str(info.value)
    assert info.value.info.status_code == 502


async def test_groq_error_event(server: WireServer) -> None:
    server.queue(Reply(GROQ_ERROR_EVENT))
    with pytest.raises(ProviderError) as info:
        await collect(_openai(server).stream(REQUEST))
    assert type(info.value) is ProviderError and not info.value.retryable
    assert "Failed to call a function" in str(info.value)


async def test_anthropic_overloaded_after_200(server: WireServer) -> None:
    server.queue(Reply(ANTHROPIC_OVERLOADED))
    provider = AnthropicProvider("m", base_url=server.base_url, api_key="sk-test-key", endpoint="anthropic")
    with pytest.raises(ProviderUnavailable) as info:
        await collect(provider.stream(REQUEST))
    assert info.value.retryable and info.value.code == "overloaded"


async def test_ollama_error_line(server: WireServer) -> None:
    server.queue(Reply(OLLAMA_ERROR_LINE, content_type="application/x-ndjson"))
    provider = OllamaProvider("m", base_url=server.base_url, endpoint="ollama")
    with pytest.raises(ProviderUnavailable) as info:
        await collect(provider.stream(REQUEST))
    assert info.value.retryable and "unexpected EOF" in str(info.value)


# -- the consumer stops early --------------------------------------------------------------------


async def test_cancel_mid_stream_is_clean(server: WireServer, kind: Kind) -> None:
    server.queue(Reply(kind.ok, content_type=kind.content_type, pieces=50, delay=0.05))
    task = asyncio.ensure_future(collect(kind.make(server.base_url).stream(REQUEST)))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_closing_the_stream_early_is_clean(server: WireServer, kind: Kind) -> None:
    server.queue(Reply(kind.ok, content_type=kind.content_type, pieces=50, delay=0.01))
    async with contextlib.aclosing(kind.make(server.base_url).stream(REQUEST)) as stream:
        async for _ in stream:
            break


async def test_a_given_client_is_used_and_left_open(server: WireServer, kind: Kind) -> None:
    async with httpx.AsyncClient(timeout=0.3) as client:
        # The client's own timeout applies: the stall ends in a read timeout.
        err = await _fails(
            server, kind, Reply(kind.ok, content_type=kind.content_type, fault="stall"), client=client
        )
        assert isinstance(err, TransportError) and err.code == "read_timeout"
        server.queue(Reply(kind.ok, content_type=kind.content_type))
        kind.check(await collect(kind.make(server.base_url, client=client).stream(REQUEST)))
        assert not client.is_closed
