"""Events → view state, with the throttle off: the state the front end ends up with."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ipyagent import Agent, RetryPolicy, tool
from ipyagent.agentlib import events as ev
from ipyagent.agentlib.errors import ProviderUnavailable
from ipyagent.agentlib.messages import Message, TextBlock
from ipyagent.agentlib.usage import Usage
from ipyagent.testing import ScriptedModel, error, text, thinking, tool_call, usage
from ipyagent.widgets.reducer import (
    ViewReducer,
    apply_patch,
    history_blocks,
    merge_patches,
    new_state,
)
from ipyagent.widgets.text import plain_text
from ipyagent.widgets.transport import Throttle


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


@tool
def write(text: str) -> str:
    """Write."""
    return "written"


async def reduce(agent: Agent, prompt: str) -> tuple[ViewReducer, list[dict[str, Any]]]:
    """Run ``agent`` with a reducer fed by its events and a throttle that sends every batch."""
    reducer = ViewReducer()
    sent: list[dict[str, Any]] = []
    throttle = Throttle(reducer, sent.append, interval=0)

    def on_event(event: Any) -> None:
        reducer.feed(event)
        throttle.tick()

    agent.on("*", on_event)
    await agent.run(prompt)
    throttle.flush()
    return reducer, sent


def replay(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """What a front end that started from an empty state builds from the messages."""
    state = new_state()
    for message in messages:
        assert message["seq"] == state["seq"] + 1, "patch batches must be consecutive"
        for patch in message["patches"]:
            apply_patch(state, patch)
        state["seq"] = message["seq"]
    return state


async def test_a_run_becomes_blocks_in_order() -> None:
    model = ScriptedModel(
        [[thinking("Let me look."), text("Looking."), tool_call("lookup", {"key": "a"})], "It is A."]
    )
    reducer, sent = await reduce(Agent(model=model, tools=[lookup]), "what is a?")
    blocks = reducer.state["blocks"]
    assert [b["kind"] for b in blocks] == ["thinking", "text", "tool", "text"]
    assert blocks[0]["text"] == "Let me look."
    assert blocks[0]["streaming"] is False
    assert blocks[0]["duration"] is not None
    assert blocks[2]["name"] == "lookup"
    assert json.loads(blocks[2]["args"]) == {"key": "a"}
    assert blocks[2]["status"] == "done"
    assert blocks[2]["result"] == "A"
    assert blocks[3]["text"] == "It is A."
    assert reducer.state["status"] == "completed"
    assert reducer.state["usage"]["input"] > 0
    # The front end, applying the same messages, reaches the same state.
    assert replay(sent) == reducer.state


async def test_the_meter_shows_cached_tokens_and_what_caching_saved() -> None:
    model = ScriptedModel(
        [[usage(input_tokens=1_000, cache_read_tokens=9_000, output_tokens=10), text("hi")]],
        model_id="anthropic/claude-sonnet-4-5",
    )
    reducer, sent = await reduce(Agent(model=model), "hello")
    meter = reducer.state["usage"]
    assert meter is not None
    assert meter["cached"] == 9_000
    assert meter["saved"] == pytest.approx(9_000 * (3.0 - 0.3) / 1e6)
    assert replay(sent) == reducer.state


async def test_patches_carry_text_not_tokens() -> None:
    model = ScriptedModel(["word " * 500], chunk_size=1)
    reducer = ViewReducer()
    agent = Agent(model=model)
    agent.on("*", reducer.feed)
    await agent.run("talk")
    batch = reducer.take()
    assert batch is not None
    appends = [p for p in batch[1] if p["op"] == "append"]
    assert len(appends) == 1, "2,500 deltas to one block must travel as one append"
    assert appends[0]["value"] == "word " * 500


async def test_a_retried_request_removes_what_it_streamed() -> None:
    model = ScriptedModel([[text("partial"), error(ProviderUnavailable("Overloaded."))], "clean"])
    agent = Agent(model=model, retry=RetryPolicy(base_delay=0.001))
    reducer, sent = await reduce(agent, "hi")
    texts = [b["text"] for b in reducer.state["blocks"] if b["kind"] == "text"]
    assert texts == ["clean"]
    assert any(b["kind"] == "warning" for b in reducer.state["blocks"])
    assert replay(sent) == reducer.state


async def test_permission_prompts_and_denials_show_on_the_tool_card() -> None:
    model = ScriptedModel([tool_call("write", {"text": "x"}), tool_call("write", {"text": "y"}), "ok"])
    agent = Agent(model=model, tools=[write])
    reducer = ViewReducer()
    while_asking: list[tuple[str, bool]] = []

    def on_event(event: Any) -> None:
        reducer.feed(event)
        if event.type == "permission_required":
            card = reducer.state["blocks"][-1]
            while_asking.append((card["status"], card["permission"]))

    decisions = iter(["allow", "deny"])
    agent.on("permission_required", lambda e: agent.resolve_permission(e.call_id, next(decisions)))
    agent.on("*", on_event)
    await agent.run("write twice")
    assert while_asking == [("waiting", True), ("waiting", True)]
    tools = [b for b in reducer.state["blocks"] if b["kind"] == "tool"]
    assert [t["status"] for t in tools] == ["done", "denied"]
    assert all(t["permission"] is False for t in tools)


async def test_failures_become_an_error_block_with_the_hint() -> None:
    from ipyagent.agentlib.errors import AuthenticationError

    model = ScriptedModel([error(AuthenticationError("Bad key.", hint="Set OPENAI_API_KEY."))])
    reducer, _ = await reduce(Agent(model=model), "hi")
    block = reducer.state["blocks"][-1]
    assert block["kind"] == "error"
    assert block["message"] == "Bad key."
    assert block["hint"] == "Set OPENAI_API_KEY."
    assert reducer.state["status"] == "failed"
    assert plain_text(reducer.state).endswith("✗ Bad key.\n  Hint: Set OPENAI_API_KEY.")


async def test_plain_text_is_stable_across_runs() -> None:
    def script() -> ScriptedModel:
        return ScriptedModel([[thinking("Hmm."), tool_call("lookup", {"key": "b"})], "B it is."])

    first, _ = await reduce(Agent(model=script(), tools=[lookup]), "b?")
    second, _ = await reduce(Agent(model=script(), tools=[lookup]), "b?")
    assert plain_text(first.state) == plain_text(second.state)
    assert plain_text(first.state) == '💭 Hmm.\n→ lookup(key="b") ✓\nB it is.'


def test_merge_only_joins_appends_to_the_same_field() -> None:
    patches = [
        {"op": "append", "id": "a", "field": "text", "value": "x"},
        {"op": "append", "id": "a", "field": "text", "value": "y"},
        {"op": "append", "id": "a", "field": "args", "value": "{"},
        {"op": "set", "id": "a", "fields": {"streaming": False}},
        {"op": "append", "id": "a", "field": "text", "value": "z"},
    ]
    assert merge_patches(patches) == [
        {"op": "append", "id": "a", "field": "text", "value": "xy"},
        {"op": "append", "id": "a", "field": "args", "value": "{"},
        {"op": "set", "id": "a", "fields": {"streaming": False}},
        {"op": "append", "id": "a", "field": "text", "value": "z"},
    ]


def test_the_throttle_sends_at_most_one_message_per_interval() -> None:
    now = [0.0]
    reducer = ViewReducer()
    sent: list[dict[str, Any]] = []
    throttle = Throttle(reducer, sent.append, interval=0.05, clock=lambda: now[0])
    reducer.add_user("hi")
    for step in range(100):  # 100 ticks over 0.5 s of fake time, something pending at each
        now[0] = step * 0.005
        reducer.set_model(f"m{step}")
        throttle.tick()
    assert 9 <= len(sent) <= 11
    throttle.flush()
    assert replay(sent)["model"] == "m99"


def test_a_stopped_run_ends_every_streaming_block() -> None:
    reducer = ViewReducer()
    for event in [
        ev.RunStarted(run_id="r", model="m", prompt="p"),
        ev.RequestStarted(turn=1, model="m"),
        ev.ThinkingStart(index=0),
        ev.ThinkingDelta(index=0, delta="hmm"),
        ev.TextStart(index=1),
        ev.TextDelta(index=1, delta="half an ans"),
        ev.RunCancelled(run_id="r", usage=Usage()),
    ]:
        reducer.feed(event)
    assert reducer.state["status"] == "cancelled"
    assert [b["streaming"] for b in reducer.state["blocks"]] == [False, False]
    assert reducer.state["blocks"][1]["text"] == "half an ans", "stopping keeps what was streamed"


def test_a_stopped_run_stops_the_tool_calls_it_was_preparing_or_waiting_on() -> None:
    reducer = ViewReducer()
    for event in [
        ev.RunStarted(run_id="r", model="m", prompt="p"),
        ev.RequestStarted(turn=1, model="m"),
        ev.ToolCallStart(index=0, call_id="a", name="lookup"),
        ev.ToolCallDelta(call_id="a", delta='{"key": "x"}'),
        ev.ToolCallEnd(call_id="a", name="lookup", arguments={"key": "x"}, raw_arguments='{"key": "x"}'),
        ev.PermissionRequired(call_id="a", name="lookup", arguments={"key": "x"}),
        ev.ToolCallStart(index=1, call_id="b", name="write"),
        ev.ToolCallDelta(call_id="b", delta='{"te'),
        ev.RunCancelled(run_id="r", usage=Usage()),
    ]:
        reducer.feed(event)
    tools = {b["id"]: b for b in reducer.state["blocks"]}
    assert [tools[i]["status"] for i in "ab"] == ["stopped", "stopped"]
    assert tools["a"]["permission"] is False, "no prompt is left waiting for a decision"
    assert tools["b"]["args"] == '{"te', "stopping keeps the arguments that arrived"


async def test_a_denied_call_shows_as_denied_in_the_history_too() -> None:
    # The same run shown live and rebuilt from its saved messages (a resumed chat): the tool
    # cards must agree — the refused call is "denied", not a red "failed".
    model = ScriptedModel(
        [
            tool_call("write", {"text": "x"}),
            tool_call("write", {"text": "y"}),
            tool_call("nope", {}),
            "ok",
        ]
    )
    agent = Agent(model=model, tools=[write])
    decisions = iter(["allow", "deny"])
    agent.on("permission_required", lambda e: agent.resolve_permission(e.call_id, next(decisions)))
    live, _ = await reduce(agent, "write twice")
    history = history_blocks(agent.messages)
    statuses = [b["status"] for b in history if b["kind"] == "tool"]
    assert statuses == [b["status"] for b in live.state["blocks"] if b["kind"] == "tool"]
    assert statuses == ["done", "denied", "failed"]  # the unknown tool is a real failure


async def test_a_call_nobody_could_answer_is_denied_in_the_history() -> None:
    agent = Agent(model=ScriptedModel([tool_call("write", {"text": "x"}), "ok"]), tools=[write])
    await agent.run("write")  # no handler for permission_required: nobody to ask
    assert [b["status"] for b in history_blocks(agent.messages) if b["kind"] == "tool"] == ["denied"]


async def test_a_call_a_policy_blocked_is_denied_live_and_in_the_history() -> None:
    from ipyagent import Block, Hooks

    hooks = Hooks()
    hooks.tool_policy(lambda call: Block("Writing is off today."))
    model = ScriptedModel([tool_call("write", {"text": "x"}), "ok"])
    agent = Agent(model=model, tools=[write], hooks=hooks, auto_approve=True)
    live, _ = await reduce(agent, "write")
    [card] = [b for b in live.state["blocks"] if b["kind"] == "tool"]
    assert (card["status"], card["result"]) == ("denied", "Blocked by policy: Writing is off today.")
    assert [b["status"] for b in history_blocks(agent.messages) if b["kind"] == "tool"] == ["denied"]


def test_the_history_is_apart_from_the_state_and_a_new_conversation_clears_both() -> None:
    messages = [Message.user("hi"), Message(role="assistant", content=(TextBlock(text="Hello."),))]
    reducer = ViewReducer()
    reducer.show_history(messages)
    assert [(b["kind"], b["text"]) for b in reducer.history] == [("user", "hi"), ("text", "Hello.")]
    assert reducer.state["blocks"] == [] and not reducer.has_pending, "no patches for the history"
    reducer.add_user("more")
    reducer.clear()
    assert reducer.history == [] and reducer.state["blocks"] == []


async def test_a_control_file_question_carries_its_caution_and_a_warning_its_hint(tmp_path: Any) -> None:
    from dataclasses import replace

    from ipyagent.agentlib.control_files import Subject

    def subjects(arguments: dict[str, Any]) -> list[Subject]:
        return [Subject(tmp_path / str(arguments["text"]), tmp_path)]

    planting = replace(write, subjects=subjects)
    model = ScriptedModel([tool_call("write", {"text": ".mcp.json"}), "done"])
    agent = Agent(model=model, tools=[planting], auto_approve=True)
    reducer = ViewReducer()
    asked: list[dict[str, Any]] = []

    def on_event(event: Any) -> None:
        reducer.feed(event)
        if event.type == "permission_required":
            asked.append(dict(reducer.state["blocks"][-1]))

    agent.on("permission_required", lambda e: agent.resolve_permission(e.call_id, "deny"))
    agent.on("*", on_event)
    reducer.feed(ev.RunWarning(code="demo", message="Something was skipped.", hint="Allow it with X."))
    await agent.run("plant it")
    assert len(asked) == 1, "a control file is asked about even under auto-approve"
    assert ".mcp.json" in asked[0]["caution"] and "programs" in asked[0]["caution"]
    warning = next(b for b in reducer.state["blocks"] if b["kind"] == "warning")
    assert warning["hint"] == "Allow it with X."
    assert "Hint: Allow it with X." in plain_text(reducer.state)


async def test_a_calls_huge_arguments_are_cut_in_the_card_its_traffic_and_its_history() -> None:
    # ask_user with 10,000 choices: refused by the tool, but the model's call itself went whole
    # into the card, three times over in the traffic, and into the saved state.
    from ipyagent.agentlib.ask_tool import ask_user_tool
    from ipyagent.widgets.reducer import MAX_SHOWN_ARGS

    choices = [f"data/part-{i:05d}.parquet" for i in range(10_000)]
    model = ScriptedModel([tool_call("ask_user", {"question": "Which?", "choices": choices}), "ok"])
    agent = Agent(model=model, tools=[ask_user_tool()])
    reducer, sent = await reduce(agent, "Go.")
    raw = agent.messages[1].tool_calls[0].raw_arguments
    assert len(raw) > 200_000
    [card] = [b for b in reducer.state["blocks"] if b["kind"] == "tool"]
    assert card["args"].startswith(raw[:1000]) and "more characters not shown" in card["args"]
    assert len(card["args"]) < MAX_SHOWN_ARGS + 100
    assert len(json.dumps(reducer.state)) < 3 * MAX_SHOWN_ARGS
    # The traffic: what the patches carry of the arguments (their envelopes are the throttle's).
    patches = [p for message in sent for p in message["patches"]]
    appended = sum(len(p["value"]) for p in patches if p["op"] == "append" and p["field"] == "args")
    written = [p["fields"]["args"] for p in patches if p["op"] == "set" and "args" in p["fields"]]
    assert appended <= MAX_SHOWN_ARGS and all(len(args) < MAX_SHOWN_ARGS + 100 for args in written)
    assert replay(sent)["blocks"] == reducer.state["blocks"]
    [shown] = [b for b in history_blocks(agent.messages) if b["kind"] == "tool"]
    assert shown["args"] == card["args"]
    assert "ask_user(" in plain_text(reducer.state)
    # Arguments within the limit are shown whole.
    reducer, _ = await reduce(
        Agent(model=ScriptedModel([tool_call("lookup", {"key": "k"}), "ok"]), tools=[lookup]), "Go."
    )
    assert [b["args"] for b in reducer.state["blocks"] if b["kind"] == "tool"] == ['{"key": "k"}']
