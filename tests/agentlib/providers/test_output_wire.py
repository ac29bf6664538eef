"""A typed answer on the wire: the request's output schema in each API's own form, checked in
the bodies the loopback server received, and the answer read back from each API's stream."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel
from wire_server import Reply, WireServer, collect
from wire_transcripts import MESSAGE_START, OLLAMA_STREAM, anthropic, chunk, ndjson, sse

from ipyagent import Agent
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.model import (
    ModelRequest,
    ModelSettings,
    TextChunk,
    ToolCallChunk,
    ToolChoice,
    ToolSpec,
)
from ipyagent.agentlib.output import output_spec
from ipyagent.agentlib.providers.anthropic import AnthropicProvider
from ipyagent.agentlib.providers.ollama import OllamaProvider
from ipyagent.agentlib.providers.openai import OpenAIProvider


class Verdict(BaseModel):
    """Whether a review is positive."""

    label: Literal["positive", "negative"]
    confidence: float


SPEC = output_spec(Verdict)
assert SPEC is not None
SCHEMA = SPEC.schema
LOOKUP = ToolSpec(name="lookup", description="Look up.", parameters={"type": "object", "properties": {}})


def request(
    *, tools: list[ToolSpec] | None = None, choice: ToolChoice = "auto", thinking: bool = False
) -> ModelRequest:
    return ModelRequest(
        model="m",
        messages=[Message.user("Great film!")],
        tools=tools or [],
        tool_choice=choice,
        output_schema=SCHEMA,
        settings=ModelSettings(thinking="low" if thinking else None),
    )


def openai(server: WireServer) -> OpenAIProvider:
    return OpenAIProvider("m", base_url=server.base_url + "/v1/", api_key="sk-test-1", endpoint="openai")


def claude(server: WireServer) -> AnthropicProvider:
    return AnthropicProvider("m", base_url=server.base_url, api_key="sk-ant-1", endpoint="anthropic")


# -- OpenAI-compatible ---------------------------------------------------------------------------


async def test_openai_sends_a_json_schema_response_format(server: WireServer) -> None:
    server.queue(
        Reply(
            sse(chunk({"content": '{"label":"positive",'}), chunk({"content": '"confidence":0.9}'}, "stop"))
        )
    )
    events = await collect(openai(server).stream(request()))
    body = server.requests[-1].json
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "final_result",
            "schema": SCHEMA.json_schema,
            "strict": False,
            "description": "Whether a review is positive.",
        },
    }
    assert (
        "".join(e.text for e in events if isinstance(e, TextChunk)) == '{"label":"positive","confidence":0.9}'
    )


async def test_openai_sends_tools_and_the_response_format_together(server: WireServer) -> None:
    server.queue(Reply(sse(chunk({"content": "{}"}, "stop"))))
    await collect(openai(server).stream(request(tools=[LOOKUP])))
    body = server.requests[-1].json
    assert [t["function"]["name"] for t in body["tools"]] == ["lookup"]
    assert body["response_format"]["type"] == "json_schema"


async def test_openai_without_an_output_schema_sends_no_response_format(server: WireServer) -> None:
    server.queue(Reply(sse(chunk({"content": "hi"}, "stop"))))
    await collect(openai(server).stream(request().model_copy(update={"output_schema": None})))
    assert "response_format" not in server.requests[-1].json


async def test_a_typed_run_over_the_openai_wire(server: WireServer) -> None:
    server.queue(Reply(sse(chunk({"content": '{"label":"negative","confidence":0.2}'}, "stop"))))
    result = await Agent(model=openai(server)).run("Dull film.", output_type=Verdict)
    assert result.output == Verdict(label="negative", confidence=0.2)
    assert server.requests[-1].json["response_format"]["json_schema"]["schema"] == SCHEMA.json_schema


# -- Anthropic: an answer tool -------------------------------------------------------------------


def answer_call(name: str = "final_result", *, index: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": "toolu_9", "name": name, "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": '{"label": "posi'},
        },
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": 'tive", "confidence": 0.8}'},
        },
        {"type": "content_block_stop", "index": index},
    ]


def answer_stream(name: str = "final_result") -> bytes:
    return anthropic(
        MESSAGE_START,
        *answer_call(name),
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    )


async def test_anthropic_forces_an_answer_tool_and_reads_its_call_as_the_answer(server: WireServer) -> None:
    server.queue(Reply(answer_stream()))
    events = await collect(claude(server).stream(request()))
    body = server.requests[-1].json
    assert body["tools"] == [
        {
            "name": "final_result",
            "description": "Whether a review is positive.",
            "input_schema": SCHEMA.json_schema,
            "cache_control": {"type": "ephemeral"},  # the last tool closes the cached prefix
        }
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "final_result"}
    # The call comes back as the answer's text, and the reply ends as an answer does.
    assert not any(isinstance(e, ToolCallChunk) for e in events)
    assert (
        "".join(e.text for e in events if isinstance(e, TextChunk))
        == '{"label": "positive", "confidence": 0.8}'
    )
    assert events[-1].finish_reason == "stop"


async def test_anthropic_with_other_tools_lets_the_reply_call_any_of_them(server: WireServer) -> None:
    server.queue(Reply(answer_stream()))
    await collect(claude(server).stream(request(tools=[LOOKUP])))
    body = server.requests[-1].json
    assert [t["name"] for t in body["tools"]] == ["lookup", "final_result"]
    assert body["tool_choice"] == {"type": "any"}


async def test_anthropic_a_real_call_beside_the_answer_stays_a_call(server: WireServer) -> None:
    stream = anthropic(
        MESSAGE_START,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 4}},
        {"type": "message_stop"},
    )
    server.queue(Reply(stream))
    events = await collect(claude(server).stream(request(tools=[LOOKUP])))
    assert [e.name for e in events if isinstance(e, ToolCallChunk) and e.name] == ["lookup"]
    assert events[-1].finish_reason == "tool_calls"


async def test_anthropic_none_forces_the_answer_and_required_asks_for_a_call(server: WireServer) -> None:
    server.queue(Reply(answer_stream()))
    await collect(claude(server).stream(request(tools=[LOOKUP], choice="none")))
    assert server.requests[-1].json["tool_choice"] == {"type": "tool", "name": "final_result"}
    server.queue(Reply(answer_stream("lookup")))
    await collect(claude(server).stream(request(tools=[LOOKUP], choice="required")))
    body = server.requests[-1].json
    assert [t["name"] for t in body["tools"]] == ["lookup"]
    assert body["tool_choice"] == {"type": "any"}


async def test_anthropic_with_thinking_offers_the_answer_tool_without_forcing_it(server: WireServer) -> None:
    server.queue(Reply(answer_stream()))
    await collect(claude(server).stream(request(thinking=True)))
    body = server.requests[-1].json
    assert [t["name"] for t in body["tools"]] == ["final_result"]
    assert "tool_choice" not in body
    server.queue(Reply(answer_stream()))
    await collect(claude(server).stream(request(tools=[LOOKUP], choice="none", thinking=True)))
    body = server.requests[-1].json
    assert [t["name"] for t in body["tools"]] == ["final_result"]  # "none": no other tool to call
    assert "tool_choice" not in body


async def test_a_typed_run_over_the_anthropic_wire_continues_with_the_answer_as_text(
    server: WireServer,
) -> None:
    invalid = anthropic(
        MESSAGE_START,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "final_result",
                "input": {"label": "meh"},
            },
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 4}},
        {"type": "message_stop"},
    )
    server.queue(Reply(invalid), Reply(answer_stream()))
    result = await Agent(model=claude(server)).run("Great film!", output_type=Verdict)
    assert result.output == Verdict(label="positive", confidence=0.8)
    retry = server.requests[-1].json["messages"]
    # The invalid answer went back as the assistant's text, followed by the problems.
    assert retry[1] == {"role": "assistant", "content": [{"type": "text", "text": '{"label": "meh"}'}]}
    assert "not a valid Verdict" in json.dumps(retry[2])


# -- Ollama --------------------------------------------------------------------------------------


async def test_ollama_sends_the_schema_as_format(server: WireServer) -> None:
    server.queue(Reply(OLLAMA_STREAM, content_type="application/x-ndjson"))
    await collect(OllamaProvider("m", base_url=server.base_url, endpoint="ollama").stream(request()))
    assert server.requests[-1].json["format"] == SCHEMA.json_schema


async def test_ollama_with_tools_sends_no_format_so_the_model_can_still_call_them(server: WireServer) -> None:
    server.queue(Reply(OLLAMA_STREAM, content_type="application/x-ndjson"))
    await collect(
        OllamaProvider("m", base_url=server.base_url, endpoint="ollama").stream(request(tools=[LOOKUP]))
    )
    body = server.requests[-1].json
    assert [t["function"]["name"] for t in body["tools"]] == ["lookup"]
    assert "format" not in body
    assert "only a JSON object" not in body["messages"][0]["content"]  # the adapter adds no prompt


async def test_a_typed_run_over_the_ollama_wire(server: WireServer) -> None:
    answer = ndjson(
        {"message": {"role": "assistant", "content": '{"label":"positive","confidence":1}'}, "done": False},
        {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"},
    )
    server.queue(Reply(answer, content_type="application/x-ndjson"))
    result = await Agent(model=OllamaProvider("m", base_url=server.base_url, endpoint="ollama")).run(
        "Great!", output_type=Verdict
    )
    assert result.output == Verdict(label="positive", confidence=1.0)
    body = server.requests[-1].json
    assert body["format"] == SCHEMA.json_schema
    assert "only a JSON object" in body["messages"][0]["content"]  # the loop's instruction
