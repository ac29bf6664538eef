"""The Anthropic Messages adapter: stream parsing and request building (signatures, images)."""

from __future__ import annotations

import pytest
from wire_server import Reply, WireServer, collect
from wire_transcripts import (
    ANTHROPIC_REDACTED_PAUSE,
    ANTHROPIC_STREAM,
    MESSAGE_START,
    anthropic,
    ctx,
    run_parser,
    summarize,
)

from ipyagent.agentlib.errors import (
    AuthenticationError,
    ContextOverflowError,
    ProtocolError,
    ProviderError,
    ProviderUnavailable,
    RateLimitError,
    UserError,
)
from ipyagent.agentlib.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ipyagent.agentlib.model import ModelRequest, ModelSettings, TextChunk, ThinkingChunk
from ipyagent.agentlib.providers.anthropic import (
    AnthropicProvider,
    AnthropicStreamParser,
    build_request,
)


def parse(data: bytes) -> list:  # type: ignore[type-arg]
    return run_parser(AnthropicStreamParser(ctx("anthropic")), data)


def test_reference_stream() -> None:
    events = parse(ANTHROPIC_STREAM)
    s = summarize(events)
    assert (s.thinking, s.signatures, s.text) == ("Let me", ["EqQB..."], "Looking it up.")
    assert s.calls == {2: {"id": "toolu_01", "name": "get_rate", "arguments": '{"cur": "EUR"}'}}
    assert (s.finish, s.response_id) == ("tool_calls", "msg_1")
    assert s.usage is not None and (s.usage.input_tokens, s.usage.output_tokens) == (43, 175)
    # Blocks keep their index as key, so the assembler can tell them apart.
    assert {e.key for e in events if isinstance(e, TextChunk | ThinkingChunk)} == {0, 1}


def test_redacted_thinking_pause_turn_and_empty_input() -> None:
    s = summarize(parse(ANTHROPIC_REDACTED_PAUSE))
    assert s.redacted == ["EmwKAhgB"]
    assert s.calls == {1: {"id": "t2", "name": "noop", "arguments": ""}}  # empty total means {}
    assert s.finish == "pause"  # the loop sends the reply back and lets it go on


def test_usage_is_cumulative_and_counts_cache() -> None:
    start = {
        "type": "message_start",
        "message": {
            "id": "m",
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5},
        },
    }
    data = anthropic(
        start,
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}},
        {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    )
    s = summarize(parse(data))
    assert s.usage is not None
    assert (s.usage.input_tokens, s.usage.cache_read_tokens, s.usage.cache_write_tokens) == (15, 100, 5)
    assert s.usage.output_tokens == 9 and s.finish == "stop"


def test_tool_input_given_whole_in_the_start_block() -> None:
    data = anthropic(
        MESSAGE_START,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_stop"},
    )  # fmt: skip
    assert summarize(parse(data)).calls[0]["arguments"] == '{"a": 1}'


@pytest.mark.parametrize(
    ("error_type", "cls", "retryable"),
    [
        ("overloaded_error", ProviderUnavailable, True),
        ("api_error", ProviderUnavailable, True),
        ("rate_limit_error", RateLimitError, True),
        ("authentication_error", AuthenticationError, False),
        ("invalid_request_error", ProviderError, False),
    ],
)
def test_error_events(error_type: str, cls: type[ProviderError], retryable: bool) -> None:
    data = anthropic(MESSAGE_START, {"type": "error", "error": {"type": error_type, "message": "x"}})
    with pytest.raises(ProviderError) as info:
        parse(data)
    assert type(info.value) is cls and info.value.retryable is retryable


def test_prompt_too_long_is_context_overflow() -> None:
    data = anthropic(
        {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens"},
        }
    )
    with pytest.raises(ContextOverflowError):
        parse(data)


def test_tool_use_without_name() -> None:
    data = anthropic(
        MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t"}},
    )
    with pytest.raises(ProtocolError):
        parse(data)


# -- request building ----------------------------------------------------------------------------

CALL = ToolCallBlock.from_raw(id="toolu_1", name="get_rate", raw_arguments='{"cur": "EUR"}')
BAD_CALL = ToolCallBlock.from_raw(id="toolu_2", name="get_rate", raw_arguments="{oops")


def _assistant(model: str | None) -> Message:
    return Message(
        role="assistant",
        content=(
            ThinkingBlock(text="Let me", signature="EqQB"),
            ThinkingBlock(redacted="EmwK"),
            ThinkingBlock(text="unsigned"),
            TextBlock(text="Checking."),
            CALL,
            BAD_CALL,
        ),
        model=model,
    )


RESULTS = Message(
    role="user",
    content=(
        TextBlock(text="and also"),
        ToolResultBlock(tool_call_id="toolu_1", content="1.08"),
        ToolResultBlock(tool_call_id="toolu_2", content="bad arguments", is_error=True),
    ),
)


# Cache marks are tested in test_prompt_cache_wire.py; these tests look at the blocks alone.
NO_CACHE = ModelSettings(prompt_cache="off")


def test_request_keeps_own_signed_thinking() -> None:
    request = ModelRequest(
        model="claude-x",
        system="Be brief.",
        messages=[Message.user("Rate?"), _assistant("anthropic/claude-x"), RESULTS],
        settings=NO_CACHE,
    )
    body = build_request(request, model="claude-x")
    assert body["system"] == "Be brief." and body["max_tokens"] > 0 and body["stream"] is True
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "Let me", "signature": "EqQB"},
        {"type": "redacted_thinking", "data": "EmwK"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_rate", "input": {"cur": "EUR"}},
        {"type": "tool_use", "id": "toolu_2", "name": "get_rate", "input": {}},
    ]
    # Tool results open the user turn, before its text.
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1.08"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "bad arguments", "is_error": True},
        {"type": "text", "text": "and also"},
    ]


def test_request_drops_thinking_from_another_endpoint() -> None:
    request = ModelRequest(
        model="claude-x", messages=[Message.user("Rate?"), _assistant("openai/gpt-4.1"), RESULTS]
    )
    content = build_request(request, model="claude-x")["messages"][1]["content"]
    assert [b["type"] for b in content] == ["text", "tool_use", "tool_use"]
    # A user-defined Anthropic endpoint is another signer too.
    other = build_request(request, model="claude-x", endpoint="my-proxy")["messages"][1]["content"]
    assert [b["type"] for b in other] == ["text", "tool_use", "tool_use"]


def test_images_and_merged_turns() -> None:
    request = ModelRequest(
        model="c",
        messages=[
            Message.user("Look", ImageBlock(data="AAAA", media_type="image/jpeg")),
            Message.user("", ImageBlock(url="https://example.com/a.png")),
            Message(role="assistant", content=(), model="anthropic/c"),  # interrupted at once
        ],
        settings=NO_CACHE,
    )
    assert build_request(request, model="c")["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
            ],
        }
    ]


@pytest.mark.parametrize(
    ("level", "max_tokens", "budget", "sent_max"),
    [
        ("low", None, 2048, 2048 + 8192),
        ("high", None, 24576, 24576 + 8192),
        ("medium", 4000, 2000, 4000),
        ("none", None, None, 8192),
    ],
)
def test_thinking_budget(level: str, max_tokens: int | None, budget: int | None, sent_max: int) -> None:
    settings = ModelSettings(thinking=level, max_tokens=max_tokens, temperature=0.2)  # type: ignore[arg-type]
    body = build_request(ModelRequest(model="c", messages=[], settings=settings), model="c")
    assert body.get("thinking") == (None if budget is None else {"type": "enabled", "budget_tokens": budget})
    assert body["max_tokens"] == sent_max
    assert ("temperature" in body) is (budget is None)  # thinking accepts no temperature


def test_thinking_with_tiny_max_tokens_is_a_user_error() -> None:
    settings = ModelSettings(thinking="low", max_tokens=500)
    with pytest.raises(UserError, match="max_tokens"):
        build_request(ModelRequest(model="c", messages=[], settings=settings), model="c")


async def test_headers_and_path(server: WireServer) -> None:
    server.queue(Reply(ANTHROPIC_STREAM, pieces=3))
    provider = AnthropicProvider(
        "claude-x", base_url=server.base_url, api_key="sk-ant-test-1234", endpoint="anthropic"
    )
    await collect(provider.stream(ModelRequest(model="claude-x", messages=[Message.user("hi")])))
    sent = server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-test-1234"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.json["model"] == "claude-x"
