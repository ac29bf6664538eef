"""Sub-agents: the delegate tool hands a task to a child run that can do no more than its parent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from helpers import assert_valid_transcript

from ipyagent import Agent, Delegation, UserError, tool
from ipyagent.agentlib import events as ev
from ipyagent.agentlib.sessions import read_session
from ipyagent.testing import ScriptedModel, text, tool_call, usage

CALLS: list[str] = []


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


@tool(read_only=True)
def count(items: list[str]) -> int:
    """Count items."""
    return len(items)


@tool
def write_note(note: str) -> str:
    """Write a note (changes things)."""
    CALLS.append(note)
    return f"wrote {note}"


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    CALLS.clear()


def delegate(task: str, tools: list[str] | None = None, **more: Any) -> Any:
    arguments: dict[str, Any] = {"task": task, **more}
    if tools is not None:
        arguments["tools"] = tools
    return tool_call("delegate", arguments)


def recorder(agent: Agent) -> list[ev.AgentEvent]:
    seen: list[ev.AgentEvent] = []
    agent.on("*", seen.append)
    return seen


def tool_names(request: Any) -> list[str]:
    return sorted(spec.name for spec in request.tools)


def file_names(folder: Path, pattern: str = "*") -> list[str]:
    return sorted(p.name for p in folder.glob(pattern))


def results(agent: Agent) -> list[Any]:
    return [r for m in agent.messages for r in m.tool_results]


async def test_the_model_reads_the_sub_agent_s_answer() -> None:
    model = ScriptedModel(
        [
            [delegate("Look up 'a' and say what it is.", ["lookup"])],
            [tool_call("lookup", {"key": "a"})],
            "It is A.",
            "The sub-agent found A.",
        ]
    )
    agent = Agent(model=model, tools=[lookup, count], delegate=True)
    seen = recorder(agent)
    result = await agent.run("What is a?")

    assert result.status == "completed"
    assert result.text == "The sub-agent found A."
    (answer,) = [r for r in results(agent) if r.name == "delegate"]
    assert answer.content == "It is A." and not answer.is_error
    call_id = answer.tool_call_id
    # The child's run is its own, announced, and its events carry the delegate call.
    started = [e for e in seen if isinstance(e, ev.SubagentStarted)]
    assert [(s.call_id, s.task, s.tools, s.via) for s in started] == [
        (call_id, "Look up 'a' and say what it is.", ["lookup"], ())
    ]
    nested = [e for e in seen if e.via]
    assert {e.via for e in nested} == {(call_id,)}
    assert [e.type for e in nested if isinstance(e, ev.RunStarted | ev.RunFinished)] == [
        "run_started",
        "run_finished",
    ]
    assert [e.content for e in nested if isinstance(e, ev.ToolResult)] == ["A"]
    # The child's request carried the task, a sub-agent's system prompt, and only its tools.
    child_request = model.requests[1]
    assert child_request.messages[0].text == "Look up 'a' and say what it is."
    assert "You are a sub-agent" in child_request.system
    assert tool_names(child_request) == ["lookup"]
    # The parent's transcript holds none of the child's messages.
    assert [m.role for m in agent.messages] == ["user", "assistant", "user", "assistant"]
    assert_valid_transcript(agent.messages)


async def test_a_sub_agent_gets_only_tools_its_parent_has() -> None:
    model = ScriptedModel([[delegate("Write it down.", ["write_file", "lookup"])], "Could not delegate."])
    agent = Agent(model=model, tools=[lookup, count], delegate=True)
    seen = recorder(agent)
    await agent.run("go")

    (answer,) = results(agent)
    assert answer.is_error
    assert "Unknown tool(s) for the sub-agent: write_file" in answer.content
    assert "lookup" in answer.content and "count" in answer.content  # what it may be given
    assert not any(isinstance(e, ev.SubagentStarted) for e in seen)  # no child ran
    assert len(model.requests) == 2


async def test_without_a_tool_list_a_sub_agent_gets_all_its_parent_s_tools_but_delegate() -> None:
    model = ScriptedModel([[delegate("Do it.")], "done", "ok"])
    agent = Agent(model=model, tools=[lookup, count], delegate=True)
    await agent.run("go")
    assert "delegate" in tool_names(model.requests[0])
    assert tool_names(model.requests[1]) == ["count", "lookup"]


async def test_a_sub_agent_cannot_delegate_further_by_default() -> None:
    model = ScriptedModel([[delegate("Delegate again.", ["lookup", "delegate"])], "no"])
    agent = Agent(model=model, tools=[lookup], delegate=True)
    await agent.run("go")
    (answer,) = results(agent)
    assert answer.is_error
    assert "cannot delegate further" in answer.content
    assert len(model.requests) == 2  # the parent's two turns; no child request


async def test_a_deeper_delegation_allows_one_more_level_and_no_more() -> None:
    model = ScriptedModel(
        [
            [delegate("Level one.", ["lookup", "delegate"])],
            [delegate("Level two.", ["lookup", "delegate"])],  # the grandchild may not delegate
            "the child gives up",
            "the parent is done",
        ]
    )
    agent = Agent(model=model, tools=[lookup], delegate=Delegation(max_depth=2))
    seen = recorder(agent)
    await agent.run("go")

    assert tool_names(model.requests[1]) == ["delegate", "lookup"]  # the child may delegate
    (child_call,) = [s.call_id for s in seen if isinstance(s, ev.SubagentStarted)]
    (refused,) = [e for e in seen if isinstance(e, ev.ToolResult) and e.via == (child_call,)]
    assert refused.is_error and "cannot delegate further" in refused.content
    assert "limit is 2" in refused.content


async def test_two_levels_deep_the_grandchild_s_events_name_both_calls() -> None:
    model = ScriptedModel(
        [
            [delegate("Level one.", ["lookup", "delegate"])],
            [delegate("Level two.", ["lookup"])],
            [tool_call("lookup", {"key": "z"})],
            "Z",
            "the child got Z",
            "the parent got Z",
        ]
    )
    agent = Agent(model=model, tools=[lookup], delegate=Delegation(max_depth=2))
    seen = recorder(agent)
    result = await agent.run("go")
    assert result.text == "the parent got Z"
    started = [s for s in seen if isinstance(s, ev.SubagentStarted)]
    assert [len(s.via) for s in started] == [0, 1]
    outer, inner = started[0].call_id, started[1].call_id
    assert started[1].via == (outer,)
    (grandchild_result,) = [e for e in seen if isinstance(e, ev.ToolResult) and e.name == "lookup"]
    assert grandchild_result.via == (outer, inner)
    assert tool_names(model.requests[2]) == ["lookup"]


async def test_a_child_of_a_read_only_agent_is_read_only() -> None:
    model = ScriptedModel(
        [
            [delegate("Write 'x'.", ["write_note"])],
            [tool_call("write_note", {"note": "x"})],
            "I could not.",
            "ok",
        ]
    )
    agent = Agent(model=model, tools=[write_note], delegate=True, can_write=False, auto_approve=True)
    seen = recorder(agent)
    await agent.run("go")
    (refusal,) = [e for e in seen if isinstance(e, ev.ToolResult) and e.name == "write_note"]
    assert refusal.via and refusal.is_error
    assert "can_write=False" in refusal.content
    assert CALLS == []


async def test_a_child_asks_where_its_parent_would_and_is_denied_where_nobody_can_answer() -> None:
    model = ScriptedModel(
        [[delegate("Write 'x'.", ["write_note"])], [tool_call("write_note", {"note": "x"})], "denied", "ok"]
    )
    agent = Agent(model=model, tools=[write_note], delegate=True)  # no auto_approve, nobody listening
    seen = recorder(agent)
    await agent.run("go")
    (denial,) = [e for e in seen if isinstance(e, ev.ToolResult) and e.name == "write_note"]
    assert "nobody can answer" in denial.content
    assert CALLS == []


async def test_auto_approve_is_inherited() -> None:
    model = ScriptedModel(
        [[delegate("Write 'x'.", ["write_note"])], [tool_call("write_note", {"note": "x"})], "wrote it", "ok"]
    )
    agent = Agent(model=model, tools=[write_note], delegate=True, auto_approve=True)
    await agent.run("go")
    assert CALLS == ["x"]


@pytest.mark.parametrize(("decision", "ran"), [("allow", ["x"]), ("deny", [])])
async def test_a_child_s_permission_prompt_is_answered_through_the_parent(
    decision: str, ran: list[str]
) -> None:
    model = ScriptedModel(
        [[delegate("Write 'x'.", ["write_note"])], [tool_call("write_note", {"note": "x"})], "done", "ok"]
    )
    agent = Agent(model=model, tools=[write_note], delegate=True)
    prompts: list[ev.PermissionRequired] = []

    def answer(event: ev.PermissionRequired) -> None:
        prompts.append(event)
        assert agent.resolve_permission(event.call_id, decision)  # type: ignore[arg-type]

    agent.on("permission_required", answer)
    seen = recorder(agent)
    await agent.run("go")

    (prompt,) = prompts
    assert prompt.name == "write_note" and len(prompt.via) == 1
    assert ran == CALLS
    (resolved,) = [e for e in seen if isinstance(e, ev.PermissionResolved)]
    assert resolved.via == prompt.via and resolved.decision == decision


async def test_a_child_s_question_reaches_the_parent_s_user() -> None:
    from ipyagent.agentlib.ask_tool import ask_user_tool

    model = ScriptedModel(
        [
            [delegate("Ask which colour.", ["ask_user"])],
            [tool_call("ask_user", {"question": "Which colour?", "choices": ["red", "blue"]})],
            "blue it is",
            "ok",
        ]
    )
    agent = Agent(model=model, tools=[ask_user_tool()], delegate=True)
    agent.on("ask_user_required", lambda e: agent.answer(e.question_id, "blue"))
    seen = recorder(agent)
    await agent.run("go")
    (answered,) = [e for e in seen if isinstance(e, ev.AskUserAnswered)]
    assert answered.answer == "blue" and answered.via
    assert [r.content for r in results(agent) if r.name == "delegate"] == ["blue it is"]


async def test_cancelling_the_parent_cancels_the_child() -> None:
    entered = asyncio.Event()

    @tool(read_only=True)
    async def slow() -> str:
        """Takes a minute."""
        entered.set()
        await asyncio.sleep(60)
        return "never"

    model = ScriptedModel([[delegate("Wait.", ["slow"])], [tool_call("slow")], "never", "after"])
    agent = Agent(model=model, tools=[slow], delegate=True)
    seen = recorder(agent)
    run = asyncio.ensure_future(agent.run("go"))
    await asyncio.wait_for(entered.wait(), 5)
    assert agent.cancel()
    result = await run

    assert result.status == "cancelled"
    ends = [(e.type, e.via) for e in seen if isinstance(e, ev.RunFinished | ev.RunFailed | ev.RunCancelled)]
    (child_call,) = [s.call_id for s in seen if isinstance(s, ev.SubagentStarted)]
    assert ends == [("run_cancelled", (child_call,)), ("run_cancelled", ())]
    (answer,) = [r for r in results(agent) if r.tool_call_id == child_call]
    assert answer.is_error and "Cancelled" in answer.content
    assert_valid_transcript(agent.messages)
    # No run is left running: neither the child's nor the parent's.
    runs = [t for t in asyncio.all_tasks() if "AgentRun.execute" in repr(t.get_coro()) and not t.done()]
    assert runs == []


async def test_the_child_s_usage_rolls_up_into_the_parent_s(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            [delegate("Look it up.", ["lookup"]), usage(input_tokens=100, output_tokens=10)],
            [tool_call("lookup", {"key": "a"}), usage(input_tokens=40, output_tokens=4)],
            [text("A"), usage(input_tokens=50, output_tokens=5)],
            [text("done"), usage(input_tokens=200, output_tokens=20)],
        ]
    )
    agent = Agent(model=model, tools=[lookup], delegate=True, session=tmp_path / "a.agent.jsonl")
    seen = recorder(agent)
    result = await agent.run("go")

    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.requests) == (390, 39, 4)
    assert (agent.usage.input_tokens, agent.usage.output_tokens) == (390, 39)
    # The parent's footer follows as the child spends.
    totals = [e.total.input_tokens for e in seen if isinstance(e, ev.UsageUpdated) and not e.via]
    assert totals == [100, 140, 190, 390]
    agent.close()
    # Both files count the child's requests: the child's its own, the parent's all of them.
    assert read_session(tmp_path / "a.agent.jsonl").usage.input_tokens == 390
    assert read_session(tmp_path / "a.agent.delegate-1.jsonl").usage.input_tokens == 90


async def test_the_child_spends_what_is_left_of_the_parent_s_budget() -> None:
    model = ScriptedModel(
        [
            [delegate("Look it up.", ["lookup"]), usage(input_tokens=600, output_tokens=10)],
            [tool_call("lookup", {"key": "a"}), usage(input_tokens=500, output_tokens=10)],
            "never reached",
        ]
    )
    agent = Agent(model=model, tools=[lookup], delegate=True, budget={"tokens": 1000})
    result = await agent.run("go")
    (answer,) = [r for r in results(agent) if r.name == "delegate"]
    assert answer.is_error and "stopped before it finished" in answer.content
    assert "budget of 390" in answer.content  # 1,000 less the parent's 610
    assert result.status == "exhausted"  # and the parent stops too: the child spent the rest
    assert len(model.requests) == 2


async def test_max_turns_of_a_child_are_bounded() -> None:
    model = ScriptedModel(
        [[delegate("Loop.", ["lookup"])], [tool_call("lookup", {"key": "a"})], "never", "ok"]
    )
    agent = Agent(model=model, tools=[lookup], delegate=Delegation(max_turns=1))
    await agent.run("go")
    (answer,) = [r for r in results(agent) if r.name == "delegate"]
    assert answer.is_error and "Stopped after 1 model turns" in answer.content


async def test_a_child_may_run_only_on_the_parent_s_model_or_a_listed_one() -> None:
    model = ScriptedModel([[delegate("Do it.", ["lookup"], model="openai/gpt-5")], "ok"])
    agent = Agent(model=model, tools=[lookup], delegate=True)
    await agent.run("go")
    (answer,) = results(agent)
    assert answer.is_error and "cannot run on openai/gpt-5" in answer.content
    assert "scripted/script" in answer.content
    # Naming the parent's own model is the default.
    model = ScriptedModel([[delegate("Do it.", ["lookup"], model="scripted/script")], "child", "ok"])
    agent = Agent(model=model, tools=[lookup], delegate=True)
    await agent.run("go")
    assert [r.content for r in results(agent)] == ["child"]


async def test_the_child_s_conversation_is_saved_beside_the_parent_s_linked_both_ways(tmp_path: Path) -> None:
    parent_file = tmp_path / "analysis.agent.jsonl"
    model = ScriptedModel(
        [[delegate("Look up a.", ["lookup"])], [tool_call("lookup", {"key": "a"})], "A", "done"]
    )
    agent = Agent(model=model, tools=[lookup], delegate=True, session=parent_file, notebook="analysis.ipynb")
    seen = recorder(agent)
    await agent.run("go")
    agent.close()

    child_file = tmp_path / "analysis.agent.delegate-1.jsonl"
    (started,) = [e for e in seen if isinstance(e, ev.SubagentStarted)]
    assert started.session == child_file.name
    parent = read_session(parent_file)
    assert parent.subagents == [
        {"call_id": started.call_id, "session": read_session(child_file).id, "file": child_file.name}
    ]
    child = read_session(child_file)
    assert child.parent == {"session": parent.id, "file": parent_file.name, "call_id": started.call_id}
    assert child.notebook == "analysis.ipynb"
    assert [m.role for m in child.messages] == ["user", "assistant", "user", "assistant"]
    assert child.messages[0].text == "Look up a."
    header = json.loads(child_file.read_text().splitlines()[0])
    assert header["parent"]["file"] == "analysis.agent.jsonl"

    # The child's conversation resumes as any other.
    resumed = Agent(model=ScriptedModel(["More."]), session=child_file)
    assert resumed.session is not None and resumed.session.parent == child.parent
    assert len(resumed.messages) == 4
    assert (await resumed.run("Anything else?")).text == "More."
    resumed.close()


async def test_each_delegation_gets_a_file_of_its_own(tmp_path: Path) -> None:
    model = ScriptedModel([[delegate("one", ["lookup"]), delegate("two", ["lookup"])], "1", "2", "ok"])
    agent = Agent(model=model, tools=[lookup], delegate=True, session=tmp_path / "a.agent.jsonl")
    await agent.run("go")
    agent.close()
    names = file_names(tmp_path, "a.agent.delegate-*.jsonl")
    assert names == ["a.agent.delegate-1.jsonl", "a.agent.delegate-2.jsonl"]
    tasks = {read_session(tmp_path / n).messages[0].text for n in names}
    assert tasks == {"one", "two"}
    assert sorted(r.content for r in results(agent)) == ["1", "2"]


async def test_a_parent_without_a_session_keeps_its_child_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    model = ScriptedModel([[delegate("x", ["lookup"])], "child", "ok"])
    agent = Agent(model=model, tools=[lookup], delegate=True)
    seen = recorder(agent)
    await agent.run("go")
    (started,) = [e for e in seen if isinstance(e, ev.SubagentStarted)]
    assert started.session is None
    assert file_names(tmp_path) == []


async def test_the_parent_s_stream_goes_on_past_the_child_s_end() -> None:
    model = ScriptedModel([[delegate("x", ["lookup"])], "child", "parent"])
    agent = Agent(model=model, tools=[lookup], delegate=True)
    events = [e async for e in agent.stream("go")]
    assert events[-1].type == "run_finished" and events[-1].via == ()
    assert any(e.type == "run_finished" and e.via for e in events)


async def test_delegate_is_offered_only_when_asked_for() -> None:
    model = ScriptedModel(["hi"])
    agent = Agent(model=model, tools=[lookup])
    await agent.run("go")
    assert tool_names(model.requests[0]) == ["lookup"]
    agent.delegate = True
    assert isinstance(agent.delegate, Delegation)
    agent.delegate = False
    assert agent.delegate is None


def test_bad_delegation_settings_say_what_to_pass() -> None:
    with pytest.raises(UserError, match="max_depth"):
        Delegation(max_depth=0)
    with pytest.raises(UserError, match="delegate=True"):
        Agent(delegate="yes")  # type: ignore[arg-type]


async def test_a_child_cancelled_as_it_starts_ends_cancelled() -> None:
    model = ScriptedModel([[delegate("x", ["lookup"])], "never", "never"])
    agent = Agent(model=model, tools=[lookup], delegate=True)
    seen = recorder(agent)
    agent.on("subagent_started", lambda e: agent.cancel())
    result = await agent.run("go")
    assert result.status == "cancelled"
    nested = [e.type for e in seen if e.via]
    assert nested[0] == "run_started" and nested[-1] == "run_cancelled"
    assert "run_finished" not in nested
    assert_valid_transcript(agent.messages)


async def test_a_delegating_run_records_and_replays_from_a_cassette(tmp_path: Path) -> None:
    from ipyagent.testing import ReplayModel

    cassette = tmp_path / "a.cassette.jsonl"
    script = ScriptedModel(
        [[delegate("Look up a.", ["lookup"])], [tool_call("lookup", {"key": "a"})], "A", "It is A."]
    )
    recorded = Agent(
        model=ReplayModel(script, cassette=cassette, mode="record"), tools=[lookup], delegate=True
    )
    assert (await recorded.run("What is a?")).text == "It is A."
    # Offline, with no model: the parent's and the child's requests are served in order.
    replayed = Agent(model=ReplayModel(cassette=cassette), tools=[lookup], delegate=True)
    seen = recorder(replayed)
    result = await replayed.run("What is a?")
    assert result.status == "completed" and result.text == "It is A."
    assert [e.content for e in seen if isinstance(e, ev.ToolResult) and e.via] == ["A"]
