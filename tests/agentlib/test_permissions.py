"""Read-only tools run; tools that change things ask, and a run with nobody to ask denies."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from ipyagent import Agent, RunContext, tool
from ipyagent.agentlib.events import PermissionRequired
from ipyagent.testing import ScriptedModel, tool_call

written: list[str] = []


@tool
def write_note(text: str) -> str:
    """Write a note to disk."""
    written.append(text)
    return f"wrote {text!r}"


@tool(read_only=True)
def read_notes() -> str:
    """Read the notes."""
    return ", ".join(written)


def setup_function() -> None:
    written.clear()


def answering(agent: Agent, *decisions: str) -> list[PermissionRequired]:
    """Answer permission prompts with ``decisions`` in order, as a widget would."""
    asked: list[PermissionRequired] = []
    queue = list(decisions)

    def on_permission(event: PermissionRequired) -> None:
        asked.append(event)
        agent.resolve_permission(event.call_id, queue.pop(0))  # type: ignore[arg-type]

    agent.on(PermissionRequired, on_permission)
    return asked


async def test_read_only_tools_run_without_asking() -> None:
    agent = Agent(model=ScriptedModel([tool_call("read_notes"), "none"]), tools=[read_notes])
    asked = answering(agent)
    result = await agent.run("read")
    assert asked == []
    assert not result.messages[2].tool_results[0].is_error


async def test_allow_runs_the_tool_and_deny_tells_the_model_the_user_declined() -> None:
    model = ScriptedModel(
        [[tool_call("write_note", {"text": "a"})], [tool_call("write_note", {"text": "b"})], "ok"]
    )
    agent = Agent(model=model, tools=[write_note])
    asked = answering(agent, "allow", "deny")
    result = await agent.run("write two notes")
    assert [e.arguments for e in asked] == [{"text": "a"}, {"text": "b"}]
    assert asked[0].description == "Write a note to disk."
    assert written == ["a"]
    denied = result.messages[4].tool_results[0]
    assert denied.is_error
    assert "The user declined" in denied.content


async def test_always_stops_asking_for_that_tool() -> None:
    calls = [tool_call("write_note", {"text": t}) for t in "xyz"]
    agent = Agent(model=ScriptedModel([[calls[0]], [calls[1]], [calls[2]], "ok"]), tools=[write_note])
    asked = answering(agent, "always")
    await agent.run("go")
    assert len(asked) == 1
    assert written == ["x", "y", "z"]


async def test_a_headless_run_denies_rather_than_hangs() -> None:
    agent = Agent(model=ScriptedModel([tool_call("write_note", {"text": "a"}), "ok"]), tools=[write_note])
    result = await asyncio.wait_for(agent.run("go"), 5)
    block = result.messages[2].tool_results[0]
    assert block.is_error
    assert "nobody can answer" in block.content
    assert "auto_approve=True" in block.content
    assert written == []


async def test_auto_approve_runs_mutating_tools() -> None:
    agent = Agent(
        model=ScriptedModel([tool_call("write_note", {"text": "a"}), "ok"]),
        tools=[write_note],
        auto_approve=True,
    )
    asked = answering(agent)
    await agent.run("go")
    assert asked == []
    assert written == ["a"]


async def test_can_write_false_refuses_every_mutating_tool_even_with_auto_approve() -> None:
    model = ScriptedModel([[tool_call("write_note", {"text": "a"}), tool_call("read_notes")], "ok"])
    agent = Agent(model=model, tools=[write_note, read_notes], can_write=False, auto_approve=True)
    result = await agent.run("go")
    refused, read = result.messages[2].tool_results
    assert refused.is_error
    assert "can_write=False" in refused.content
    assert not read.is_error
    assert written == []


async def test_denials_do_not_count_as_tool_failures() -> None:
    turns: list[Any] = [tool_call("write_note", {"text": str(i)}) for i in range(6)]
    agent = Agent(model=ScriptedModel([*turns, "fine"]), tools=[write_note])
    answering(agent, *["deny"] * 6)
    result = await agent.run("go")
    assert result.status == "completed"


async def test_a_stream_consumer_can_answer() -> None:
    agent = Agent(model=ScriptedModel([tool_call("write_note", {"text": "s"}), "ok"]), tools=[write_note])
    types = []
    async for event in agent.stream("go"):
        types.append(event.type)
        if isinstance(event, PermissionRequired):
            agent.resolve_permission(event.call_id, "allow")
    assert written == ["s"]
    assert "permission_resolved" in types


async def test_permission_answered_from_another_thread() -> None:
    agent = Agent(model=ScriptedModel([tool_call("write_note", {"text": "t"}), "ok"]), tools=[write_note])

    def on_permission(event: PermissionRequired) -> None:
        # A widget's comm handler may run on another thread: answer from one.
        threading.Timer(0.01, agent.resolve_permission, (event.call_id, "allow")).start()

    agent.on(PermissionRequired, on_permission)
    await asyncio.wait_for(agent.run("go"), 5)
    assert written == ["t"]


async def test_resolving_an_unknown_call_returns_false() -> None:
    assert Agent(model=ScriptedModel([])).resolve_permission("call_nope", "allow") is False


async def test_ask_user_through_the_run_context() -> None:
    @tool(read_only=True)
    async def confirm_units(ctx: RunContext) -> str:
        """Ask which units to use."""
        answer = await ctx.ask_user("Metric or imperial?", ["metric", "imperial"])
        return f"units: {answer}"

    model = ScriptedModel([tool_call("confirm_units"), "ok"])
    agent = Agent(model=model, tools=[confirm_units])
    agent.on("ask_user_required", lambda e: agent.answer(e.question_id, e.choices[0]))
    result = await agent.run("go")
    assert result.messages[2].tool_results[0].content == "units: metric"
    # Headless, nobody answers: the tool gets None rather than hanging.
    headless = Agent(model=ScriptedModel([tool_call("confirm_units"), "ok"]), tools=[confirm_units])
    result = await asyncio.wait_for(headless.run("go"), 5)
    assert result.messages[2].tool_results[0].content == "units: None"


async def test_a_catch_all_listener_does_not_count_as_someone_who_answers() -> None:
    agent = Agent(model=ScriptedModel([tool_call("write_note", {"text": "a"}), "ok"]), tools=[write_note])
    seen: list[Any] = []
    agent.on("*", seen.append)  # a logger or a renderer: it sees everything but never answers
    result = await asyncio.wait_for(agent.run("go"), 5)
    assert "nobody can answer" in result.messages[2].tool_results[0].content
    assert any(e.type == "permission_resolved" for e in seen)


async def test_a_denial_can_say_why() -> None:
    agent = Agent(model=ScriptedModel([tool_call("write_note", {"text": "a"}), "ok"]), tools=[write_note])
    agent.on(
        PermissionRequired,
        lambda e: agent.resolve_permission(e.call_id, "deny", reason="the notebook is read-only today"),
    )
    result = await agent.run("go")
    assert result.messages[2].tool_results[0].content == (
        "Denied: `write_note` was not run: the notebook is read-only today."
    )
    assert written == []
