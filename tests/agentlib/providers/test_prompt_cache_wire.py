"""Prompt caching on the wire: Anthropic's cache marks (where, how many, never on thinking, the
TTL), OpenAI's ``prompt_cache_key`` (only where the endpoint accepts it), the usage they report,
and the loop's cache key (one per conversation)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from wire_server import Reply, WireServer, collect
from wire_transcripts import MESSAGE_START, anthropic, chunk, sse

from ipyagent.agentlib import endpoints
from ipyagent.agentlib.agent import Agent
from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.messages import Message, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from ipyagent.agentlib.model import ModelRequest, ModelSettings, PromptCache, ToolSpec, UsageReport
from ipyagent.agentlib.providers.anthropic import MAX_CACHE_MARKS, AnthropicProvider, build_request
from ipyagent.agentlib.providers.openai import build_request as openai_request
from ipyagent.agentlib.providers.scripted import ScriptedModel, tool_call

TOOLS = [
    ToolSpec(name="get_rate", description="A rate.", parameters={"type": "object", "properties": {}}),
    ToolSpec(name="plot", description="A plot.", parameters={"type": "object", "properties": {}}),
]


def turn(i: int, *, thinking: bool = False) -> list[Message]:
    """One tool round of a conversation: the model calls get_rate, the result comes back."""
    content: list[Any] = [ThinkingBlock(text="Hmm", signature=f"sig{i}")] if thinking else []
    content += [
        TextBlock(text=f"Looking {i}."),
        ToolCallBlock(id=f"t{i}", name="get_rate", arguments={}, raw_arguments="{}"),
    ]
    return [
        Message(role="assistant", content=tuple(content), model="anthropic/c"),
        Message(role="user", content=(ToolResultBlock(tool_call_id=f"t{i}", content=f"1.0{i}"),)),
    ]


def conversation(rounds: int, *, thinking: bool = False) -> list[Message]:
    messages = [Message.user("Rates?")]
    for i in range(rounds):
        messages += turn(i, thinking=thinking)
    return messages


def body(messages: list[Message], cache: PromptCache = "5m", *, thinking: bool = False) -> dict[str, Any]:
    settings = ModelSettings(prompt_cache=cache, thinking="low" if thinking else None)
    request = ModelRequest(model="c", system="Be brief.", messages=messages, tools=TOOLS, settings=settings)
    return build_request(request, model="c")


def marked(wire: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every block that carries a cache mark, in wire order: (where, block)."""
    out = [("tool", t) for t in wire.get("tools", []) if "cache_control" in t]
    system = wire.get("system")
    if isinstance(system, list):
        out += [("system", b) for b in system if "cache_control" in b]
    for i, message in enumerate(wire["messages"]):
        out += [(f"message {i}", b) for b in message["content"] if "cache_control" in b]
    return out


def without_marks(value: Any) -> Any:
    text = json.dumps(value)
    return json.loads(text.replace(', "cache_control": {"type": "ephemeral"}', ""))


def test_anthropic_marks_tools_system_the_last_message_and_the_previous_turn() -> None:
    wire = body(conversation(3))
    where = [(w, b.get("type", "tool")) for w, b in marked(wire)]
    last = len(wire["messages"]) - 1
    assert where == [
        ("tool", "tool"),  # the last tool: tools come first in the API's prefix
        ("system", "text"),
        (f"message {last - 2}", "tool_result"),  # where the previous request's last mark stood
        (f"message {last}", "tool_result"),
    ]
    assert wire["tools"][-1]["name"] == "plot" and "cache_control" not in wire["tools"][0]
    assert all(b["cache_control"] == {"type": "ephemeral"} for _, b in marked(wire))


def test_a_new_request_reads_what_the_previous_one_wrote() -> None:
    """The block that closed request N's cached prefix is marked in request N+1 too, and
    everything up to it is the same bytes: the cache written by N is read by N+1."""
    for n in range(6):
        before, after = body(conversation(n)), body(conversation(n + 1))
        index, block = len(before["messages"]) - 1, before["messages"][-1]["content"][-1]
        assert after["messages"][index]["content"][-1] == block  # marked, in the same place
        assert without_marks(after["messages"][: index + 1]) == without_marks(before["messages"])
        assert after["tools"] == before["tools"] and after["system"] == before["system"]


@pytest.mark.parametrize("rounds", [0, 1, 2, 5, 30])
@pytest.mark.parametrize("thinking", [False, True])
def test_at_most_four_marks_and_never_on_thinking(rounds: int, thinking: bool) -> None:
    messages = conversation(rounds, thinking=thinking)
    # The loop sends a paused reply back as the last message (pause_turn): it may end in thinking.
    messages.append(
        Message(
            role="assistant",
            content=(TextBlock(text="Going on."), ThinkingBlock(text="more", signature="s")),
            model="anthropic/c",
        )
    )
    wire = body(messages, thinking=thinking)
    blocks = marked(wire)
    assert 1 <= len(blocks) <= MAX_CACHE_MARKS
    assert not [b for _, b in blocks if b.get("type") in ("thinking", "redacted_thinking")]
    assert blocks[-1][1] == {"type": "text", "text": "Going on.", "cache_control": {"type": "ephemeral"}}


def test_an_assistant_message_of_thinking_alone_gets_no_mark() -> None:
    messages = [
        Message.user("Hi"),
        Message(role="assistant", content=(ThinkingBlock(text="x", signature="s"),), model="anthropic/c"),
    ]
    wire = body(messages)
    assert [w for w, _ in marked(wire)] == ["tool", "system", "message 0"]


def test_one_hour_ttl_and_off() -> None:
    hour = marked(body(conversation(2), "1h"))
    assert len(hour) == 4 and all(b["cache_control"] == {"type": "ephemeral", "ttl": "1h"} for _, b in hour)
    off = body(conversation(2), "off")
    assert "cache_control" not in json.dumps(off) and off["system"] == "Be brief."


def test_no_system_no_tools_still_marks_the_history() -> None:
    request = ModelRequest(
        model="c",
        messages=[
            Message.user("a"),
            Message(role="assistant", content=(TextBlock(text="b"),)),
            Message.user("c"),
        ],
    )
    wire = build_request(request, model="c")
    assert "system" not in wire and "tools" not in wire
    assert [w for w, _ in marked(wire)] == ["message 0", "message 2"]


async def test_anthropic_provider_sends_marks_and_reports_cache_usage(server: WireServer) -> None:
    usage = {
        "input_tokens": 12,
        "cache_read_input_tokens": 3000,
        "cache_creation_input_tokens": 400,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 400},
    }
    start = {**MESSAGE_START, "message": {**MESSAGE_START["message"], "usage": usage}}
    server.queue(
        Reply(
            anthropic(
                start,
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
                {"type": "content_block_stop", "index": 0},
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": 5},
                },
                {"type": "message_stop"},
            ),
            pieces=4,
        )
    )
    provider = AnthropicProvider(
        "c", base_url=server.base_url, api_key="sk-ant-test-1234", endpoint="anthropic"
    )
    settings = ModelSettings(prompt_cache="1h")
    request = ModelRequest(model="c", system="S", messages=conversation(2), tools=TOOLS, settings=settings)
    events = await collect(provider.stream(request))
    sent = server.requests[0].json
    assert len(marked(sent)) == 4 and sent["system"][0]["cache_control"]["ttl"] == "1h"
    assert server.requests[0].headers["anthropic-beta"] == "extended-cache-ttl-2025-04-11"
    (report,) = [e for e in events if isinstance(e, UsageReport)]
    got = report.usage
    assert (got.input_tokens, got.cache_read_tokens, got.cache_write_tokens) == (412, 3000, 400)
    assert got.cache_write_1h_tokens == 400


# -- OpenAI-compatible -----------------------------------------------------------------------------


def openai_stream() -> bytes:
    usage = {"prompt_tokens": 2000, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 1536}}
    return sse(chunk({"content": "ok"}), chunk({}, "stop"), {"choices": [], "usage": usage})


async def send(model_id: str, server: WireServer, cache: PromptCache = "5m") -> dict[str, Any]:
    server.queue(Reply(openai_stream()))
    provider = endpoints.provider_for(model_id)
    request = ModelRequest(
        model=model_id.split("/", 1)[1],
        messages=[Message.user("hi")],
        settings=ModelSettings(prompt_cache=cache),
        cache_key="conv-1",
    )
    events = await collect(provider.stream(request))
    (report,) = [e for e in events if isinstance(e, UsageReport)]
    assert (report.usage.input_tokens, report.usage.cache_read_tokens) == (464, 1536)
    body: dict[str, Any] = server.requests[-1].json
    return body


def test_prompt_cache_key_goes_to_openai_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert endpoints.get_endpoint("openai").takes_prompt_cache_key()
    # OPENAI_BASE_URL often points the openai endpoint at another server: not sent there.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    assert not endpoints.get_endpoint("openai").takes_prompt_cache_key()
    for name in ("openrouter", "groq", "together", "deepseek"):
        assert not endpoints.get_endpoint(name).takes_prompt_cache_key(), name


async def test_prompt_cache_key_on_the_wire_only_where_accepted(server: WireServer) -> None:
    # Another OpenAI-compatible server may reject a field it does not know: not sent by default.
    endpoints.register_endpoint("vllm", base_url=server.base_url)
    assert "prompt_cache_key" not in await send("vllm/qwen", server)
    endpoints.register_endpoint("vllm", base_url=server.base_url, prompt_cache_key=True)
    assert (await send("vllm/qwen", server))["prompt_cache_key"] == "conv-1"
    assert "prompt_cache_key" not in await send("vllm/qwen", server, "off")


async def test_prompt_cache_key_from_the_config_file(
    server: WireServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "cache-config.toml"
    config.write_text(
        f'[endpoints.lab]\nkind = "openai"\nbase_url = "{server.base_url}"\nprompt_cache_key = true\n'
        f'[endpoints.openai]\nbase_url = "{server.base_url}"\nprompt_cache_key = true\n'
    )
    monkeypatch.setenv("IPYAGENT_CONFIG", str(config))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-1234")
    assert (await send("lab/m", server))["prompt_cache_key"] == "conv-1"
    assert (await send("openai/gpt-4.1", server))["prompt_cache_key"] == "conv-1"
    config.write_text(f'[endpoints.openai]\nbase_url = "{server.base_url}"\nprompt_cache_key = false\n')
    assert "prompt_cache_key" not in await send("openai/gpt-4.1", server)
    config.write_text('[endpoints.lab]\nkind = "openai"\nprompt_cache_key = "yes"\n')
    with pytest.raises(UserError, match="prompt_cache_key must be true or false"):
        endpoints.get_endpoint("lab")


def test_openai_prefix_is_the_same_bytes_turn_after_turn() -> None:
    """OpenAI caches a byte-identical prefix: request N's messages open request N+1's."""
    for n in range(5):
        before = openai_request(
            ModelRequest(model="m", system="S", messages=conversation(n), tools=TOOLS), model="m"
        )
        after = openai_request(
            ModelRequest(model="m", system="S", messages=conversation(n + 1), tools=TOOLS), model="m"
        )
        assert after["messages"][: len(before["messages"])] == before["messages"]
        assert after["tools"] == before["tools"]


# -- the loop ----------------------------------------------------------------------------------------


def test_the_loop_sends_one_cache_key_per_conversation(tmp_path: Any) -> None:
    def get_rate() -> str:
        """A rate."""
        return "1.08"

    model = ScriptedModel([[tool_call("get_rate")], "1.08.", "Again 1.08."])
    agent = Agent(model=model, tools=[get_rate], session=tmp_path / "a.agent.jsonl", prompt_cache="1h")
    agent.run_sync("rate?")
    agent.run_sync("again?")
    agent.close()
    keys = {r.cache_key for r in model.requests}
    assert len(model.requests) == 3 and len(keys) == 1 and None not in keys
    assert {r.settings.prompt_cache for r in model.requests} == {"1h"}
    other = ScriptedModel(["hi"])
    Agent(model=other).run_sync("hi")
    assert other.requests[0].cache_key not in keys  # another conversation, another key
    # A resumed session keeps its key: the provider's cache still holds its prefix.
    again = ScriptedModel(["hi"])
    Agent(model=again, session=tmp_path / "a.agent.jsonl").run_sync("hi")
    assert again.requests[0].cache_key in keys


def test_prompt_cache_option_is_checked() -> None:
    with pytest.raises(UserError, match="prompt_cache"):
        Agent(model=ScriptedModel([]), prompt_cache="10m")  # type: ignore[arg-type]
