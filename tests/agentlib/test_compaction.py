"""Compaction: where to cut, the summary request, the fallback, and when the agent compacts."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from helpers import assert_valid_transcript
from hypothesis import given
from hypothesis import strategies as st

from ipyagent import Agent, RetryPolicy, tool
from ipyagent.agentlib.compaction import (
    SUMMARY_PREFIX,
    SUMMARY_SYSTEM_PROMPT,
    compact,
    fallback_summary,
    render_transcript,
    split_point,
)
from ipyagent.agentlib.errors import ContextOverflowError, ProviderUnavailable
from ipyagent.agentlib.events import AgentEvent
from ipyagent.agentlib.messages import Message, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock
from ipyagent.agentlib.sessions import read_session
from ipyagent.testing import ScriptedModel, error, tool_call

FAST = RetryPolicy(attempts=2, base_delay=0.001, max_delay=0.001)


def say(text: str) -> Message:
    return Message(role="assistant", content=(TextBlock(text=text),))


def round_trip(n: int, calls: int) -> list[Message]:
    ids = [f"c{n}_{k}" for k in range(calls)]
    return [
        Message(
            role="assistant",
            content=tuple(ToolCallBlock.from_raw(id=i, name="lookup", raw_arguments="{}") for i in ids),
        ),
        Message(
            role="user",
            content=tuple(ToolResultBlock(tool_call_id=i, name="lookup", content="r") for i in ids),
        ),
    ]


@st.composite
def transcripts(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    for turn in range(draw(st.integers(0, 6))):
        messages.append(Message.user(f"prompt {turn}"))
        for r in range(draw(st.integers(0, 3))):
            messages += round_trip(turn * 10 + r, draw(st.integers(1, 3)))
        messages.append(say(f"answer {turn}"))
    return messages


def history(turns: int, size: int) -> list[Message]:
    out: list[Message] = []
    for i in range(turns):
        out += [Message.user(f"question {i} " + "q" * size), say(f"answer {i} " + "a" * size)]
    return out


def collect(agent: Agent) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    agent.on("*", events.append)
    return events


@given(transcripts(), st.integers(0, 10))
def test_the_cut_keeps_at_least_keep_messages_and_never_splits_a_call(
    messages: list[Message], keep: int
) -> None:
    cut = split_point(messages, keep)
    assert 0 <= cut <= max(0, len(messages) - keep)
    if cut:
        assert not messages[cut - 1].tool_calls  # the kept part starts at a boundary
        # The latest such boundary: every later candidate would split a call from its result.
        later = range(cut + 1, len(messages) - keep + 1)
        assert all(messages[c - 1].tool_calls for c in later)
        assert_valid_transcript([Message.user(SUMMARY_PREFIX), *messages[cut:]])


async def test_compact_summarizes_the_older_part_with_a_plain_request() -> None:
    messages = history(5, 10)  # 10 messages
    messages[1] = Message(
        role="assistant", content=(ThinkingBlock(text="secret reasoning"), TextBlock(text="a0"))
    )
    model = ScriptedModel(["The user asked five questions."])
    result = await compact(messages, model, keep=6, focus="the questions")
    assert result.dropped == 4 and result.kept == 6 and not result.fallback
    assert result.messages[1:] == messages[4:]
    summary = result.messages[0]
    assert summary == result.summary and summary.role == "user"
    assert summary.text.startswith(SUMMARY_PREFIX) and "The user asked five questions." in summary.text
    assert result.summary_hash == hashlib.sha256(summary.text.encode()).hexdigest()[:16]
    assert result.usage.requests == 1
    (request,) = model.requests
    assert request.system == SUMMARY_SYSTEM_PROMPT
    assert list(request.tools) == []
    (prompt,) = request.messages
    assert "question 1" in prompt.text and "question 2" not in prompt.text  # only the older part
    assert "secret reasoning" not in prompt.text
    assert "focus especially on: the questions" in prompt.text


async def test_a_failing_model_falls_back_to_a_deterministic_digest() -> None:
    messages = [Message.user("load sales.csv"), *round_trip(1, 2), say("Loaded 10 rows."), *history(3, 5)]
    failing = [error(ProviderUnavailable("overloaded")), error(ProviderUnavailable("still overloaded"))]
    model = ScriptedModel(failing)
    result = await compact(messages, model, keep=2, retry=FAST)
    assert result.fallback and result.error is not None and result.error.code == "provider_unavailable"
    assert len(model.requests) == 2  # retried once (attempts=2), then fell back
    text = result.messages[0].text
    assert "load sales.csv" in text and "lookup ×2" in text and "question 1" in text
    assert "question 2" not in text  # kept verbatim, not digested
    again = await compact(messages, ScriptedModel(["   "]), keep=2)  # an empty reply falls back too
    assert again.fallback and again.messages[0].text == text
    assert fallback_summary(messages[:-2]) in text


async def test_nothing_to_compact_makes_no_request() -> None:
    model = ScriptedModel([])
    result = await compact(history(2, 5), model, keep=6)
    assert result.dropped == 0 and result.summary is None and model.requests == []
    # An earlier summary followed only by kept messages is not summarized again.
    summary = Message.user(f"{SUMMARY_PREFIX} old")
    assert (await compact([summary, *history(3, 5)], model, keep=6)).dropped == 0


def test_the_rendered_transcript_cuts_long_blocks_and_old_messages() -> None:
    huge = Message(
        role="user", content=(ToolResultBlock(tool_call_id="c", name="dump", content="z" * 100_000),)
    )
    text = render_transcript([huge])
    assert len(text) < 6_000 and "characters cut" in text
    summary = Message.user(f"{SUMMARY_PREFIX} earlier facts")
    many = [summary, *history(50, 200)]
    text = render_transcript(many, budget=3_000)
    assert "earlier facts" in text  # an earlier summary is always kept
    assert "question 49" in text and "question 0 " not in text
    assert "older messages left out" in text


async def test_the_agent_compacts_when_the_context_crosses_the_threshold_once_per_run() -> None:
    @tool(read_only=True)
    def lookup() -> str:
        """Look something up."""
        return "r" * 4_000

    model = ScriptedModel(
        ["SUMMARY", tool_call("lookup"), tool_call("lookup", {}), "done"],
        context_limit=2_000,
    )
    agent = Agent(model=model, tools=[lookup], messages=history(6, 1_000), compact_keep=2)
    events = collect(agent)
    result = await agent.run("and now?")
    assert result.status == "completed" and result.text == "done"
    started = [e for e in events if e.type == "compaction_started"]
    assert [(e.reason, e.messages) for e in started] == [("threshold", 13)]  # once, though still large
    assert model.requests[0].system == SUMMARY_SYSTEM_PROMPT
    # A one-off request: a cache write (1.25x at Anthropic) would never be read back.
    assert model.requests[0].settings.prompt_cache == "off"
    assert model.requests[1].settings.prompt_cache == "5m"  # the conversation's own
    first_turn = model.requests[1].messages
    assert first_turn[0].text.startswith(SUMMARY_PREFIX) and "SUMMARY" in first_turn[0].text
    assert first_turn[-1].text == "and now?"
    assert len(model.requests) == 4
    completed = next(e for e in events if e.type == "compaction_completed")
    assert completed.dropped == 11 and completed.kept == 2 and not completed.fallback
    assert_valid_transcript(agent.messages)


async def test_no_threshold_compaction_when_the_window_is_unknown_or_disabled() -> None:
    for model, threshold in ((ScriptedModel(["ok"]), 0.85), (ScriptedModel(["ok"], context_limit=100), None)):
        agent = Agent(model=model, messages=history(6, 1_000), compact_threshold=threshold)
        events = collect(agent)
        assert (await agent.run("hi")).text == "ok"
        assert not [e for e in events if e.type.startswith("compaction")]


async def test_an_overflow_compacts_and_retries_the_turn_once() -> None:
    model = ScriptedModel([error(ContextOverflowError("prompt is too long")), "SUMMARY", "answer"])
    agent = Agent(model=model, messages=history(6, 50), compact_keep=2)
    events = collect(agent)
    result = await agent.run("question?")
    assert result.status == "completed" and result.text == "answer"
    kinds = [e.type for e in events]
    assert kinds.index("request_error") < kinds.index("compaction_started") < kinds.index("run_finished")
    request_error = next(e for e in events if e.type == "request_error")
    assert request_error.will_retry
    assert next(e for e in events if e.type == "compaction_started").reason == "overflow"
    assert model.requests[2].messages[0].text.startswith(SUMMARY_PREFIX)

    # A second overflow in the same run is not compacted again, though there would be something
    # to compact by then (the tool round): the run fails with it.
    @tool(read_only=True)
    def lookup() -> str:
        """Look something up."""
        return "r"

    overflow = error(ContextOverflowError("too long"))
    model = ScriptedModel([overflow, "S", tool_call("lookup"), overflow, "never"])
    agent = Agent(model=model, tools=[lookup], messages=history(6, 50), compact_keep=2)
    result = await agent.run("question?")
    assert result.status == "failed" and result.error is not None and result.error.code == "context_overflow"
    assert len(model.requests) == 4
    assert_valid_transcript(agent.messages)


async def test_manual_compaction_is_recorded_and_resumes_compacted(tmp_path: Path) -> None:
    path = tmp_path / "a.agent.jsonl"
    model = ScriptedModel([*(f"answer {i}" for i in range(5)), "SUMMARY OF FIVE"])
    agent = Agent(model=model, session=path)
    for i in range(5):
        await agent.run(f"question {i}")
    events = collect(agent)
    result = await agent.compact(focus="the answers")
    assert result.dropped == 4 and len(agent.messages) == 7
    assert str(result) == "Compacted 4 messages into a summary; the last 6 are kept verbatim."
    assert "focus especially on: the answers" in model.requests[-1].messages[0].text
    assert [e.type for e in events] == ["compaction_started", "compaction_completed"]
    agent.close()
    marker = [json.loads(line) for line in path.read_text().splitlines() if '"compaction"' in line]
    assert len(marker) == 1
    assert marker[0]["dropped"] == 4 and marker[0]["summary_hash"] == result.summary_hash
    assert marker[0]["reason"] == "manual"
    state = read_session(path)
    assert state.messages == agent.messages
    assert state.usage == agent.usage  # the summary request is counted and recorded too
