"""Listening to a run: agent.on(...) and agent.stream(...)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ipyagent import Agent, UserError, tool
from ipyagent.agentlib.events import EVENT_ADAPTER, TextDelta
from ipyagent.testing import ScriptedModel, text, thinking, tool_call


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


def scripted() -> ScriptedModel:
    return ScriptedModel([[thinking("hmm"), text("Let me look."), tool_call("lookup", {"key": "a"})], "A."])


async def test_the_event_sequence_of_a_run() -> None:
    agent = Agent(model=scripted(), tools=[lookup])
    types = [e.type async for e in agent.stream("go")]
    compact = [t for i, t in enumerate(types) if i == 0 or t != types[i - 1]]  # fold repeated deltas
    assert compact == [
        "run_started",
        "message_committed",
        "request_started",
        "thinking_start",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_end",
        "tool_call_start",
        "tool_call_delta",
        "tool_call_end",
        "usage_updated",
        "request_done",
        "message_committed",
        "tool_executing",
        "tool_result",
        "message_committed",
        "request_started",
        "text_start",
        "text_delta",
        "text_end",
        "usage_updated",
        "request_done",
        "message_committed",
        "run_finished",
    ]


async def test_streamed_events_serialize_to_json_and_back() -> None:
    agent = Agent(model=scripted(), tools=[lookup])
    async for event in agent.stream("go"):
        assert EVENT_ADAPTER.validate_json(EVENT_ADAPTER.dump_json(event)) == event


async def test_on_by_name_or_class_and_remove() -> None:
    agent = Agent(model=ScriptedModel(["one two three", "four"]))
    by_name: list[str] = []
    by_class: list[str] = []
    sub = agent.on("text_delta", lambda e: by_name.append(e.delta))
    agent.on(TextDelta, lambda e: by_class.append(e.delta))
    await agent.run("a")
    assert "".join(by_name) == "one two three"
    assert by_name == by_class
    sub.remove()
    await agent.run("b")
    assert "".join(by_name) == "one two three"
    assert "".join(by_class) == "one two threefour"


async def test_async_listeners_and_broken_listeners_do_not_break_the_run() -> None:
    agent = Agent(model=ScriptedModel(["fine"]))
    seen: list[str] = []

    async def slow_listener(event: Any) -> None:
        await asyncio.sleep(0)
        seen.append(event.type)

    def broken_listener(event: Any) -> None:
        raise RuntimeError("bad widget")

    agent.on("run_finished", slow_listener)
    agent.on("*", broken_listener)
    result = await agent.run("go")
    await asyncio.sleep(0.01)
    assert result.text == "fine"
    assert seen == ["run_finished"]


def test_unknown_event_names_are_a_user_error() -> None:
    with pytest.raises(UserError, match="text_delta"):
        Agent().on("text-delta", print)


async def test_leaving_a_stream_early_cancels_the_run() -> None:
    agent = Agent(model=ScriptedModel([[text("x" * 400)]], chunk_size=1, delay=0.001))
    events = agent.stream("go")
    async for event in events:
        if event.type == "text_delta":
            break
    await events.aclose()  # what `async with aclosing(...)` or garbage collection does
    assert not agent.running
    assert agent.messages[-1].interrupted


async def test_a_stream_raises_user_errors_before_the_run() -> None:
    with pytest.raises(UserError, match="Unknown endpoint"):
        async for _ in Agent(model="nowhere/model").stream("go"):
            pass


async def test_the_previous_releases_names_still_work_with_a_warning() -> None:
    from ipyagent.agentlib import events

    with pytest.warns(DeprecationWarning, match="use RunWarning"):
        assert events.Warning is events.RunWarning  # type: ignore[attr-defined]
    agent = Agent(model=scripted(), tools=[lookup])
    seen: list[Any] = []
    with pytest.warns(DeprecationWarning, match="'usage' is now 'usage_updated'"):
        agent.on("usage", seen.append)
    await agent.run("go")
    assert [e.type for e in seen] == ["usage_updated", "usage_updated"]
