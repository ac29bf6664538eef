"""``Agent(session=...)``: resume, settings, fork, reset, read-only views, repair, write failures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers import assert_valid_transcript

from ipyagent import Agent, tool
from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.events import AgentEvent
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.sessions import INTERRUPTED_RESULT, Session, SessionWarning, read_session
from ipyagent.testing import ScriptedModel, tool_call


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_a_conversation_resumes_where_it_left_off(tmp_path: Path) -> None:
    path = tmp_path / "analysis.agent.jsonl"
    first = Agent(
        model=ScriptedModel([tool_call("add", {"a": 2, "b": 3}), "5"]),
        tools=[add],
        session=path,
        notebook="analysis.ipynb",
        thinking="high",
    )
    assert (await first.run("2 + 3?")).text == "5"
    assert first.session is not None and first.session.path == path
    session_id = first.session.id
    transcript, usage = first.messages, first.usage
    first.close()

    model = ScriptedModel(["I remember: 5"])
    second = Agent(model=model, tools=[add], session=path)
    assert second.session is not None and second.session.id == session_id
    assert second.messages == transcript
    assert second.usage == usage
    assert second.settings.thinking == "high"  # resumed, not passed again
    assert (await second.run("what was it?")).text == "I remember: 5"
    # The model saw the whole earlier conversation.
    assert model.requests[0].messages[: len(transcript)] == transcript
    assert model.requests[0].settings.thinking == "high"
    second.close()
    header = records(path)[0]
    assert header["notebook"] == "analysis.ipynb"
    assert header["model"] == "scripted/script"
    assert len(read_session(path).messages) == len(transcript) + 2


async def test_the_model_comes_from_the_session_when_not_given(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    Agent(model="openai/gpt-4.1", session=path).close()
    resumed = Agent(session=path)
    assert resumed.model == "openai/gpt-4.1"
    resumed.close()


async def test_settings_changes_are_recorded_and_resumed(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    agent = Agent(model="openai/gpt-4.1", session=path)
    agent.model = "anthropic/claude-sonnet-4-5"
    agent.settings = agent.settings.model_copy(update={"thinking": "low", "temperature": 0.2})
    agent.close()
    changes = [r for r in records(path) if r["type"] == "settings"]
    assert changes[-1] == {
        "type": "settings",
        "model": "anthropic/claude-sonnet-4-5",
        "thinking": "low",
        "max_tokens": None,
        "temperature": 0.2,
    }
    resumed = Agent(session=path)
    assert resumed.model == "anthropic/claude-sonnet-4-5"
    assert resumed.settings.thinking == "low" and resumed.settings.temperature == 0.2
    resumed.close()
    # Reopening without changes writes nothing new.
    before = path.read_bytes()
    Agent(session=path).close()
    assert path.read_bytes() == before


async def test_nothing_of_the_provider_is_written(tmp_path: Path) -> None:
    class SecretModel(ScriptedModel):
        api_key = "sk-SECRET-123"
        headers: ClassVar[dict[str, str]] = {"Authorization": "Bearer sk-SECRET-123"}

    path = tmp_path / "a.agent.jsonl"
    agent = Agent(model=SecretModel(["hi"]), session=path)
    await agent.run("hello")
    agent.close()
    assert "SECRET" not in path.read_text()
    assert set(records(path)[0]) == {
        "type",
        "format",
        "version",
        "id",
        "created",
        "model",
        "notebook",
        "forked_from",
    }


async def test_two_agents_cannot_write_one_file_but_a_read_only_view_can_look(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    writer = Agent(model=ScriptedModel(["one"]), session=path)
    await writer.run("hi")
    with pytest.raises(UserError, match="already open") as info:
        Agent(model=ScriptedModel([]), session=path)
    assert "close the other one" in info.value.hint.lower()
    viewer = Agent(model=ScriptedModel(["never"]), session=Session.open(path, read_only=True))
    assert [m.text for m in viewer.messages] == ["hi", "one"]
    with pytest.raises(UserError, match="read-only") as info:
        await viewer.run("may I?")
    assert "fork" in info.value.hint
    # A fork of the view continues in a new file.
    fork = viewer.fork(session=tmp_path / "b.agent.jsonl")
    fork.model = ScriptedModel(["two"])
    assert (await fork.run("go on")).text == "two"
    writer.close()
    fork.close()


async def test_fork_starts_a_new_file_from_a_prefix(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    agent = Agent(
        model=ScriptedModel([tool_call("add", {"a": 1, "b": 1}), "2", "again"]),
        tools=[add],
        session=path,
        max_turns=7,
    )
    await agent.run("1 + 1?")  # user, assistant(call), user(result), assistant
    await agent.run("more")
    assert len(agent.messages) == 6
    for bad in (2, -1, 7):  # 2 separates the call (message 1) from its result (message 2)
        with pytest.raises(UserError) as info:
            agent.fork(at=bad, session=tmp_path / f"bad{bad}.agent.jsonl")
        assert info.value.code == "invalid_fork_point"
        assert not (tmp_path / f"bad{bad}.agent.jsonl").exists()
    fork = agent.fork(at=4, session=tmp_path / "fork.agent.jsonl")
    assert fork.messages == agent.messages[:4]
    assert fork.max_turns == 7 and [t.name for t in fork.tools] == ["add"]
    assert fork.session is not None and agent.session is not None
    assert fork.session.id != agent.session.id
    header = records(tmp_path / "fork.agent.jsonl")[0]
    assert header["forked_from"] == {"session": agent.session.id, "at": 4}
    fork.close()
    assert read_session(tmp_path / "fork.agent.jsonl").messages == agent.messages[:4]
    assert len(read_session(path).messages) == 6  # the original is untouched
    with pytest.raises(UserError, match="already exists"):
        agent.fork(at=4, session=tmp_path / "fork.agent.jsonl")
    in_memory = agent.fork(at=0)
    assert in_memory.messages == [] and in_memory.session is None
    agent.close()


async def test_reset_records_a_fresh_start_and_keeps_the_history(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    agent = Agent(model=ScriptedModel(["first", "second"]), session=path)
    await agent.run("one")
    agent.reset()
    assert agent.messages == []
    await agent.run("two")
    agent.close()
    resumed = Agent(model=ScriptedModel([]), session=path)
    assert [m.text for m in resumed.messages] == ["two", "second"]
    resumed.close()
    kinds = [r["type"] for r in records(path)]
    assert "reset" in kinds
    assert kinds.count("message") == 4  # the earlier turn stays on file


async def test_a_crash_mid_tool_is_repaired_on_resume_and_the_next_run_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    entered: list[str] = []

    class Crash(BaseException):
        """Stands in for the kernel dying while a tool runs."""

    @tool(read_only=True)
    def fragile() -> str:
        """Crashes."""
        entered.append("fragile")
        raise Crash

    agent = Agent(model=ScriptedModel([tool_call("fragile")]), tools=[fragile], session=path)
    with pytest.raises(Crash):
        await agent.run("go")
    assert entered == ["fragile"]
    # The process "died": the lock goes with its descriptor. The file ends with the tool call.
    assert agent.session is not None
    agent.session.close()
    assert records(path)[-1]["message"]["content"][0]["type"] == "tool_call"

    model = ScriptedModel(["recovered"])
    with pytest.warns(SessionWarning, match="no result"):
        resumed = Agent(model=model, tools=[fragile], session=path)
    assert resumed.messages[-1].tool_results[0].content == INTERRUPTED_RESULT
    events: list[AgentEvent] = []
    resumed.on("run_warning", events.append)
    assert (await resumed.run("what happened?")).text == "recovered"
    assert any(e.type == "run_warning" and "mid-tool" in e.message for e in events)
    assert_valid_transcript(list(model.requests[0].messages))
    resumed.close()
    assert [r["type"] for r in records(path)].count("repair") == 1


async def test_a_disk_error_becomes_a_warning_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = Agent(model=ScriptedModel(["fine"]), session=tmp_path / "a.agent.jsonl")

    def full(self: Session, line: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Session, "_write", full)
    warnings: list[AgentEvent] = []
    agent.on("run_warning", warnings.append)
    result = await agent.run("hi")
    assert result.status == "completed" and result.text == "fine"
    assert [w.code for w in warnings if w.type == "run_warning"] == [
        "session_write_failed"
    ]  # once, not per message
    agent.close()


async def test_messages_and_a_session_with_a_conversation_conflict(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    seeded = Agent(model=ScriptedModel([]), session=path, messages=[Message.user("seed")])
    seeded.close()
    assert [m.text for m in read_session(path).messages] == ["seed"]
    with pytest.raises(UserError, match="already holds a conversation"):
        Agent(model=ScriptedModel([]), session=path, messages=[Message.user("other")])
    Agent(model=ScriptedModel([]), session=path).close()  # the failed attempt released the lock


async def test_a_closed_agent_refuses_to_run(tmp_path: Path) -> None:
    agent = Agent(model=ScriptedModel(["x"]), session=tmp_path / "a.agent.jsonl")
    agent.close()
    with pytest.raises(UserError, match="closed"):
        await agent.run("hi")


async def test_usage_of_every_request_is_on_file(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"

    agent = Agent(model=ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "3"]), tools=[add], session=path)
    await agent.run("sum")
    agent.close()
    on_file = [r for r in records(path) if r["type"] == "usage"]
    assert len(on_file) == 2
    assert sum(r["usage"]["input_tokens"] for r in on_file) == agent.usage.input_tokens


async def test_a_damaged_session_opens_says_what_it_skipped_and_sends_a_valid_transcript(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.agent.jsonl"
    first = Agent(model=ScriptedModel([tool_call("add", {"a": 2, "b": 3}), "5"]), tools=[add], session=path)
    await first.run("2 + 3?")
    first.close()
    lines = path.read_bytes().splitlines(keepends=True)
    call_line = next(i for i, line in enumerate(lines) if b'"tool_call"' in line)
    lines[call_line] = b"garbage\n"  # the tool call is lost; its result is still on file
    path.write_bytes(b"".join(lines))

    model = ScriptedModel(["ok"])
    with pytest.warns(SessionWarning) as caught:
        resumed = Agent(model=model, tools=[add], session=path)
    assert len(caught) == 2  # the line skipped, and the result it leaves without a call
    events: list[AgentEvent] = []
    resumed.on("run_warning", events.append)
    assert (await resumed.run("and now?")).text == "ok"
    shown = " ".join(e.message for e in events if e.type == "run_warning")
    assert f"line {call_line + 1}" in shown and "result" in shown
    assert_valid_transcript(list(model.requests[0].messages))
    resumed.close()
