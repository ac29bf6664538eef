"""The Ollama native adapter: NDJSON parsing and request building."""

from __future__ import annotations

import pytest
from wire_server import Reply, WireServer, collect
from wire_transcripts import OLLAMA_STREAM, ctx, ndjson, run_parser, summarize

from ipyagent.agentlib.errors import ProtocolError
from ipyagent.agentlib.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ipyagent.agentlib.model import ModelRequest, ModelSettings, ToolSpec
from ipyagent.agentlib.providers.ollama import OllamaProvider, OllamaStreamParser, build_request


def parse(data: bytes) -> list:  # type: ignore[type-arg]
    return run_parser(OllamaStreamParser(ctx("ollama")), data)


def test_reference_stream() -> None:
    s = summarize(parse(OLLAMA_STREAM))
    assert (s.thinking, s.text) == ("Weather? Call the tool.", "The")
    # Each call is whole; "index" restarts on every line, so the keys count calls instead.
    assert s.calls == {
        0: {"id": None, "name": "get_weather", "arguments": '{"city": "Toronto"}'},
        1: {"id": None, "name": "get_time", "arguments": "{}"},
    }
    assert s.finish == "tool_calls"  # Ollama says "stop"
    assert s.usage is not None and (s.usage.input_tokens, s.usage.output_tokens) == (26, 290)


def test_think_tags_in_content_and_length() -> None:
    data = ndjson(
        {"message": {"content": "<think>hm"}, "done": False},
        {"message": {"content": "m</think>Yes"}, "done": False},
        {"message": {"content": ""}, "done": True, "done_reason": "length"},
    )
    s = summarize(parse(data))
    assert (s.thinking, s.text, s.finish) == ("hmm", "Yes", "length")


def test_call_without_name() -> None:
    data = ndjson({"message": {"tool_calls": [{"function": {"arguments": {}}}]}, "done": False})
    with pytest.raises(ProtocolError, match="without a name"):
        parse(data)


def test_request_body() -> None:
    call = ToolCallBlock.from_raw(id="c1", name="get_weather", raw_arguments='{"city": "Toronto"}')
    request = ModelRequest(
        model="qwen3",
        system="sys",
        messages=[
            Message.user("What is this?", ImageBlock(data="AAAA"), ImageBlock(url="https://x/y.png")),
            Message(
                role="assistant",
                content=(ThinkingBlock(text="hmm"), TextBlock(text="Let me see."), call),
                model="ollama/qwen3",
            ),
            Message(
                role="user", content=(ToolResultBlock(tool_call_id="c1", name="get_weather", content="-3C"),)
            ),
        ],
        tools=[ToolSpec(name="get_weather", description="d", parameters={"type": "object"})],
        settings=ModelSettings(thinking="high", max_tokens=50, temperature=0.1),
    )
    body = build_request(request, model="qwen3")
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "What is this?\n\n[image: https://x/y.png]", "images": ["AAAA"]},
        {
            "role": "assistant",
            "content": "Let me see.",
            "thinking": "hmm",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Toronto"}}}],
        },
        {"role": "tool", "tool_name": "get_weather", "content": "-3C"},
    ]
    assert body["think"] is True and body["options"] == {"num_predict": 50, "temperature": 0.1}
    assert body["tools"][0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize(
    ("model", "level", "think"),
    [
        ("qwen3", "none", False),
        ("qwen3", "low", True),
        ("gpt-oss:20b", "medium", "medium"),
        ("gpt-oss", "none", "low"),
    ],
)
def test_think_parameter(model: str, level: str, think: object) -> None:
    settings = ModelSettings(thinking=level)  # type: ignore[arg-type]
    assert (
        build_request(ModelRequest(model=model, messages=[], settings=settings), model=model)["think"]
        == think
    )


async def test_path_and_no_auth_header_without_key(server: WireServer) -> None:
    server.queue(Reply(OLLAMA_STREAM, content_type="application/x-ndjson"))
    provider = OllamaProvider("qwen3", base_url=server.base_url, endpoint="ollama")
    await collect(provider.stream(ModelRequest(model="qwen3", messages=[Message.user("hi")])))
    assert server.requests[0].path == "/api/chat"
    assert "authorization" not in server.requests[0].headers
