"""A sub-agent's work in the view: nested blocks inside the delegate call's card."""

from __future__ import annotations

import asyncio
from typing import Any

from ipyagent import Agent, Delegation, tool
from ipyagent.agentlib import events as ev
from ipyagent.testing import ScriptedModel, text, thinking, tool_call
from ipyagent.widgets.reducer import ViewReducer, apply_patch, new_state
from ipyagent.widgets.text import block_markdown, plain_text
from ipyagent.widgets.transport import Throttle


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


@tool
def write(text: str) -> str:
    """Write (changes things)."""
    return "written"


def delegate(task: str, tools: list[str]) -> Any:
    return tool_call("delegate", {"task": task, "tools": tools})


def watch(agent: Agent) -> tuple[ViewReducer, list[dict[str, Any]], Throttle]:
    reducer = ViewReducer()
    sent: list[dict[str, Any]] = []
    throttle = Throttle(reducer, sent.append, interval=0)

    def on_event(event: Any) -> None:
        reducer.feed(event)
        throttle.tick()

    agent.on("*", on_event)
    return reducer, sent, throttle


def replay(messages: list[dict[str, Any]]) -> dict[str, Any]:
    state = new_state()
    for message in messages:
        for patch in message["patches"]:
            apply_patch(state, patch)
        state["seq"] = message["seq"]
    return state


def by_parent(blocks: list[Any], parent: str | None) -> list[Any]:
    return [b for b in blocks if b.get("parent") == parent]


async def test_the_child_s_work_is_nested_in_the_delegate_card() -> None:
    model = ScriptedModel(
        [
            [text("Handing it over."), delegate("Look up a.", ["lookup"])],
            [thinking("Use lookup."), tool_call("lookup", {"key": "a"})],
            "It is A.",
            "A, says the sub-agent.",
        ]
    )
    agent = Agent(model=model, tools=[lookup], delegate=True)
    reducer, sent, throttle = watch(agent)
    await agent.run("what is a?")
    throttle.flush()

    blocks = reducer.state["blocks"]
    top = by_parent(blocks, None)
    assert [b["kind"] for b in top] == ["text", "tool", "text"]
    card = top[1]
    assert card["name"] == "delegate" and card["status"] == "done" and card["result"] == "It is A."
    child = card["child"]
    assert child is not None
    assert (child["status"], child["model"], child["task"], child["tools"]) == (
        "completed",
        "scripted/script",
        "Look up a.",
        ["lookup"],
    )
    assert child["usage"] is not None and child["usage"]["input"] > 0
    nested = by_parent(blocks, card["id"])
    assert [b["kind"] for b in nested] == ["thinking", "tool", "text"]
    inner_tool = nested[1]
    assert (inner_tool["name"], inner_tool["status"], inner_tool["result"]) == ("lookup", "done", "A")
    assert nested[2]["text"] == "It is A." and nested[2]["streaming"] is False
    # Every id is the view's own: the child's numbered blocks are prefixed with the card's id;
    # its tool card keeps the call's id, which the permission buttons answer.
    ids = [b["id"] for b in blocks]
    assert len(ids) == len(set(ids))
    assert nested[0]["id"].startswith(f"{card['id']}/") and nested[2]["id"].startswith(f"{card['id']}/")
    assert not inner_tool["id"].startswith(card["id"])
    # The parent's own status is the parent's; a page that applied the patches has the same state.
    assert reducer.state["status"] == "completed"
    assert replay(sent)["blocks"] == blocks


async def test_the_nested_card_is_live_while_the_child_works() -> None:
    entered = asyncio.Event()
    release = asyncio.Event()

    @tool(read_only=True)
    async def slow() -> str:
        """Takes a while."""
        entered.set()
        await release.wait()
        return "slow done"

    model = ScriptedModel(
        [[delegate("Be slow.", ["slow"])], [text("Working on it."), tool_call("slow")], "ok", "fine"]
    )
    agent = Agent(model=model, tools=[slow], delegate=True)
    _reducer, sent, throttle = watch(agent)
    run = asyncio.ensure_future(agent.run("go"))
    await asyncio.wait_for(entered.wait(), 5)

    page = replay(sent)  # what the page shows mid-run, from the patches sent so far
    (card,) = by_parent(page["blocks"], None)
    assert card["status"] == "running" and card["child"]["status"] == "running"
    nested = by_parent(page["blocks"], card["id"])
    assert [(b["kind"], b.get("status")) for b in nested] == [("text", None), ("tool", "running")]
    assert nested[0]["text"] == "Working on it."
    release.set()
    await run
    throttle.flush()
    assert replay(sent)["blocks"][0]["child"]["status"] == "completed"


async def test_a_child_s_permission_prompt_shows_on_its_nested_card() -> None:
    model = ScriptedModel(
        [[delegate("Write.", ["write"])], [tool_call("write", {"text": "x"})], "done", "ok"]
    )
    agent = Agent(model=model, tools=[write], delegate=True)
    reducer, _sent, _throttle = watch(agent)
    waiting: list[dict[str, Any]] = []

    def snapshot(event: Any) -> None:  # after the reducer's: what the view shows at the prompt
        if isinstance(event, ev.PermissionRequired):
            waiting.extend(dict(b) for b in reducer.state["blocks"] if b["id"] == event.call_id)

    agent.on("*", snapshot)
    agent.on("permission_required", lambda e: agent.resolve_permission(e.call_id, "allow"))
    await agent.run("go")
    (block,) = waiting
    assert block["status"] == "waiting" and block["permission"] is True and block.get("parent")


async def test_cancelling_stops_the_nested_card_too() -> None:
    entered = asyncio.Event()

    @tool(read_only=True)
    async def slow() -> str:
        """Takes a minute."""
        entered.set()
        await asyncio.sleep(60)
        return "never"

    model = ScriptedModel([[delegate("Wait.", ["slow"])], [tool_call("slow")], "never"])
    agent = Agent(model=model, tools=[slow], delegate=True)
    reducer, _sent, _throttle = watch(agent)
    run = asyncio.ensure_future(agent.run("go"))
    await asyncio.wait_for(entered.wait(), 5)
    agent.cancel()
    await run
    blocks = reducer.state["blocks"]
    (card,) = by_parent(blocks, None)
    assert card["status"] == "stopped"
    assert card["child"]["status"] == "cancelled"
    assert [b["status"] for b in by_parent(blocks, card["id"])] == ["stopped"]
    assert reducer.state["status"] == "cancelled"


async def test_two_levels_deep_each_card_holds_its_own_child() -> None:
    model = ScriptedModel(
        [
            [delegate("one", ["lookup", "delegate"])],
            [delegate("two", ["lookup"])],
            [tool_call("lookup", {"key": "z"})],
            "Z",
            "child: Z",
            "parent: Z",
        ]
    )
    agent = Agent(model=model, tools=[lookup], delegate=Delegation(max_depth=2))
    reducer, _sent, _throttle = watch(agent)
    await agent.run("go")
    blocks = reducer.state["blocks"]
    (outer,) = [b for b in by_parent(blocks, None) if b["kind"] == "tool"]
    (inner,) = [b for b in by_parent(blocks, outer["id"]) if b["kind"] == "tool"]
    assert inner["name"] == "delegate" and inner["child"]["task"] == "two"
    (lookup_card,) = [b for b in by_parent(blocks, inner["id"]) if b["kind"] == "tool"]
    assert lookup_card["result"] == "Z"
    assert plain_text(reducer.state) == (
        '→ delegate(task="one", tools=["lookup", "delegate"]) ✓\n'
        '  → delegate(task="two", tools=["lookup"]) ✓\n'
        '    → lookup(key="z") ✓\n'
        "parent: Z"
    )


async def test_the_text_renderers_sum_the_child_up_under_its_card() -> None:
    model = ScriptedModel(
        [
            [delegate("Look up a and b.", ["lookup"])],
            [text("Looking both up."), tool_call("lookup", {"key": "a"}), tool_call("lookup", {"key": "b"})],
            "A and B.",
            "Both found.",
        ]
    )
    agent = Agent(model=model, tools=[lookup], delegate=True)
    reducer, _sent, _throttle = watch(agent)
    await agent.run("go")
    # Stable: no ids, durations or token counts; the child's own text is the card's result.
    assert plain_text(reducer.state) == (
        '→ delegate(task="Look up a and b.", tools=["lookup"]) ✓\n'
        '  → lookup(key="a") ✓\n'
        '  → lookup(key="b") ✓\n'
        "Both found."
    )
    card = reducer.state["blocks"][0]
    assert block_markdown(card, reducer.state["blocks"]) == (
        '**→ `delegate(task="Look up a and b.", tools=["lookup"])`** ✓\n\n'
        '> **→ `lookup(key="a")`** ✓\n>\n'
        '> **→ `lookup(key="b")`** ✓'
    )
