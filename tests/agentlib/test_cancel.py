"""Cancellation at any moment: the run ends ``cancelled`` quickly and the transcript stays valid."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from helpers import assert_valid_transcript

from ipyagent import Agent, tool
from ipyagent.testing import ScriptedModel, pause, text, tool_call


async def wait_until(predicate: Any, timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.002)


async def test_cancel_while_streaming_keeps_the_partial_text_and_stays_valid() -> None:
    model = ScriptedModel([[text("word " * 200)], "after cancel"], chunk_size=5, delay=0.005)
    agent = Agent(model=model)
    deltas: list[str] = []
    agent.on("text_delta", lambda e: deltas.append(e.delta))
    run = asyncio.ensure_future(agent.run("talk"))
    await wait_until(lambda: len(deltas) >= 5)
    started = time.monotonic()
    assert agent.cancel()
    result = await run
    assert time.monotonic() - started < 1.0
    assert result.status == "cancelled"
    partial = agent.messages[-1]
    assert partial.role == "assistant"
    assert partial.interrupted
    assert partial.finish_reason == "cancelled"
    assert 0 < len(partial.text) < len("word " * 200)
    # The next run goes on from there.
    assert (await agent.run("go on")).text == "after cancel"
    assert_valid_transcript(agent.messages)


async def test_cancel_while_a_tool_runs_answers_every_call() -> None:
    entered = asyncio.Event()

    @tool(read_only=True)
    async def long_job() -> str:
        """Takes forever."""
        entered.set()
        await asyncio.sleep(60)
        return "never"

    @tool(read_only=True)
    def quick() -> str:
        """Quick."""
        return "quick done"

    model = ScriptedModel([[tool_call("quick"), tool_call("long_job"), tool_call("quick", {})], "next"])
    agent = Agent(model=model, tools=[long_job, quick])
    events: list[Any] = []
    agent.on("*", events.append)
    run = asyncio.ensure_future(agent.run("go"))
    await asyncio.wait_for(entered.wait(), 2)
    started = time.monotonic()
    agent.cancel()
    result = await run
    assert time.monotonic() - started < 1.0
    assert result.status == "cancelled"
    assert events[-1].type == "run_cancelled"
    results = agent.messages[-1].tool_results
    assert len(results) == 3
    assert "Cancelled" in results[1].content
    assert_valid_transcript(agent.messages)


async def test_cancel_from_another_thread() -> None:
    model = ScriptedModel([[text("a"), pause(30)]])
    agent = Agent(model=model)
    run = asyncio.ensure_future(agent.run("go"))
    await wait_until(lambda: len(model.requests) == 1)
    thread = threading.Thread(target=agent.cancel)
    started = time.monotonic()
    thread.start()
    result = await run
    thread.join()
    assert time.monotonic() - started < 1.0
    assert result.status == "cancelled"


async def test_cancel_while_waiting_for_permission() -> None:
    @tool
    def delete_everything() -> str:
        """Dangerous."""
        return "deleted"

    agent = Agent(model=ScriptedModel([tool_call("delete_everything"), "ok"]), tools=[delete_everything])
    asked = asyncio.Event()
    agent.on("permission_required", lambda e: asked.set())
    run = asyncio.ensure_future(agent.run("go"))
    await asyncio.wait_for(asked.wait(), 2)
    agent.cancel()
    result = await run
    assert result.status == "cancelled"
    assert "Cancelled" in agent.messages[-1].tool_results[0].content
    assert_valid_transcript(agent.messages)


async def test_cancel_before_the_run_takes_a_step() -> None:
    model = ScriptedModel(["hi"])
    agent = Agent(model=model)
    types: list[str] = []
    agent.on("*", lambda e: types.append(e.type))
    run = asyncio.ensure_future(agent.run("go"))
    await asyncio.sleep(0)  # run() has started its task, which has not taken a step yet
    assert agent.cancel()
    result = await run
    assert result.status == "cancelled"
    assert types == ["run_started", "run_cancelled"]
    assert model.requests == []
    assert not agent.running


async def test_cancelling_the_caller_stops_the_run_and_propagates() -> None:
    entered = asyncio.Event()

    @tool(read_only=True)
    async def block() -> str:
        """Blocks."""
        entered.set()
        await asyncio.sleep(60)
        return "x"

    agent = Agent(model=ScriptedModel([tool_call("block"), "ok"]), tools=[block])
    outer = asyncio.ensure_future(agent.run("go"))
    await asyncio.wait_for(entered.wait(), 2)
    outer.cancel()
    try:
        await outer
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the caller's cancellation must propagate")
    assert not agent.running
    assert_valid_transcript(agent.messages)


async def test_cancel_with_nothing_running_returns_false() -> None:
    assert Agent(model=ScriptedModel([])).cancel() is False
