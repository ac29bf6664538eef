"""Events and messages survive a trip through JSON unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from ipyagent.agentlib import events as ev
from ipyagent.agentlib.errors import ErrorInfo, RateLimitError
from ipyagent.agentlib.events import EVENT_ADAPTER, EVENT_TYPES, AgentEvent
from ipyagent.agentlib.messages import (
    MESSAGE_ADAPTER,
    MESSAGES_ADAPTER,
    ContentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ipyagent.agentlib.usage import ContextWindow, Usage

USAGE = Usage(
    input_tokens=1200,
    output_tokens=80,
    cache_read_tokens=1000,
    cache_write_tokens=5,
    reasoning_tokens=30,
    cost=0.0123,
    requests=2,
)
ERROR = RateLimitError("Slow down.", hint="Wait a minute.", status_code=429).info
BLOCKS: list[ContentBlock] = [
    TextBlock(text="Hello — ünïcode ✓\n"),
    ThinkingBlock(text="Let me think.", signature="sig=="),
    ThinkingBlock(redacted="b64blob"),
    ToolCallBlock(
        id="call_1", name="add", arguments={"a": 1, "b": [2.5, None, {"c": "d"}]}, raw_arguments="…"
    ),
    ToolCallBlock(id="call_2", name="add", arguments=None, raw_arguments='{"a": '),
    ToolResultBlock(tool_call_id="call_1", name="add", content="3", is_error=True),
    ImageBlock(media_type="image/jpeg", data="aGk="),
    ImageBlock(url="https://example.org/cat.png"),
]
ASSISTANT = Message(
    role="assistant", content=tuple(BLOCKS[:5]), model="openai/gpt", finish_reason="tool_calls"
)
USER = Message.user("hi", BLOCKS[5], BLOCKS[6], BLOCKS[7])

EXAMPLES: list[AgentEvent] = [
    ev.RunStarted(run_id="run_1", model="scripted/test", prompt="go"),
    ev.RunFinished(run_id="run_1", status="exhausted", text="partial", usage=USAGE, message="max_turns=3"),
    ev.RunFailed(run_id="run_1", error=ERROR, usage=USAGE),
    ev.RunCancelled(run_id="run_1", usage=Usage()),
    ev.RequestStarted(turn=2, attempt=3, model="m"),
    ev.RequestDone(turn=2, finish_reason="length", usage=USAGE, duration=1.25),
    ev.RequestError(turn=2, attempt=1, error=ERROR, will_retry=True, retry_in=0.5),
    ev.TextStart(index=1),
    ev.TextDelta(index=1, delta="Hel"),
    ev.TextEnd(index=1, text="Hello"),
    ev.ThinkingStart(index=0),
    ev.ThinkingDelta(index=0, delta="hm"),
    ev.ThinkingEnd(index=0, text="hmm", duration=0.75),
    ev.ToolCallStart(index=2, call_id="call_1", name="add"),
    ev.ToolCallDelta(call_id="call_1", delta='{"a"'),
    ev.ToolCallEnd(call_id="call_1", name="add", arguments=None, raw_arguments='{"a"'),
    ev.ToolExecuting(call_id="call_1", name="add", arguments={"a": 1, "nested": {"x": [True]}}),
    ev.ToolResult(
        call_id="call_1",
        name="add",
        content="3",
        is_error=True,
        display={"text/html": "<b>3</b>"},
        duration=0.1,
    ),
    ev.PermissionRequired(call_id="call_1", name="rm", arguments={"path": "/tmp/x"}, description="Delete."),
    ev.PermissionResolved(call_id="call_1", decision="always", reason="trusted"),
    ev.AskUserRequired(question_id="q1", question="Which?", choices=["a", "b"]),
    ev.AskUserAnswered(question_id="q1", answer=None),
    ev.RunWarning(code="slow", message="Slow.", hint="Be patient."),
    ev.BlockedByPolicy(
        target="tool_call",
        policy="no_orders",
        why="block",
        message="Orders need approval.",
        metadata={"rule": "r1", "count": 2, "ratio": 0.5, "strict": True, "note": None},
        call_id="call_1",
        tool="place_order",
    ),
    ev.UsageUpdated(request=USAGE, total=USAGE + USAGE, context=ContextWindow(used=1200, limit=8000)),
    ev.MessageCommitted(message=ASSISTANT),
    ev.AttachmentSent(label="notebook context", text="<notebook-context>\n…\n</notebook-context>", tokens=9),
    ev.CompactionStarted(reason="overflow", messages=40),
    ev.CompactionCompleted(dropped=30, summary="Earlier: setup.", fallback=True),
    ev.MapProgress(
        total=10, done=4, failed=1, resumed=2, running=3, usage=Usage(input_tokens=5), elapsed=1.5
    ),
    ev.SubagentStarted(
        call_id="call_1",
        task="Count the rows.",
        tools=["read_file"],
        model="m",
        session="a.agent.delegate-1.jsonl",
        via=("call_0",),
    ),
]


def test_every_event_type_has_an_example() -> None:
    assert {type(e) for e in EXAMPLES} == set(EVENT_TYPES.values())
    assert len(EXAMPLES) == len(EVENT_TYPES)


def test_every_event_class_in_the_module_is_in_the_union() -> None:
    defined = {
        cls
        for cls in vars(ev).values()
        if isinstance(cls, type)
        and issubclass(cls, BaseModel)
        and cls.__module__ == ev.__name__
        and "type" in cls.model_fields
    }
    assert defined == set(EVENT_TYPES.values())


def test_event_types_are_keyed_by_their_type_literal() -> None:
    for name, cls in EVENT_TYPES.items():
        assert cls.model_fields["type"].default == name


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: type(e).__name__)
def test_events_round_trip_through_json(event: AgentEvent) -> None:
    data = EVENT_ADAPTER.dump_json(event)
    back = EVENT_ADAPTER.validate_json(data)
    assert type(back) is type(event)
    assert back == event
    assert json.loads(data)["type"] == event.type
    # And through plain JSON-compatible Python (what a session file or a comm message carries).
    assert EVENT_ADAPTER.validate_python(json.loads(data)) == event


def test_an_unknown_event_type_is_rejected() -> None:
    with pytest.raises(ValidationError):
        EVENT_ADAPTER.validate_python({"type": "text_explode", "index": 0})


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.type)
def test_content_blocks_round_trip_inside_a_message(block: ContentBlock) -> None:
    message = Message(role="user", content=(block,))
    back = MESSAGE_ADAPTER.validate_json(MESSAGE_ADAPTER.dump_json(message))
    assert back == message
    assert type(back.content[0]) is type(block)


def test_a_transcript_round_trips() -> None:
    transcript = [USER, ASSISTANT, Message(role="assistant", content=(), interrupted=True)]
    back = MESSAGES_ADAPTER.validate_json(MESSAGES_ADAPTER.dump_json(transcript))
    assert back == transcript
    assert [m.id for m in back] == [m.id for m in transcript]
    assert back[1].created == ASSISTANT.created


def test_error_info_round_trips_inside_an_event() -> None:
    event = EVENT_ADAPTER.validate_json(
        EVENT_ADAPTER.dump_json(ev.RunFailed(run_id="r", error=ERROR, usage=USAGE))
    )
    assert isinstance(event, ev.RunFailed)
    assert event.error == ErrorInfo(
        code="rate_limited",
        layer="provider",
        retryable=True,
        message="Slow down.",
        hint="Wait a minute.",
        status_code=429,
    )


# -- generated messages --------------------------------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | finite | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(), json_values, max_size=4)
optional_text = st.none() | st.text()

blocks: st.SearchStrategy[ContentBlock] = st.one_of(
    st.builds(TextBlock, text=st.text()),
    st.builds(ThinkingBlock, text=st.text(), signature=optional_text, redacted=optional_text),
    st.builds(
        ToolCallBlock,
        id=st.text(min_size=1),
        name=st.text(min_size=1),
        arguments=st.none() | json_objects,
        raw_arguments=st.text(),
    ),
    st.builds(
        ToolResultBlock, tool_call_id=st.text(), name=st.text(), content=st.text(), is_error=st.booleans()
    ),
    st.builds(ImageBlock, media_type=st.text(), data=optional_text, url=optional_text),
)
messages = st.builds(
    Message,
    role=st.sampled_from(["user", "assistant"]),
    content=st.lists(blocks, max_size=5).map(tuple),
    id=st.text(),
    created=finite,
    model=optional_text,
    finish_reason=st.none()
    | st.sampled_from(["stop", "length", "tool_calls", "content_filter", "refusal", "error", "cancelled"]),
    interrupted=st.booleans(),
)


@given(message=messages)
def test_generated_messages_round_trip(message: Message) -> None:
    assert MESSAGE_ADAPTER.validate_json(MESSAGE_ADAPTER.dump_json(message)) == message


@given(arguments=json_objects)
def test_generated_tool_arguments_round_trip_in_events(arguments: dict[str, Any]) -> None:
    event = ev.ToolExecuting(call_id="c", name="n", arguments=arguments)
    assert EVENT_ADAPTER.validate_json(EVENT_ADAPTER.dump_json(event)) == event
