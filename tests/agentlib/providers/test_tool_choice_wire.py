"""A request's tool_choice on the wire: what each adapter sends for auto, none, required and
tool names, checked in the bodies the loopback server received."""

from __future__ import annotations

from typing import Any

import pytest
from wire_server import Reply, WireServer, collect
from wire_transcripts import ANTHROPIC_STREAM, OLLAMA_STREAM, chunk, sse

from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.model import ModelRequest, ModelSettings, ToolChoice, ToolSpec
from ipyagent.agentlib.providers.anthropic import AnthropicProvider
from ipyagent.agentlib.providers.ollama import OllamaProvider
from ipyagent.agentlib.providers.openai import OpenAIProvider

TOOLS = [
    ToolSpec(name=name, description=f"{name}.", parameters={"type": "object", "properties": {}})
    for name in ("get_weather", "get_time", "run_python")
]
ALL = ["get_weather", "get_time", "run_python"]


def request(choice: ToolChoice, *, thinking: bool = False) -> ModelRequest:
    settings = ModelSettings(thinking="low" if thinking else None)
    return ModelRequest(
        model="m", messages=[Message.user("hi")], tools=TOOLS, tool_choice=choice, settings=settings
    )


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] if "function" in t else t["name"] for t in body.get("tools", [])]


async def sent_openai(server: WireServer, choice: ToolChoice) -> dict[str, Any]:
    server.queue(Reply(sse(chunk({"content": "ok"}), chunk({}, "stop"))))
    provider = OpenAIProvider("m", base_url=server.base_url + "/v1/", api_key="sk-test-1", endpoint="openai")
    await collect(provider.stream(request(choice)))
    body: dict[str, Any] = server.requests[-1].json
    return body


async def sent_anthropic(server: WireServer, choice: ToolChoice, *, thinking: bool = False) -> dict[str, Any]:
    server.queue(Reply(ANTHROPIC_STREAM))
    provider = AnthropicProvider("m", base_url=server.base_url, api_key="sk-ant-1", endpoint="anthropic")
    await collect(provider.stream(request(choice, thinking=thinking)))
    body: dict[str, Any] = server.requests[-1].json
    return body


async def sent_ollama(server: WireServer, choice: ToolChoice) -> dict[str, Any]:
    server.queue(Reply(OLLAMA_STREAM, content_type="application/x-ndjson"))
    provider = OllamaProvider("m", base_url=server.base_url, endpoint="ollama")
    await collect(provider.stream(request(choice)))
    body: dict[str, Any] = server.requests[-1].json
    return body


@pytest.mark.parametrize(
    ("choice", "tools", "wire"),
    [
        ("auto", ALL, None),  # not sent: the default whenever tools are given
        ("none", ALL, "none"),
        ("required", ALL, "required"),
        (("get_time",), ALL, {"type": "function", "function": {"name": "get_time"}}),
        (("get_time", "run_python"), ["get_time", "run_python"], "required"),
    ],
)
async def test_openai(server: WireServer, choice: ToolChoice, tools: list[str], wire: Any) -> None:
    body = await sent_openai(server, choice)
    assert tool_names(body) == tools
    assert body.get("tool_choice") == wire


@pytest.mark.parametrize(
    ("choice", "tools", "wire"),
    [
        ("auto", ALL, None),
        ("none", ALL, {"type": "none"}),
        ("required", ALL, {"type": "any"}),
        (("get_time",), ALL, {"type": "tool", "name": "get_time"}),
        (("get_time", "run_python"), ["get_time", "run_python"], {"type": "any"}),
    ],
)
async def test_anthropic(server: WireServer, choice: ToolChoice, tools: list[str], wire: Any) -> None:
    body = await sent_anthropic(server, choice)
    assert tool_names(body) == tools
    assert body.get("tool_choice") == wire


@pytest.mark.parametrize(
    ("choice", "tools", "wire"),
    [
        ("none", ALL, {"type": "none"}),
        ("required", ALL, None),  # the API rejects a forced call with thinking on
        (("get_time",), ["get_time"], None),  # the named tools are all it can still call
        (("get_time", "run_python"), ["get_time", "run_python"], None),
    ],
)
async def test_anthropic_with_thinking_cannot_force_a_call(
    server: WireServer, choice: ToolChoice, tools: list[str], wire: Any
) -> None:
    body = await sent_anthropic(server, choice, thinking=True)
    assert body["thinking"]["type"] == "enabled"
    assert tool_names(body) == tools
    assert body.get("tool_choice") == wire


@pytest.mark.parametrize(
    ("choice", "tools"),
    [
        ("auto", ALL),
        ("none", []),  # /api/chat has no tool_choice: no tools, no calls
        ("required", ALL),  # cannot be enforced: the model may still answer in text
        (("get_time",), ["get_time"]),
        (("get_time", "run_python"), ["get_time", "run_python"]),
    ],
)
async def test_ollama(server: WireServer, choice: ToolChoice, tools: list[str]) -> None:
    body = await sent_ollama(server, choice)
    assert tool_names(body) == tools
    assert "tool_choice" not in body
