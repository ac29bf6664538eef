"""One token budget, drawn on by every request of a run and of its sub-agents, whatever runs at
once: parallel delegate calls spend no more than the cap together, and a reply that comes back
larger than the cap ends the run ``exhausted``, never ``completed``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ipyagent import Agent, Budget, tool
from ipyagent.agentlib.budget import spent_tokens
from ipyagent.agentlib.delegation import SUBAGENT_NOTE
from ipyagent.agentlib.messages import ToolCallBlock
from ipyagent.agentlib.model import ModelRequest
from ipyagent.agentlib.providers.scripted import Text
from ipyagent.agentlib.usage import CHARS_PER_TOKEN, estimate_tokens
from ipyagent.testing import ScriptedModel, text, tool_call, usage


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key}: 42"


def honest(request: ModelRequest, *steps: Any) -> list[Any]:
    """``steps`` with the usage a provider that honours max_tokens reports: the prompt as sent,
    and the reply's tokens, at most max_tokens."""
    chars = sum(
        len(s.text) if isinstance(s, Text) else len(s.name) + len(json.dumps(s.arguments)) for s in steps
    )
    reply = chars // CHARS_PER_TOKEN + 1
    cap = request.settings.max_tokens
    prompt = estimate_tokens(request.system, request.messages)
    return [*steps, usage(input_tokens=prompt, output_tokens=reply if cap is None else min(reply, cap))]


def respond(request: ModelRequest) -> list[Any]:
    """Each child looks its key up, then answers; the parent then sums up. A child's prompt
    (the agent's system prompt and the sub-agent note) is a few hundred tokens."""
    if SUBAGENT_NOTE not in request.system:
        return honest(request, text("All done."))
    if request.messages[-1].tool_results:
        return honest(request, text("It holds 42."))
    return honest(request, tool_call("lookup", {"key": "k"}))


@pytest.mark.parametrize("children", [3, 10])
async def test_parallel_delegate_calls_spend_no_more_than_the_cap_together(children: int) -> None:
    first = [
        tool_call("delegate", {"task": f"Look up key k{n} and say what it holds.", "tools": ["lookup"]})
        for n in range(children)
    ]
    model = ScriptedModel([lambda request: honest(request, *first), *[respond] * (3 * children + 2)])
    agent = Agent(
        model=model,
        tools=[lookup],
        delegate=True,
        budget=Budget(tokens=1000),
        max_consecutive_failures=children + 1,  # a child stopped by the budget is a failed call
    )
    seen: list[int] = []
    agent.on("usage_updated", lambda e: seen.append(spent_tokens(e.request)) if not e.via else None)
    result = await agent.run("Look up every part.")
    total = spent_tokens(result.usage)
    assert total == sum(seen)  # every request of the tree counted once, in the parent's usage
    assert total <= 1000, f"{children} sub-agents spent {total:,} tokens under a cap of 1,000"
    assert result.status == "exhausted"
    # The transcript stays valid: every call has its result.
    calls = {b.id for m in agent.messages for b in m.content if isinstance(b, ToolCallBlock)}
    assert calls == {r.tool_call_id for m in agent.messages for r in m.tool_results}


async def test_a_reply_larger_than_the_cap_ends_the_run_exhausted() -> None:
    # A provider that ignores max_tokens.
    model = ScriptedModel([[text("A very long answer."), usage(input_tokens=100, output_tokens=5000)]])
    agent = Agent(model=model, budget=Budget(tokens=1000))
    result = await agent.run("Hi")
    assert result.status == "exhausted"
    assert "5,100 tokens" in result.reason and "1,000" in result.reason
    assert result.output is None


async def test_an_oversize_reply_that_calls_tools_ends_the_run_with_every_call_answered() -> None:
    model = ScriptedModel([[tool_call("lookup", {"key": "a"}), usage(input_tokens=100, output_tokens=5000)]])
    agent = Agent(model=model, tools=[lookup], budget=Budget(tokens=1000))
    result = await agent.run("Hi")
    assert result.status == "exhausted"
    [answer] = [r for m in agent.messages for r in m.tool_results]
    assert answer.is_error and "Not run" in answer.content
    assert len(model.requests) == 1


async def test_a_reply_that_lands_on_the_cap_completes() -> None:
    model = ScriptedModel([[text("Done."), usage(input_tokens=900, output_tokens=100)]])
    agent = Agent(model=model, budget=Budget(tokens=1000))
    result = await agent.run("Hi")
    assert result.status == "completed"


async def test_parallel_children_with_room_for_all_of_them_all_finish() -> None:
    first = [
        tool_call("delegate", {"task": f"Look up key k{n} and say what it holds.", "tools": ["lookup"]})
        for n in range(3)
    ]
    model = ScriptedModel([lambda request: honest(request, *first), *[respond] * 8])
    agent = Agent(model=model, tools=[lookup], delegate=True, budget=Budget(tokens=50_000), max_tokens=500)
    result = await agent.run("Look up every part.")
    assert result.status == "completed"
    answers = [r for m in agent.messages for r in m.tool_results if r.name == "delegate"]
    assert [a.content for a in answers] == ["It holds 42."] * 3
    # Each request asked for at most what was left once the others' reservations were counted.
    assert all(r.settings.max_tokens == 500 for r in model.requests)


async def test_requests_that_do_not_fit_beside_the_others_wait_for_them_instead_of_failing() -> None:
    # Without max_tokens each request may reserve all that is left: the children's requests take
    # turns, and every child still finishes within the cap.
    first = [
        tool_call("delegate", {"task": f"Look up key k{n} and say what it holds.", "tools": ["lookup"]})
        for n in range(3)
    ]
    model = ScriptedModel([lambda request: honest(request, *first), *[respond] * 8])
    agent = Agent(model=model, tools=[lookup], delegate=True, budget=Budget(tokens=3_000))
    result = await agent.run("Look up every part.")
    assert result.status == "completed", result.reason
    answers = [r for m in agent.messages for r in m.tool_results if r.name == "delegate"]
    assert [a.content for a in answers] == ["It holds 42."] * 3
    assert spent_tokens(result.usage) <= 3_000
