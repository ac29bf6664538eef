"""Policies: Pass or Block before each model request and tool call, in order, failing closed,
and a block that shows nothing it should not (prompt, the policy's reasons, secrets)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ipyagent import Agent, Block, Hooks, Pass, ToolCallInfo, tool
from ipyagent.agentlib.events import AgentEvent, BlockedByPolicy
from ipyagent.agentlib.model import ModelRequest
from ipyagent.agentlib.policy import safe_metadata
from ipyagent.testing import ScriptedModel, tool_call

PROMPT = "Summarize the file of patient Jane Roe, born 1970-01-01."
SECRET = "s3cr3t-v4lue-0f-th3-t34m-4242"
REASON = "matched the rule for patient names at offset 27"

ran: list[int] = []


@tool(read_only=True)
def square(n: int) -> int:
    """Square a number."""
    ran.append(n)
    return n * n


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran.clear()
    monkeypatch.setenv("IPYAGENT_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.setenv("TEAM_SECRET", SECRET)  # a key-like variable: a known secret


def agent_with(hooks: Hooks, *turns: Any) -> tuple[Agent, ScriptedModel, list[AgentEvent]]:
    model = ScriptedModel(list(turns) or [tool_call("square", {"n": 3}), "ok"])
    agent = Agent(model=model, tools=[square], hooks=hooks)
    events: list[AgentEvent] = []
    agent.on("*", events.append)
    return agent, model, events


def blocks(events: list[AgentEvent]) -> list[BlockedByPolicy]:
    return [e for e in events if isinstance(e, BlockedByPolicy)]


def shown(events: list[AgentEvent], result: Any) -> str:
    """Everything a block shows: its events, and the run's error."""
    texts = [e.model_dump_json() for e in blocks(events)]
    if result.error is not None:
        texts.append(result.error.model_dump_json())
    return "\n".join(texts)


async def test_a_passing_policy_lets_the_request_and_the_call_through() -> None:
    hooks = Hooks()
    asked: list[str] = []

    @hooks.model_policy
    def model_ok(request: ModelRequest) -> Pass:
        asked.append("model")
        return Pass()

    @hooks.tool_policy
    async def tool_ok(call: ToolCallInfo) -> Pass:
        asked.append(f"tool {call.name}")
        return Pass()

    agent, model, events = agent_with(hooks)
    result = await agent.run("go")
    assert result.status == "completed"
    assert ran == [3]
    assert asked == ["model", "tool square", "model"]
    assert len(model.requests) == 2
    assert blocks(events) == []


async def test_a_blocked_request_ends_the_run_with_a_safe_message_and_sends_nothing() -> None:
    hooks = Hooks()

    @hooks.model_policy
    def no_patients(request: ModelRequest) -> Block:
        prompt = request.messages[-1].text
        return Block(
            "Patient data may not be sent to this model.",
            metadata={"rule": "phi-1", "prompt": prompt, "reason": REASON, "api_token": SECRET, "hits": 2},
        )

    agent, model, events = agent_with(hooks, "never sent")
    result = await agent.run(PROMPT)
    assert model.requests == []
    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.code, result.error.layer) == ("policy_blocked", "hook")
    assert "Patient data may not be sent to this model." in result.error.message
    assert "agent.reset()" in result.error.hint
    [event] = blocks(events)
    assert (event.target, event.policy.endswith(".no_patients"), event.why) == (
        "model_request",
        True,
        "block",
    )
    assert event.metadata == {
        "rule": "phi-1",
        "prompt": "[redacted]",
        "reason": "[redacted]",
        "api_token": "[redacted]",
        "hits": 2,
    }
    everything = shown(events, result) + result.reason
    for leaked in (PROMPT, "Jane Roe", REASON, SECRET):
        assert leaked not in everything
    # The run ended cleanly: the next one goes through once the policy is removed.
    hooks.remove(no_patients)
    model.add("Done.")
    assert (await agent.run("Anything else?")).status == "completed"


async def test_a_blocked_tool_call_gives_the_model_the_message_and_the_run_goes_on() -> None:
    hooks = Hooks()

    @hooks.tool_policy
    def small_numbers_only(call: ToolCallInfo) -> Pass | Block:
        if call.arguments["n"] > 2:
            return Block("Only numbers up to 2 may be squared.", metadata={"limit": 2})
        return Pass()

    agent, _, events = agent_with(hooks)
    result = await agent.run("go")
    assert result.status == "completed"
    assert ran == []
    block = result.messages[2].tool_results[0]
    assert (block.is_error, block.denied) == (True, True)
    assert block.content == "Blocked by policy: Only numbers up to 2 may be squared."
    [event] = blocks(events)
    assert (event.target, event.tool, event.metadata) == ("tool_call", "square", {"limit": 2})
    assert event.call_id == block.tool_call_id


class Broken(Exception):
    pass


def raises(request: ModelRequest) -> Pass:
    raise Broken(f"could not check {request.messages[-1].text} with {SECRET}")


async def never_answers(request: ModelRequest) -> Pass:
    await asyncio.Event().wait()
    return Pass()


def returns_none(request: ModelRequest) -> None:
    return None


def returns_the_class(request: ModelRequest) -> type[Pass]:
    return Pass


@pytest.mark.parametrize(
    ("policy", "why", "says"),
    [
        (raises, "raised", "failed (Broken)"),
        (never_answers, "timeout", "did not answer within 0.05 s"),
        (returns_none, "invalid", "returned NoneType"),
        (returns_the_class, "invalid", "returned type"),
    ],
)
async def test_a_policy_that_fails_blocks(policy: Any, why: str, says: str) -> None:
    hooks = Hooks(policy_timeout=0.05)
    hooks.model_policy(policy)
    agent, model, events = agent_with(hooks, "never sent")
    result = await agent.run(PROMPT)
    assert model.requests == []
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == "policy_blocked"
    assert says in result.error.message
    assert "Pass() or Block(...)" in result.error.hint
    [event] = blocks(events)
    assert event.why == why
    everything = shown(events, result)
    for leaked in (PROMPT, SECRET):
        assert leaked not in everything


async def test_a_policys_own_timeout_wins_over_the_hooks_default() -> None:
    hooks = Hooks(policy_timeout=60)

    async def slow(call: ToolCallInfo) -> Pass:
        await asyncio.Event().wait()
        return Pass()

    hooks.tool_policy(slow, timeout=0.05)
    agent, _, events = agent_with(hooks)
    result = await agent.run("go")
    assert result.status == "completed"  # a blocked tool call does not end the run
    assert ran == []
    [event] = blocks(events)
    assert (event.why, event.target) == ("timeout", "tool_call")
    assert "0.05 s" in result.messages[2].tool_results[0].content


async def test_policies_run_in_order_and_the_first_block_wins() -> None:
    hooks = Hooks()
    asked: list[str] = []

    @hooks.model_policy
    def first(request: ModelRequest) -> Pass:
        asked.append("first")
        return Pass()

    @hooks.model_policy(timeout=1)
    def second(request: ModelRequest) -> Block:
        asked.append("second")
        return Block("second says no")

    @hooks.model_policy
    def third(request: ModelRequest) -> Block:
        asked.append("third")
        return Block("third says no")

    agent, _, events = agent_with(hooks, "never sent")
    result = await agent.run("go")
    assert asked == ["first", "second"]
    assert result.error is not None and "second says no" in result.error.message
    assert [e.policy.rsplit(".", 1)[-1] for e in blocks(events)] == ["second"]


async def test_policies_see_the_request_after_the_hooks_and_the_redaction() -> None:
    hooks = Hooks()
    seen: list[ModelRequest] = []
    hooks.before_model_call(lambda request: request.model_copy(update={"system": f"Be terse. {SECRET}"}))

    @hooks.model_policy
    def look(request: ModelRequest) -> Pass:
        seen.append(request)
        return Pass()

    agent, model, _ = agent_with(hooks, "ok")
    await agent.run(f"my key is {SECRET}")
    [request] = seen
    assert request.system == "Be terse. [redacted]"
    assert request.messages[-1].text == "my key is [redacted]"
    assert model.requests[0] is request  # what the policy passed is what was sent


async def test_a_block_message_has_secrets_masked() -> None:
    hooks = Hooks()
    hooks.model_policy(
        lambda request: Block(f"Refused: the request held {SECRET} and sk-proj-4bc123def456ghi789jkl0")
    )
    agent, _, events = agent_with(hooks, "never sent")
    result = await agent.run("go")
    assert result.error is not None
    assert result.error.message.endswith("Refused: the request held [redacted] and [redacted]")
    assert SECRET not in shown(events, result)


def test_metadata_keeps_plain_values_and_hides_sensitive_keys() -> None:
    metadata = {
        "rule": "r1",
        "count": 3,
        "score": 0.5,
        "strict": True,
        "note": None,
        "nested": {"a": 1},
        "items": [1, 2],
        "object": object(),
        "Prompt_Text": "hello",
        "DEBUG_REASON": "why",
        "clientSecret": "x",
        "AuthToken": "x",
        "db_password": "x",
        "aws_credentials": "x",
        "API-KEY": "x",
        "detail": f"saw {SECRET}",
        "long": "y" * 1000,
    }
    safe = safe_metadata(metadata)
    assert {k: safe[k] for k in ("rule", "count", "score", "strict", "note")} == {
        "rule": "r1",
        "count": 3,
        "score": 0.5,
        "strict": True,
        "note": None,
    }
    assert "nested" not in safe and "items" not in safe and "object" not in safe
    for key in (
        "Prompt_Text",
        "DEBUG_REASON",
        "clientSecret",
        "AuthToken",
        "db_password",
        "aws_credentials",
        "API-KEY",
    ):
        assert safe[key] == "[redacted]", key
    assert safe["detail"] == "saw [redacted]"
    assert isinstance(safe["long"], str) and len(safe["long"]) == 200
    json.dumps(safe)  # plain: it serializes as it is
    assert safe_metadata(["not", "a", "mapping"]) == {}


async def test_removing_a_policy_and_the_old_hooks_still_work_together() -> None:
    hooks = Hooks()
    hooks.before_tool_call(lambda call: {"n": 1})  # rewrites: the policy sees the new arguments
    seen: list[dict[str, Any]] = []

    def look(call: ToolCallInfo) -> Pass:
        seen.append(call.arguments)
        return Pass()

    hooks.tool_policy(look)
    agent, _, _ = agent_with(hooks)
    await agent.run("go")
    assert seen == [{"n": 1}] and ran == [1]
    hooks.remove(look)
    assert hooks.tool_policies == []


def chat(turns: int) -> list[Any]:
    from ipyagent.agentlib.messages import Message, TextBlock

    answer = lambda i: Message(role="assistant", content=(TextBlock(text=f"answer {i}"),))  # noqa: E731
    return [m for i in range(turns) for m in (Message.user(f"question {i} {SECRET}"), answer(i))]


async def test_a_compactions_summary_request_is_masked_and_screened() -> None:
    model = ScriptedModel(["The summary."])
    agent = Agent(model=model, messages=chat(4), compact_keep=2)
    result = await agent.compact()
    assert not result.fallback
    [request] = model.requests
    assert SECRET not in request.model_dump_json() and "[redacted]" in request.messages[0].text

    hooks = Hooks()
    hooks.model_policy(lambda request: Block("No summaries of this conversation."))
    model = ScriptedModel(["never sent"])
    agent = Agent(model=model, messages=chat(4), compact_keep=2, hooks=hooks)
    events: list[AgentEvent] = []
    agent.on("*", events.append)
    result = await agent.compact()
    assert model.requests == []
    assert result.fallback  # the mechanical digest stands in: nothing is lost
    assert [e.message for e in blocks(events)] == ["No summaries of this conversation."]


async def test_included_hooks_run_first_at_every_point_and_each_once() -> None:
    shared, own = Hooks(), Hooks()
    own.include.append(shared)
    shared.include.append(own)  # a cycle is harmless
    order: list[str] = []
    for name, hooks in (("shared", shared), ("own", own)):
        hooks.before_model_call(lambda request, name=name: order.append(f"{name} before_model"))
        hooks.model_policy(lambda request, name=name: order.append(f"{name} model_policy") or Pass())
        hooks.before_tool_call(lambda call, name=name: order.append(f"{name} before_tool"))
        hooks.tool_policy(lambda call, name=name: order.append(f"{name} tool_policy") or Pass())
        hooks.after_tool_call(lambda call, result, name=name: order.append(f"{name} after_tool"))
    assert own.chain() == [shared, own] and own.chain()[0] is shared
    agent, _, _ = agent_with(own, tool_call("square", {"n": 2}), "ok")
    await agent.run("go")
    assert order[:10] == [
        "shared before_model",
        "own before_model",
        "shared model_policy",
        "own model_policy",
        "shared before_tool",
        "own before_tool",
        "shared tool_policy",
        "own tool_policy",
        "shared after_tool",
        "own after_tool",
    ]
    assert ran == [2]
