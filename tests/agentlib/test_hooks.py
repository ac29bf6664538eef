"""Hooks: before-hooks fail closed, after-hooks fail open."""

from __future__ import annotations

from typing import Any

from ipyagent import Agent, BlockToolCall, Hooks, ToolCallInfo, tool
from ipyagent.agentlib.model import ModelRequest
from ipyagent.testing import ScriptedModel, tool_call

ran: list[int] = []


@tool(read_only=True)
def square(n: int) -> int:
    """Square a number."""
    ran.append(n)
    return n * n


def setup_function() -> None:
    ran.clear()


def agent_with(hooks: Hooks, *turns: Any) -> Agent:
    return Agent(
        model=ScriptedModel(list(turns) or [tool_call("square", {"n": 3}), "ok"]), tools=[square], hooks=hooks
    )


async def test_a_before_tool_hook_can_block_with_a_reason_the_model_sees() -> None:
    hooks = Hooks()

    @hooks.before_tool_call
    def no_big_numbers(call: ToolCallInfo) -> None:
        if call.arguments["n"] > 2:
            raise BlockToolCall("numbers above 2 are not allowed here")

    result = await agent_with(hooks).run("go")
    block = result.messages[2].tool_results[0]
    assert block.is_error
    assert block.content == "Blocked: numbers above 2 are not allowed here"
    assert ran == []


async def test_a_before_tool_hook_can_rewrite_arguments() -> None:
    hooks = Hooks()
    hooks.before_tool_call(lambda call: {"n": call.arguments["n"] + 1})
    result = await agent_with(hooks).run("go")
    assert ran == [4]
    assert result.messages[2].tool_results[0].content == "16"


async def test_rewritten_arguments_are_validated() -> None:
    hooks = Hooks()
    hooks.before_tool_call(lambda call: {"n": "many"})
    result = await agent_with(hooks).run("go")
    assert result.messages[2].tool_results[0].is_error
    assert ran == []


async def test_a_before_tool_hook_that_raises_blocks_the_call() -> None:
    hooks = Hooks()

    async def broken(call: ToolCallInfo) -> None:
        raise RuntimeError("policy server down")

    hooks.before_tool_call(broken)
    result = await agent_with(hooks).run("go")
    block = result.messages[2].tool_results[0]
    assert block.is_error
    assert "Blocked by hook" in block.content
    assert "policy server down" in block.content
    assert ran == []


async def test_an_after_tool_hook_that_raises_is_ignored_with_a_warning() -> None:
    hooks = Hooks()
    seen: list[Any] = []

    @hooks.after_tool_call
    def observe(call: ToolCallInfo, result: Any) -> None:
        seen.append((call.name, result.content))
        raise RuntimeError("logging backend down")

    agent = agent_with(hooks)
    warnings: list[Any] = []
    agent.on("run_warning", warnings.append)
    result = await agent.run("go")
    assert result.status == "completed"
    assert seen == [("square", "9")]
    assert any("logging backend down" in w.message for w in warnings)


async def test_a_before_model_hook_can_replace_the_request() -> None:
    hooks = Hooks()
    hooks.before_model_call(lambda request: request.model_copy(update={"system": "Be terse."}))
    agent = agent_with(hooks, "ok")
    await agent.run("hi")
    model = agent.model
    assert isinstance(model, ScriptedModel)
    assert model.requests[0].system == "Be terse."


async def test_a_before_model_hook_that_raises_fails_the_run() -> None:
    hooks = Hooks()

    def refuse(request: ModelRequest) -> None:
        raise PermissionError("budget exhausted")

    hooks.before_model_call(refuse)
    agent = agent_with(hooks, "never sent")
    result = await agent.run("hi")
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.layer == "hook"
    assert "budget exhausted" in result.error.message
    assert isinstance(agent.model, ScriptedModel)
    assert agent.model.requests == []


async def test_an_after_model_hook_sees_the_reply_and_may_fail_open() -> None:
    hooks = Hooks()
    replies: list[str] = []

    @hooks.after_model_call
    async def record(message: Any) -> None:
        replies.append(message.text)
        raise ValueError("ignored")

    result = await agent_with(hooks, "hello").run("hi")
    assert result.text == "hello"
    assert replies == ["hello"]


async def test_hooks_can_be_removed() -> None:
    hooks = Hooks()

    def block(call: ToolCallInfo) -> None:
        raise BlockToolCall("no")

    hooks.before_tool_call(block)
    hooks.remove(block)
    await agent_with(hooks).run("go")
    assert ran == [3]
