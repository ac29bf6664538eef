"""The OpenAI-compatible adapter: stream parsing across servers' dialects, and request building."""

from __future__ import annotations

import json

import pytest
from wire_server import Reply, WireServer, collect
from wire_transcripts import (
    OPENAI_CONTENT_FILTER,
    OPENAI_PARALLEL,
    OPENAI_REASONING_CONTENT,
    OPENAI_REFUSAL,
    OPENAI_THINK_TAGS,
    OPENROUTER_REASONING,
    VLLM_CONTINUOUS_USAGE,
    chunk,
    ctx,
    run_parser,
    sse,
    summarize,
)

from ipyagent.agentlib.errors import ProtocolError
from ipyagent.agentlib.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ipyagent.agentlib.model import ModelRequest, ModelSettings, ToolSpec, UsageReport
from ipyagent.agentlib.providers.openai import (
    OpenAIDialect,
    OpenAIProvider,
    OpenAIStreamParser,
    build_request,
)


def parse(data: bytes, dialect: OpenAIDialect | None = None) -> list:  # type: ignore[type-arg]
    return run_parser(OpenAIStreamParser(ctx(), dialect=dialect or OpenAIDialect()), data)


def test_parallel_calls_interleaved_by_index() -> None:
    s = summarize(parse(OPENAI_PARALLEL))
    assert s.text == "Checking both."
    assert s.calls == {
        0: {"id": "call_a", "name": "get_rate", "arguments": '{"cur": "EUR"}'},
        1: {"id": "call_b", "name": "get_time", "arguments": '{"tz": "UTC"}'},
    }
    assert s.finish == "tool_calls"
    assert s.usage is not None and (s.usage.input_tokens, s.usage.output_tokens) == (10, 20)


def test_reasoning_content_and_final_usage_chunk() -> None:
    s = summarize(parse(OPENAI_REASONING_CONTENT))
    assert (s.thinking, s.text, s.finish) == ("Two plus two is four.", "4", "stop")
    assert s.usage is not None and s.usage.output_tokens == 9


def test_openrouter_comments_reasoning_once_and_cost() -> None:
    s = summarize(parse(OPENROUTER_REASONING))
    assert s.thinking == "Hmm."  # "reasoning" wins; the duplicate in reasoning_content is skipped
    assert s.text == "Hi"
    assert s.usage is not None and s.usage.cost == pytest.approx(0.0012)


def test_configured_reasoning_field_comes_first() -> None:
    data = sse(chunk({"reasoning": "generic", "thoughts": "custom"}), chunk({}, "stop"))
    assert summarize(parse(data, OpenAIDialect(reasoning_field="thoughts"))).thinking == "custom"


def test_think_tags_split_across_chunks() -> None:
    s = summarize(parse(OPENAI_THINK_TAGS))
    assert s.thinking == "Let me think hard."
    assert s.text == "The answer is <b>42</b>."
    off = summarize(parse(OPENAI_THINK_TAGS, OpenAIDialect(think_tags=False)))
    assert off.thinking == "" and off.text.startswith("<think>")


def test_continuous_usage_replaces() -> None:
    events = parse(VLLM_CONTINUOUS_USAGE)
    reports = [e for e in events if isinstance(e, UsageReport)]
    assert len(reports) == 1 and reports[0].usage.output_tokens == 3 and reports[0].usage.input_tokens == 3
    assert summarize(events).finish == "length"


def test_cached_tokens_are_split_out() -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 60}}
    s = summarize(parse(sse(chunk({}, "stop"), {"choices": [], "usage": usage})))
    assert s.usage is not None and (s.usage.input_tokens, s.usage.cache_read_tokens) == (40, 60)


def test_refusal_and_content_filter() -> None:
    refused = summarize(parse(OPENAI_REFUSAL))
    assert (refused.text, refused.finish) == ("I can't help with that.", "refusal")
    filtered = summarize(parse(OPENAI_CONTENT_FILTER))
    assert (filtered.text, filtered.finish) == ("Once upon", "content_filter")


@pytest.mark.parametrize(
    ("wire", "ours"),
    [("stop", "stop"), ("length", "length"), ("tool_calls", "tool_calls"), ("function_call", "tool_calls"),
     ("content_filter", "content_filter"), ("something_new", "stop")],
)  # fmt: skip
def test_finish_reasons(wire: str, ours: str) -> None:
    assert summarize(parse(sse(chunk({"content": "x"}), chunk({}, wire)))).finish == ours


def test_whole_calls_in_one_delta_and_repeated_index() -> None:
    # Ollama's /v1 sends each call whole; some servers number every call 0 with new ids.
    data = sse(
        chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "a", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "c2", "function": {"name": "b", "arguments": {"x": 1}}}]}),
        chunk({}, "stop"),
    )
    s = summarize(parse(data))
    assert [(c["id"], c["name"], c["arguments"]) for c in s.calls.values()] == [
        ("c1", "a", "{}"),
        ("c2", "b", '{"x": 1}'),
    ]
    assert s.finish == "tool_calls"  # "stop" after calls is corrected


def test_call_without_name_is_a_protocol_error() -> None:
    data = sse(
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}), chunk({}, "tool_calls")
    )
    with pytest.raises(ProtocolError, match="without a tool name"):
        parse(data)


def test_invalid_arguments_are_kept_raw() -> None:
    data = sse(
        chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{oops"}}]})
    )
    assert summarize(parse(data)).calls[0]["arguments"] == "{oops"


def test_finish_reason_without_done_is_accepted() -> None:
    assert summarize(parse(sse(chunk({"content": "x"}), chunk({}, "stop"), done=False))).finish == "stop"


# -- request building ----------------------------------------------------------------------------

CALL = ToolCallBlock.from_raw(id="call_1", name="get_rate", raw_arguments='{"cur": "EUR"}')
TRANSCRIPT = [
    Message.user("Rate?", ImageBlock(data="iVBORw0KGgo=", media_type="image/png")),
    Message(
        role="assistant",
        content=(ThinkingBlock(text="hmm", signature="sig"), TextBlock(text="Checking."), CALL),
        model="openai/gpt-4.1",
    ),
    Message(
        role="user",
        content=(
            ToolResultBlock(tool_call_id="call_1", name="get_rate", content="1.08"),
            ToolResultBlock(tool_call_id="call_2", name="x", content="boom", is_error=True),
            TextBlock(text="Thanks"),
        ),
    ),
]
TOOLS = [ToolSpec(name="get_rate", description="Rate.", parameters={"type": "object", "properties": {}})]


def test_request_body() -> None:
    request = ModelRequest(model="gpt-4.1", system="Be brief.", messages=TRANSCRIPT, tools=TOOLS)
    body = build_request(request, model="gpt-4.1")
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Rate?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        },
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_rate", "arguments": '{"cur": "EUR"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "1.08"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: boom"},
        {"role": "user", "content": "Thanks"},
    ]
    assert body["tools"] == [{"type": "function", "function": TOOLS[0].model_dump()}]


@pytest.mark.parametrize(
    ("dialect", "level", "expected"),
    [
        (OpenAIDialect(), "high", {"reasoning_effort": "high"}),
        (OpenAIDialect(), "none", {}),
        (OpenAIDialect(thinking_param="openrouter"), "low", {"reasoning": {"effort": "low"}}),
        (OpenAIDialect(thinking_param="openrouter"), "none", {"reasoning": {"enabled": False}}),
        (OpenAIDialect(thinking_param="none"), "high", {}),
    ],
)
def test_thinking_levels(dialect: OpenAIDialect, level: str, expected: dict) -> None:  # type: ignore[type-arg]
    settings = ModelSettings(thinking=level, max_tokens=100)  # type: ignore[arg-type]
    body = build_request(ModelRequest(model="m", messages=[], settings=settings), model="m", dialect=dialect)
    assert {k: body[k] for k in ("reasoning_effort", "reasoning") if k in body} == expected
    assert body[dialect.max_tokens_field] == 100


async def test_request_over_the_wire(server: WireServer) -> None:
    server.queue(Reply(sse(chunk({"content": "ok"}), chunk({}, "stop"))))
    provider = OpenAIProvider(
        "gpt-4.1",
        base_url=server.base_url + "/v1/",
        api_key="sk-test-123456",
        endpoint="openai",
        headers={"X-Title": "t"},
    )
    request = ModelRequest(model="gpt-4.1", messages=TRANSCRIPT)
    assert summarize(await collect(provider.stream(request))).text == "ok"
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test-123456"
    assert sent.headers["x-title"] == "t"
    assert sent.json == json.loads(json.dumps(build_request(request, model="gpt-4.1")))
