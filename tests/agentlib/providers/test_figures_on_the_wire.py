"""A figure a tool made reaches a vision model as an image and other models as its description,
checked in the bodies the loopback server received; a model that rejects the image gets the
request again without it, once, and the user is told."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from wire_server import Reply, WireServer
from wire_transcripts import OPENAI_TOOL_CALL, chunk, sse

from ipyagent import Agent
from ipyagent.agentlib import vision
from ipyagent.agentlib.events import RunWarning
from ipyagent.agentlib.messages import ImageBlock, Message, ToolResultBlock
from ipyagent.agentlib.model import ModelRequest
from ipyagent.agentlib.providers.anthropic import build_request as anthropic_body
from ipyagent.agentlib.providers.ollama import OllamaProvider
from ipyagent.agentlib.providers.openai import OpenAIProvider
from ipyagent.agentlib.tools import ToolOutput, tool

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
DESCRIBED = "(shown to the user: a line chart 'Capitals' with 1 line)"


@tool(read_only=True)
def get_capital(country: str) -> ToolOutput:
    """Plot a capital."""
    return ToolOutput(text=DESCRIBED, images=[ImageBlock(media_type="image/png", data=PNG)])


def sent_images(body: dict[str, Any]) -> list[str]:
    return [
        part["image_url"]["url"]
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


async def run(server: WireServer, model: str) -> tuple[list[dict[str, Any]], list[RunWarning]]:
    provider = OpenAIProvider(
        model, base_url=server.base_url + "/v1/", api_key="sk-test-1", endpoint="openai"
    )
    agent = Agent(model=provider, tools=[get_capital])
    warnings: list[RunWarning] = []
    agent.on(RunWarning, warnings.append)
    result = await agent.run("Plot the capital of the UK.")
    assert result.status == "completed", result.error
    return [r.json for r in server.requests], warnings


@pytest.fixture(autouse=True)
def forget_rejections() -> Any:
    yield
    vision._rejected.clear()


async def test_a_vision_model_gets_the_figure_after_the_tool_result(server: WireServer) -> None:
    server.queue(Reply(OPENAI_TOOL_CALL), Reply(sse(chunk({"content": "London."}), chunk({}, "stop"))))
    bodies, warnings = await run(server, "gpt-4.1")
    messages = bodies[1]["messages"]
    tool_message, images = messages[-2], messages[-1]
    assert tool_message == {"role": "tool", "tool_call_id": "call_ZR5x", "content": DESCRIBED}
    assert images["role"] == "user"
    assert images["content"][0]["text"].startswith("The image from the `get_capital` call above")
    assert sent_images(bodies[1]) == [f"data:image/png;base64,{PNG}"]
    assert warnings == []


async def test_another_model_gets_the_description_only(server: WireServer) -> None:
    server.queue(Reply(OPENAI_TOOL_CALL), Reply(sse(chunk({"content": "London."}), chunk({}, "stop"))))
    bodies, _ = await run(server, "gpt-3.5-turbo")
    assert sent_images(bodies[1]) == []
    assert bodies[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_ZR5x", "content": DESCRIBED}


async def test_a_rejected_image_is_sent_again_as_its_description_once(server: WireServer) -> None:
    refusal = json.dumps(
        {"error": {"message": "Invalid content: image_url is only supported by certain models."}}
    )
    server.queue(
        Reply(OPENAI_TOOL_CALL),
        Reply(refusal.encode(), status=400, content_type="application/json"),
        Reply(sse(chunk({"content": "London."}), chunk({}, "stop"))),
    )
    bodies, warnings = await run(server, "gpt-4o")
    assert [len(sent_images(b)) for b in bodies] == [0, 1, 0]
    assert [w.code for w in warnings] == ["images_rejected"]
    assert not vision.accepts_images("openai/gpt-4o")  # remembered for the model


def test_anthropic_puts_the_figure_inside_the_tool_result() -> None:
    result = ToolResultBlock(
        tool_call_id="t1", name="run_python", content=DESCRIBED, images=(ImageBlock(data=PNG),)
    )
    request = ModelRequest(model="c", messages=[Message(role="user", content=(result,))])
    [message] = anthropic_body(request, model="c")["messages"]
    assert message["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [
                {"type": "text", "text": DESCRIBED},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            ],
            # The last block closes the cached prefix; a tool result with an image may carry it.
            "cache_control": {"type": "ephemeral"},
        }
    ]


async def test_ollama_sends_the_figure_with_the_user_part(server: WireServer) -> None:
    from wire_transcripts import OLLAMA_STREAM

    server.queue(Reply(OLLAMA_STREAM, content_type="application/x-ndjson"))
    result = ToolResultBlock(
        tool_call_id="t1", name="run_python", content=DESCRIBED, images=(ImageBlock(data=PNG),)
    )
    request = ModelRequest(model="llava", messages=[Message(role="user", content=(result,))])
    provider = OllamaProvider("llava", base_url=server.base_url, endpoint="ollama")
    async for _ in provider.stream(request):
        pass
    tool_message, user = server.requests[-1].json["messages"]
    assert tool_message["role"] == "tool" and tool_message["content"] == DESCRIBED
    assert user["images"] == [PNG] and "run_python" in user["content"]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("openai/gpt-4.1-mini", True),
        ("anthropic/claude-sonnet-4-5", True),
        ("ollama/llava:13b", True),
        ("ollama/qwen2.5vl", True),
        ("openai/gpt-3.5-turbo", False),
        ("ollama/qwen3", False),
        ("local/default", False),
    ],
)
def test_known_vision_models(model: str, expected: bool) -> None:
    assert vision.accepts_images(model) is expected


def test_the_config_file_decides_for_other_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[vision]\n"openai/my-finetune" = true\n"gemma3" = false\n')
    monkeypatch.setenv("IPYAGENT_CONFIG", str(config))
    assert vision.accepts_images("openai/my-finetune")
    assert not vision.accepts_images("ollama/gemma3")
