"""PartsAssembler: provider chunks in, public events and one assistant message out."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ipyagent.agentlib.errors import ProtocolError
from ipyagent.agentlib.events import (
    AgentEvent,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from ipyagent.agentlib.messages import TextBlock, ThinkingBlock, ToolCallBlock
from ipyagent.agentlib.model import (
    ProviderEvent,
    ResponseEnd,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageReport,
)
from ipyagent.agentlib.parts import PartsAssembler
from ipyagent.agentlib.usage import Usage


def counter_ids() -> PartsAssembler:
    numbers = itertools.count(1)
    return PartsAssembler(make_id=lambda: f"gen_{next(numbers)}")


def run(assembler: PartsAssembler, chunks: Iterable[ProviderEvent]) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    for chunk in chunks:
        events += assembler.feed(chunk)
    return events + assembler.finish()


def without_durations(events: list[AgentEvent]) -> list[AgentEvent]:
    return [e.model_copy(update={"duration": 0.0}) if isinstance(e, ThinkingEnd) else e for e in events]


# -- text and thinking ---------------------------------------------------------------------------


def test_text_chunks_extend_one_block() -> None:
    asm = PartsAssembler()
    events = run(asm, [TextChunk(text="Hel"), TextChunk(text=""), TextChunk(text="lo")])
    assert events == [
        TextStart(index=0),
        TextDelta(index=0, delta="Hel"),
        TextDelta(index=0, delta="lo"),
        TextEnd(index=0, text="Hello"),
    ]
    message = asm.message(model="m")
    assert message.role == "assistant"
    assert message.content == (TextBlock(text="Hello"),)
    assert message.model == "m"
    assert message.finish_reason == "stop"


def test_thinking_then_text_are_two_blocks_with_their_own_indices() -> None:
    asm = PartsAssembler()
    events = run(asm, [ThinkingChunk(text="hmm"), ThinkingChunk(text="..."), TextChunk(text="Yes.")])
    assert without_durations(events) == [
        ThinkingStart(index=0),
        ThinkingDelta(index=0, delta="hmm"),
        ThinkingDelta(index=0, delta="..."),
        ThinkingEnd(index=0, text="hmm...", duration=0.0),
        TextStart(index=1),
        TextDelta(index=1, delta="Yes."),
        TextEnd(index=1, text="Yes."),
    ]
    ends = [e for e in events if isinstance(e, ThinkingEnd)]
    assert ends[0].duration >= 0
    assert asm.message(model="m").content == (ThinkingBlock(text="hmm..."), TextBlock(text="Yes."))


def test_a_new_key_starts_a_new_block() -> None:
    asm = PartsAssembler()
    events = run(asm, [TextChunk(text="a", key=0), TextChunk(text="b", key=0), TextChunk(text="c", key=2)])
    assert events == [
        TextStart(index=0),
        TextDelta(index=0, delta="a"),
        TextDelta(index=0, delta="b"),
        TextEnd(index=0, text="ab"),
        TextStart(index=1),
        TextDelta(index=1, delta="c"),
        TextEnd(index=1, text="c"),
    ]
    assert asm.message(model="m").content == (TextBlock(text="ab"), TextBlock(text="c"))


def test_a_chunk_without_a_key_continues_the_current_block() -> None:
    # TextChunk's contract: "``None`` continues the current one".
    asm = PartsAssembler()
    run(asm, [TextChunk(text="a", key=3), TextChunk(text="b")])
    assert asm.message(model="m").content == (TextBlock(text="ab"),)


def test_thinking_signatures_accumulate() -> None:
    asm = PartsAssembler()
    events = run(
        asm,
        [ThinkingChunk(text="plan"), ThinkingChunk(signature="sig-"), ThinkingChunk(signature="part2")],
    )
    assert [type(e) for e in events] == [ThinkingStart, ThinkingDelta, ThinkingEnd]
    assert asm.message(model="m").content == (ThinkingBlock(text="plan", signature="sig-part2"),)


def test_redacted_thinking_is_its_own_block_without_deltas() -> None:
    asm = PartsAssembler()
    events = run(asm, [ThinkingChunk(text="visible"), ThinkingChunk(redacted="opaque-blob")])
    assert [(type(e), getattr(e, "index", None)) for e in events] == [
        (ThinkingStart, 0),
        (ThinkingDelta, 0),
        (ThinkingEnd, 0),
        (ThinkingStart, 1),
        (ThinkingEnd, 1),
    ]
    assert asm.message(model="m").content == (
        ThinkingBlock(text="visible"),
        ThinkingBlock(text="", redacted="opaque-blob"),
    )


@given(text=st.text(min_size=1), cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=20))
def test_any_split_of_a_text_gives_one_block_whose_deltas_concatenate_to_it(
    text: str, cuts: list[int]
) -> None:
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces = [text[a:b] for a, b in itertools.pairwise([0, *points, len(text)])]
    asm = PartsAssembler()
    events = run(asm, [TextChunk(text=piece) for piece in pieces])
    assert "".join(e.delta for e in events if isinstance(e, TextDelta)) == text
    assert [e for e in events if isinstance(e, TextStart)] == [TextStart(index=0)]
    assert events[-1] == TextEnd(index=0, text=text)
    assert asm.message(model="m").content == (TextBlock(text=text),)


# -- tool calls ----------------------------------------------------------------------------------


def test_interleaved_tool_calls_are_assembled_by_key() -> None:
    asm = counter_ids()
    events = run(
        asm,
        [
            TextChunk(text="Let me look."),
            ToolCallChunk(key=0, id="call_a", name="search", arguments='{"q": '),
            ToolCallChunk(key=1, id="call_b", name="fetch", arguments=""),
            ToolCallChunk(key=0, arguments='"cats"}'),
            ToolCallChunk(key=1, arguments='{"url": "u"}'),
            ResponseEnd(finish_reason="tool_calls"),
        ],
    )
    assert events[3:] == [
        ToolCallStart(index=1, call_id="call_a", name="search"),
        ToolCallDelta(call_id="call_a", delta='{"q": '),
        ToolCallStart(index=2, call_id="call_b", name="fetch"),
        ToolCallDelta(call_id="call_a", delta='"cats"}'),
        ToolCallDelta(call_id="call_b", delta='{"url": "u"}'),
        ToolCallEnd(call_id="call_a", name="search", arguments={"q": "cats"}, raw_arguments='{"q": "cats"}'),
        ToolCallEnd(call_id="call_b", name="fetch", arguments={"url": "u"}, raw_arguments='{"url": "u"}'),
    ]
    assert events[2] == TextEnd(index=0, text="Let me look.")  # the first call closed the text
    message = asm.message(model="m")
    assert message.finish_reason == "tool_calls"
    assert message.tool_calls == [
        ToolCallBlock(id="call_a", name="search", arguments={"q": "cats"}, raw_arguments='{"q": "cats"}'),
        ToolCallBlock(id="call_b", name="fetch", arguments={"url": "u"}, raw_arguments='{"url": "u"}'),
    ]


def test_a_call_is_announced_when_its_name_arrives_after_some_arguments() -> None:
    asm = counter_ids()
    early = asm.feed(ToolCallChunk(key="k", arguments='{"a"'))
    assert early == []
    assert asm.feed(ToolCallChunk(key="k", arguments=": 1")) == []
    assert asm.feed(ToolCallChunk(key="k", id="c1", name="add", arguments=", ")) == [
        ToolCallStart(index=0, call_id="c1", name="add"),
        ToolCallDelta(call_id="c1", delta='{"a": 1, '),
    ]
    assert asm.feed(ToolCallChunk(key="k", arguments='"b": 2}')) == [
        ToolCallDelta(call_id="c1", delta='"b": 2}')
    ]
    assert asm.finish() == [
        ToolCallEnd(call_id="c1", name="add", arguments={"a": 1, "b": 2}, raw_arguments='{"a": 1, "b": 2}')
    ]


def test_a_call_that_never_gets_a_name_is_a_protocol_error() -> None:
    asm = PartsAssembler()
    asm.feed(ToolCallChunk(key=0, id="c1", arguments="{}"))
    with pytest.raises(ProtocolError) as info:
        asm.finish()
    assert info.value.code == "protocol_error"
    assert info.value.info.layer == "provider"
    assert "without a name" in str(info.value)


def test_a_call_without_arguments_has_empty_arguments() -> None:
    asm = counter_ids()
    events = run(asm, [ToolCallChunk(key=0, id="c", name="now")])
    assert events == [
        ToolCallStart(index=0, call_id="c", name="now"),
        ToolCallEnd(call_id="c", name="now", arguments={}, raw_arguments=""),
    ]


def test_missing_ids_are_generated() -> None:
    asm = counter_ids()
    events = run(asm, [ToolCallChunk(key=0, name="a"), ToolCallChunk(key=1, name="b")])
    assert [e.call_id for e in events if isinstance(e, ToolCallStart)] == ["gen_1", "gen_2"]


def test_an_id_already_taken_in_the_conversation_is_replaced() -> None:
    numbers = itertools.count(1)
    asm = PartsAssembler(taken_ids={"call_1", "gen_1"}, make_id=lambda: f"gen_{next(numbers)}")
    events = run(asm, [ToolCallChunk(key=0, id="call_1", name="a", arguments="{}")])
    assert events[0] == ToolCallStart(index=0, call_id="gen_2", name="a")  # gen_1 was taken too
    assert asm.message(model="m").tool_calls[0].id == "gen_2"


def test_the_same_id_twice_in_one_response_gets_two_distinct_ids() -> None:
    asm = PartsAssembler()  # the default id factory
    run(asm, [ToolCallChunk(key=0, id="dup", name="a"), ToolCallChunk(key=1, id="dup", name="b")])
    ids = [call.id for call in asm.message(model="m").tool_calls]
    assert ids[0] == "dup"
    assert ids[1] != "dup"
    assert ids[1].startswith("call_")


def test_an_id_on_a_later_fragment_does_not_rename_an_announced_call() -> None:
    asm = counter_ids()
    events = run(asm, [ToolCallChunk(key=0, name="a"), ToolCallChunk(key=0, id="late", arguments="{}")])
    assert {e.call_id for e in events if isinstance(e, ToolCallStart | ToolCallEnd)} == {"gen_1"}


def test_malformed_json_arguments_keep_the_raw_text() -> None:
    asm = counter_ids()
    events = run(asm, [ToolCallChunk(key=0, id="c", name="f", arguments='{"x": 1')])
    assert events[-1] == ToolCallEnd(call_id="c", name="f", arguments=None, raw_arguments='{"x": 1')
    assert asm.message(model="m").tool_calls[0].arguments is None


def test_json_that_is_not_an_object_is_malformed_too() -> None:
    asm = counter_ids()
    events = run(asm, [ToolCallChunk(key=0, id="c", name="f", arguments="[1, 2]")])
    assert events[-1] == ToolCallEnd(call_id="c", name="f", arguments=None, raw_arguments="[1, 2]")


def test_an_interrupted_message_drops_tool_calls_and_is_cancelled() -> None:
    asm = counter_ids()
    for chunk in [TextChunk(text="Running"), ToolCallChunk(key=0, id="c", name="f", arguments='{"x"')]:
        asm.feed(chunk)
    message = asm.message(model="m", interrupted=True)
    assert message.content == (TextBlock(text="Running"),)
    assert message.finish_reason == "cancelled"
    assert message.interrupted is True
    assert asm.message(model="m").tool_calls  # not interrupted: the call is kept


def test_text_around_a_dropped_call_is_one_block() -> None:
    asm = counter_ids()
    chunks = [
        TextChunk(text="Let me "),
        ToolCallChunk(key=0, id="c", name="f", arguments='{"x"'),
        TextChunk(text="check "),
        ToolCallChunk(key=1, id="d", name="f", arguments="{"),
        TextChunk(text="first."),
    ]
    for chunk in chunks:
        asm.feed(chunk)
    assert asm.message(model="m", interrupted=True).content == (TextBlock(text="Let me check first."),)
    assert len(asm.message(model="m").content) == 5  # not interrupted: every part stays


# -- bookkeeping ---------------------------------------------------------------------------------


def test_usage_reports_replace_each_other() -> None:
    asm = PartsAssembler()
    asm.feed(UsageReport(usage=Usage(input_tokens=100, output_tokens=1), context_limit=8000))
    asm.feed(UsageReport(usage=Usage(input_tokens=100, output_tokens=40)))
    assert asm.usage == Usage(input_tokens=100, output_tokens=40)
    assert asm.context_limit == 8000  # a report without a limit keeps the known one


def test_response_end_sets_finish_reason() -> None:
    asm = PartsAssembler()
    assert asm.has_output is False
    run(asm, [TextChunk(text="cut"), ResponseEnd(finish_reason="length", response_id="resp_1")])
    assert asm.has_output is True
    assert asm.finish_reason == "length"
    assert asm.message(model="m").finish_reason == "length"


def test_usage_and_end_chunks_emit_no_events() -> None:
    asm = PartsAssembler()
    assert asm.feed(UsageReport(usage=Usage(output_tokens=3))) == []
    assert asm.feed(ResponseEnd()) == []
    assert asm.finish() == []
    assert asm.has_output is False
    assert asm.message(model="m").content == ()
