"""Parsing a network read as one batch (``feed_many``, what the adapters do) gives exactly what
parsing its events one by one and merging them with ``coalesce`` gives — including through the
OpenAI parser's fast path for plain text chunks — and the two pieces that make batches cheap:
``EventBatch`` and ``parse_json``."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wire_transcripts import (
    ANTHROPIC_REDACTED_PAUSE,
    ANTHROPIC_STREAM,
    OLLAMA_STREAM,
    OPENAI_CONTENT_FILTER,
    OPENAI_PARALLEL,
    OPENAI_REASONING_CONTENT,
    OPENAI_REFUSAL,
    OPENAI_THINK_TAGS,
    OPENAI_TOOL_CALL,
    OPENROUTER_REASONING,
    VLLM_CONTINUOUS_USAGE,
    chunk,
    ctx,
    run_parser,
    sse,
    summarize,
)

from ipyagent.agentlib.errors import AgentError
from ipyagent.agentlib.model import (
    EventBatch,
    ProviderEvent,
    ResponseEnd,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    coalesce,
)
from ipyagent.agentlib.providers._http import parse_json
from ipyagent.agentlib.providers._sse import NDJSONDecoder, SSEDecoder
from ipyagent.agentlib.providers.anthropic import AnthropicStreamParser
from ipyagent.agentlib.providers.ollama import OllamaStreamParser
from ipyagent.agentlib.providers.openai import OpenAIDialect, OpenAIStreamParser

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reads(parser: Any, pieces: list[bytes], *, batched: bool) -> list[Any]:
    """What each read (and the end) produces, or the error that ended the stream."""
    decoder: Any = NDJSONDecoder() if isinstance(parser, OllamaStreamParser) else SSEDecoder()
    out: list[Any] = []
    try:
        for items in itertools.chain((decoder.feed(piece) for piece in pieces), [None]):
            items = decoder.close() if items is None else items
            if batched:
                out.append(parser.feed_many(items))
            else:
                out.append(coalesce([event for item in items for event in parser.feed(item)]))
        out.append(parser.finish())
    except AgentError as exc:
        out.append((type(exc).__name__, exc.info.code, str(exc)))
    return out


def split(data: bytes, points: list[int]) -> list[bytes]:
    bounds = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def assert_batching_changes_nothing(make: Any, data: bytes, points: list[int]) -> None:
    pieces = split(data, points)
    assert reads(make(), pieces, batched=True) == reads(make(), pieces, batched=False)


# -- every parser, on the reference transcripts --------------------------------------------------

TRANSCRIPTS = [
    (lambda: OpenAIStreamParser(ctx()), data)
    for data in (
        OPENAI_TOOL_CALL,
        OPENAI_PARALLEL,
        OPENAI_REASONING_CONTENT,
        OPENROUTER_REASONING,
        OPENAI_THINK_TAGS,
        OPENAI_REFUSAL,
        OPENAI_CONTENT_FILTER,
        VLLM_CONTINUOUS_USAGE,
    )
] + [
    (lambda: AnthropicStreamParser(ctx()), ANTHROPIC_STREAM),
    (lambda: AnthropicStreamParser(ctx()), ANTHROPIC_REDACTED_PAUSE),
    (lambda: OllamaStreamParser(ctx()), OLLAMA_STREAM),
]


@FAST
@given(st.sampled_from(TRANSCRIPTS), st.lists(st.integers(min_value=0), max_size=40))
def test_reference_transcripts_batch_like_one_by_one(case: tuple[Any, bytes], points: list[int]) -> None:
    make, data = case
    assert_batching_changes_nothing(make, data, points)


# -- OpenAI: random streams mixing everything the fast path must leave to the general one ------

TEXT = st.lists(
    st.sampled_from(["a", "é", " ", "\n", "<think>", "</think>", "<", "/", '"', "\u2028", "x"]), max_size=6
).map("".join)


def tool_call(index: int, first: bool, arguments: str) -> dict[str, Any]:
    if first:
        return {"tool_calls": [{"index": index, "id": f"call_{index}", "function": {"name": "f"}}]}
    return {"tool_calls": [{"index": index, "function": {"arguments": arguments}}]}


CALL = st.builds(tool_call, st.integers(0, 1), st.booleans(), TEXT)
DELTA = st.one_of(
    TEXT.map(lambda t: {"content": t}),
    TEXT.map(lambda t: {"content": t}),
    TEXT.map(lambda t: {"role": "assistant", "content": t}),
    TEXT.map(lambda t: {"content": t, "refusal": None}),
    TEXT.map(lambda t: {"reasoning_content": t}),
    TEXT.map(lambda t: {"reasoning": t, "content": None}),
    TEXT.map(lambda t: {"thoughts": t}),
    TEXT.map(lambda t: {"refusal": t}),
    CALL,
    st.just({}),
    st.just(None),
)
USAGE = st.sampled_from([None, "absent", {"prompt_tokens": 3, "completion_tokens": 1}])


@st.composite
def openai_chunk(draw: st.DrawFn) -> Any:
    # Mostly not "stop": only the last reason counts, and losing a "stop" would go unseen.
    payload = chunk(draw(DELTA), draw(st.sampled_from([None, None, "", "stop", "length", "content_filter"])))
    choice = payload["choices"][0]
    choice["index"] = draw(st.sampled_from([0, 0, 0, 1, None, False]))
    if draw(st.booleans()):
        choice["logprobs"] = None
    if draw(st.integers(0, 5)) == 0:  # n > 1: a second choice, which is not ours
        payload["choices"].append({"index": 1, "delta": {"content": "other"}, "finish_reason": None})
    usage = draw(USAGE)
    if usage != "absent":
        payload["usage"] = usage
    if draw(st.integers(0, 10)) == 0:
        payload["id"] = f"chatcmpl-{draw(st.integers(0, 9))}"
    return payload


DIALECTS = [
    OpenAIDialect(),
    OpenAIDialect(think_tags=False),
    OpenAIDialect(reasoning_field="thoughts"),
    OpenAIDialect(reasoning_field="content", think_tags=False),  # absurd, but the keys must not lie
]


@FAST
@given(
    st.sampled_from(DIALECTS),
    st.lists(openai_chunk(), max_size=25),
    st.booleans(),
    st.lists(st.integers(min_value=0), max_size=30),
)
def test_openai_fast_path_changes_nothing(
    dialect: OpenAIDialect, payloads: list[Any], done: bool, points: list[int]
) -> None:
    data = b": keep-alive\n\n" + sse(*payloads, done=done)
    assert_batching_changes_nothing(lambda: OpenAIStreamParser(ctx(), dialect=dialect), data, points)


# -- OpenAI: the fast path is taken, and keeps order --------------------------------------------


def count_general_path(parser: OpenAIStreamParser, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    seen: list[object] = []
    general = parser._chunk

    def spy(payload: dict[str, Any], batch: EventBatch) -> None:
        seen.append(payload)
        general(payload, batch)

    monkeypatch.setattr(parser, "_chunk", spy)
    return seen


def test_plain_text_chunks_skip_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = OpenAIStreamParser(ctx())
    general = count_general_path(parser, monkeypatch)
    texts = [chunk({"content": f" t{i}"}, usage=None) for i in range(100)]
    events = run_parser(parser, sse(chunk({"role": "assistant", "content": ""}), *texts, chunk({}, "stop")))
    # The empty first chunk, the first text (the <think> check settles on it) and the finish.
    assert len(general) == 3
    assert events == [
        TextChunk(text="".join(f" t{i}" for i in range(100))),
        ResponseEnd(finish_reason="stop", response_id="chatcmpl-1"),
    ]


def test_one_read_keeps_the_order_of_text_thinking_and_calls() -> None:
    data = sse(
        chunk({"content": "a"}),
        chunk({"content": "b"}),
        chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}),
        chunk({"content": "c"}),
        chunk({"reasoning_content": "hm"}),
        chunk({"reasoning_content": "m"}),
        chunk({"content": "d"}),
        chunk({"refusal": "no"}),
        chunk({"content": "e"}, "stop"),
    )
    events = OpenAIStreamParser(ctx(), dialect=OpenAIDialect(think_tags=False)).feed_many(
        SSEDecoder().feed(data)
    )
    assert events == [
        TextChunk(text="ab"),
        ToolCallChunk(key=0, id="c", name="f", arguments="{}"),
        TextChunk(text="c"),
        ThinkingChunk(text="hmm"),
        TextChunk(text="dnoe"),
    ]


@pytest.mark.parametrize(
    ("payload", "text"),
    [
        (chunk({"content": "x"}, usage={"prompt_tokens": 1, "completion_tokens": 2}), "x"),
        (chunk({"content": "x"}, "length"), "x"),
        (chunk({"content": "x", "refusal": None}), "x"),
        (chunk({"content": "x", "reasoning": "r"}), "x"),
        ({"choices": [{"index": 1, "delta": {"content": "x"}}]}, ""),
        ({"choices": [{"delta": {"content": "x"}}]}, "x"),  # no index: the first choice
        ({"choices": [{"index": 0, "delta": {"content": 5}}]}, ""),
        ({"choices": [{"index": 0, "delta": ["content"]}]}, ""),
        ({"choices": {"index": 0}}, ""),
        ({"choices": ["x"]}, ""),
        ({"choices": "x"}, ""),
    ],
)
def test_chunks_that_only_look_plain(payload: dict[str, Any], text: str) -> None:
    data = sse(chunk({"content": "start "}), payload, chunk({"content": " end"}))
    batched = run_parser(OpenAIStreamParser(ctx()), data)
    assert batched == coalesce(run_parser(OpenAIStreamParser(ctx()), data, one_by_one=True))
    assert summarize(batched).text == f"start {text} end"


# -- the building blocks -----------------------------------------------------------------------


def test_event_batch_merges_runs_in_order() -> None:
    batch = EventBatch()
    batch.text("a")
    batch.text("b")
    batch.pieces([("thinking", "t"), ("thinking", "u"), ("text", "v")])
    batch.add(ToolCallChunk(key=0, id="c", name="f"))
    batch.add(ToolCallChunk(key=0, arguments="{}"))
    batch.thinking("x", key=1)
    batch.add(ThinkingChunk(signature="sig", key=1))
    batch.text("c", key=2)
    batch.text("d", key=3)
    assert batch.take() == [
        TextChunk(text="ab"),
        ThinkingChunk(text="tu"),
        TextChunk(text="v"),
        ToolCallChunk(key=0, id="c", name="f", arguments="{}"),
        ThinkingChunk(text="x", signature="sig", key=1),
        TextChunk(text="c", key=2),
        TextChunk(text="d", key=3),
    ]
    assert batch.take() == []


def test_event_batch_is_coalesce_of_the_same_events() -> None:
    events: list[ProviderEvent] = [
        TextChunk(text="a", key=0),
        TextChunk(text="b", key=0),
        ThinkingChunk(redacted="r", key=1),
        ThinkingChunk(text="c", key=1),
        TextChunk(text="d"),
    ]
    batch = EventBatch()
    for event in events:
        batch.add(event)
    assert batch.take() == coalesce(events)


@pytest.mark.parametrize(
    "text",
    ['{"a": [1, 2.5, {"b": null}]}', ' {"a": 1}\n', "[]", '"s"', "NaN", "1e400", "{}x", '{"a":1}{"b":2}', "",
     "[DONE]", "\ufeff{}", '{"a": "\\ud800"}', '{"a": "unterminated', "[" * 100_000],
)  # fmt: skip
def test_parse_json_is_json_loads(text: str) -> None:
    def outcome(loads: Any) -> Any:
        try:
            return ("value", loads(text))
        except (ValueError, RecursionError) as exc:
            return (type(exc), str(exc))

    assert repr(outcome(parse_json)) == repr(outcome(json.loads))  # repr: NaN != NaN
