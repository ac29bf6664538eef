"""The answer envelope of the turn after tool results, the nudge toward a call when the user
mentions a tool, and the request's tool_choice as a grammar: a call-only reply when it requires
a call, an answer when it rules calls out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ipyagent.agentlib.messages import Message, TextBlock, ToolCallBlock, ToolResultBlock
from ipyagent.agentlib.model import (
    ModelRequest,
    ModelSettings,
    ProviderEvent,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    ToolSpec,
)
from ipyagent.agentlib.providers._local_grammar import (
    allowed_calls,
    answer_grammar,
    tool_grammar,
)
from ipyagent.agentlib.providers._local_parse import AnswerDecoder, ReplyReader
from ipyagent.agentlib.providers.local import LocalModel

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def decode(body: str, step: int) -> tuple[str, bool]:
    decoder = AnswerDecoder()
    text = "".join(decoder.feed(body[i : i + step]) for i in range(0, len(body), step))
    return text + decoder.flush(), decoder.done


@pytest.mark.parametrize("step", [1, 2, 5, 100])
@pytest.mark.parametrize(
    "answer",
    ["It is 17°C in Paris.", 'Say "hi"\\ back', "Line one\nline two\ttab", "emoji 😀 and é", "\x1f"],
)
def test_the_decoder_gives_back_the_string(answer: str, step: int) -> None:
    body = json.dumps(answer)[1:] + "}"  # as generated after the opener: no opening quote
    assert decode(body, step) == (answer, True)
    assert decode(json.dumps(answer, ensure_ascii=False)[1:], step) == (answer, True)


def test_the_decoder_streams_and_ignores_what_follows_the_string() -> None:
    decoder = AnswerDecoder()
    assert decoder.feed("Hello") == "Hello"
    assert decoder.feed(" wor\\") == " wor"  # an escape cut short is held
    assert decoder.feed('nld"}\n') == "\nld"
    assert decoder.done
    assert decoder.feed("more") == ""


def test_an_unfinished_or_malformed_string_comes_back_as_written() -> None:
    assert decode("cut short \\u00", 3) == ("cut short \\u00", False)
    assert decode('bad \\x escape"', 100) == ("bad \\x escape", True)
    assert decode('lone \\ud83d high"', 4) == ("lone \ufffd high", True)


def events(reader: ReplyReader, pieces: list[str]) -> list[ProviderEvent]:
    out = [e for p in pieces for e in reader.feed(p)]
    return out + reader.flush()


def test_the_reader_reads_an_envelope_as_text() -> None:
    reader = ReplyReader(["get_weather"], envelope=True)
    got = events(reader, ["Paris: 17", "°C\\n```json\\n{}\\n```", '"}'])
    assert "".join(e.text for e in got if isinstance(e, TextChunk)) == "Paris: 17°C\n```json\n{}\n```"
    assert not [e for e in got if not isinstance(e, TextChunk)] and reader.calls == 0
    assert reader.finished  # the envelope closed: the rest of the reply can be skipped


def test_a_call_written_again_ends_the_reply() -> None:
    reader = ReplyReader(["get_weather"])
    oslo = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
    rome = oslo.replace("Oslo", "Rome")
    got = events(reader, [oslo, rome, oslo, "then more text", rome])
    assert [e.arguments for e in got if isinstance(e, ToolCallChunk)] == [
        '{"city": "Oslo"}',
        '{"city": "Rome"}',
    ]
    assert reader.finished and reader.calls == 2
    assert "then more text" not in "".join(e.text for e in got if isinstance(e, TextChunk))


def test_whitespace_after_a_call_is_not_text_unless_text_follows() -> None:
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    got = events(ReplyReader(["get_weather"]), [call, "\n", " \n"])
    assert [type(e) for e in got] == [ToolCallChunk]
    got = events(ReplyReader(["get_weather"]), [call, "\n", "\nDone."])
    assert got[1:] == [TextChunk(text="\n\nDone.")]


def test_the_reader_keeps_order_of_thinking_text_and_calls() -> None:
    reader = ReplyReader(["get_weather"])
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    got = events(reader, ["<think>hm</think>", "Checking. ", call])
    assert got == [
        ThinkingChunk(text="hm"),
        TextChunk(text="Checking. "),
        ToolCallChunk(key=0, name="get_weather", arguments='{"city": "Oslo"}'),
    ]
    assert reader.calls == 1


PYTHON = ToolSpec(
    name="run_python",
    description="Run code.",
    parameters={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
)


def test_the_adapter_reads_the_choice_not_the_words() -> None:
    # "Call get_weather" is the loop's business (tool_choice.py): under "auto" the local model
    # offers what it offers any message, text included.
    told = ModelRequest(
        model="m", messages=[Message.user('Call get_weather for "Oslo".')], tools=[WEATHER, PYTHON]
    )
    asked = told.model_copy(update={"messages": [Message.user("Weather in Oslo?")]})
    assert allowed_calls(told) == allowed_calls(asked) == ([WEATHER, PYTHON], True)


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", (["get_weather", "run_python"], True)),
        ("none", ([], True)),
        ("required", (["get_weather", "run_python"], False)),
        (("run_python",), (["run_python"], False)),
    ],
)
def test_allowed_calls_follow_the_tool_choice(choice: str | tuple[str, ...], expected: object) -> None:
    request = ModelRequest(
        model="m", messages=[Message.user("Hi")], tools=[WEATHER, PYTHON], tool_choice=choice
    )
    offered, text = allowed_calls(request)
    assert ([t.name for t in offered], text) == expected


def test_after_results_holds_back_tools_only_under_auto() -> None:
    call = ToolCallBlock.from_raw(id="c1", name="get_weather", raw_arguments='{"city": "Oslo"}')
    messages = [
        Message.user("Weather in Oslo?"),
        Message(role="assistant", content=(call,)),
        Message(role="user", content=(ToolResultBlock(tool_call_id="c1", name="get_weather", content="17"),)),
    ]
    request = ModelRequest(model="m", messages=messages, tools=[WEATHER, PYTHON])
    assert allowed_calls(request, "none") == ([], True)  # the answer envelope
    assert allowed_calls(request, "others") == ([PYTHON], True)
    required = request.model_copy(update={"tool_choice": "required"})
    assert allowed_calls(required, "none") == ([WEATHER, PYTHON], False)  # the loop's choice wins


async def test_told_to_call_a_tool_the_reply_is_that_call(tiny_gguf: Path) -> None:
    # Random weights would almost never open a call on their own: the grammar makes them.
    city = {"type": "string", "enum": ["Oslo", "Rome"]}  # short arguments, closed within budget
    weather = WEATHER.model_copy(update={"parameters": {**WEATHER.parameters, "properties": {"city": city}}})
    model = LocalModel(tiny_gguf, n_ctx=2048, seed=5)  # room for two tools in the prompt
    request = ModelRequest(
        model="tiny",
        messages=[Message.user('Call get_weather with city "Oslo".')],
        tools=[weather, PYTHON],
        settings=ModelSettings(max_tokens=200, temperature=1.0),
        tool_choice=("get_weather",),  # what the loop's default policy makes of this message
    )
    got = [e async for e in model.stream(request)]
    assert isinstance(got[0], ToolCallChunk)
    [call] = [e for e in got if isinstance(e, ToolCallChunk)]  # one tool named: one call
    assert call.name == "get_weather"
    assert json.loads(call.arguments)["city"] in ("Oslo", "Rome")


@pytest.mark.parametrize("expected", [True, False])
async def test_the_loops_hint_leans_the_reply_toward_a_call(tiny_gguf: Path, expected: bool) -> None:
    # The same message either way: the adapter follows the request's hint, not the user's words.
    city = {"type": "string", "enum": ["Oslo", "Rome"]}
    weather = WEATHER.model_copy(update={"parameters": {**WEATHER.parameters, "properties": {"city": city}}})
    model = LocalModel(tiny_gguf, n_ctx=1024, seed=5, tool_call_bias=50.0)
    request = ModelRequest(
        model="tiny",
        messages=[Message.user("Is get_weather right for Oslo?")],
        tools=[weather],
        settings=ModelSettings(max_tokens=200, temperature=1.0),
        expects_tool_call=expected,
    )
    got = [e async for e in model.stream(request)]
    assert isinstance(got[0], ToolCallChunk) is expected


def test_the_call_only_grammar_compiles(backend: str, check_grammar: Any) -> None:
    dialect = "lark" if backend == "xllamacpp" else "gbnf"
    grammar = tool_grammar([WEATHER], text=False, dialect=dialect)
    two = tool_grammar([WEATHER, PYTHON], text=False, dialect=dialect)
    if dialect == "gbnf":
        assert grammar.startswith("root ::= x-tool-call\n")  # one call, not a chain of them
        assert two.startswith('root ::= x-tool-call ("\\n" x-tool-call)?\n')
    else:
        assert "start: tool_call\n" in grammar
        assert 'start: tool_call ("\\n" tool_call)?\n' in two
    check_grammar(grammar)
    check_grammar(two)


def test_the_answer_grammar_compiles(check_grammar: Any) -> None:
    check_grammar(answer_grammar())  # GBNF on both backends


async def test_after_tool_results_the_reply_is_text_only(tiny_gguf: Path) -> None:
    call = ToolCallBlock.from_raw(id="c1", name="get_weather", raw_arguments='{"city": "Oslo"}')
    result = "17°C"
    messages = [
        Message.user("Weather in Oslo?"),
        Message(role="assistant", content=(TextBlock(text="Checking."), call)),
        Message(
            role="user", content=(ToolResultBlock(tool_call_id="c1", name="get_weather", content=result),)
        ),
    ]
    model = LocalModel(tiny_gguf, n_ctx=1024, seed=3)
    request = ModelRequest(
        model="tiny",
        messages=messages,
        tools=[WEATHER],
        settings=ModelSettings(max_tokens=30, temperature=1.0),
    )
    got = [e async for e in model.stream(request)]
    assert not [e for e in got if isinstance(e, ToolCallChunk)]
    text = "".join(e.text for e in got if isinstance(e, TextChunk))
    assert text and '{"answer"' not in text


async def test_tool_choice_none_leaves_only_an_answer(tiny_gguf: Path) -> None:
    model = LocalModel(tiny_gguf, n_ctx=1024, seed=3, tool_call_bias=50.0)  # a lean it must not get
    request = ModelRequest(
        model="tiny",
        messages=[Message.user("Is get_weather right for Oslo?")],
        tools=[WEATHER],
        settings=ModelSettings(max_tokens=30, temperature=1.0),
        tool_choice="none",
        expects_tool_call=True,  # a hook that set it against the choice: the choice wins
    )
    got = [e async for e in model.stream(request)]
    assert not [e for e in got if isinstance(e, ToolCallChunk)]
    assert "".join(e.text for e in got if isinstance(e, TextChunk))


async def test_tool_choice_required_makes_the_reply_a_call(tiny_gguf: Path) -> None:
    city = {"type": "string", "enum": ["Oslo", "Rome"]}
    weather = WEATHER.model_copy(update={"parameters": {**WEATHER.parameters, "properties": {"city": city}}})
    model = LocalModel(tiny_gguf, n_ctx=1024, seed=5)
    request = ModelRequest(
        model="tiny",
        messages=[Message.user("Hello")],  # names no tool: only the choice asks for a call
        tools=[weather],
        settings=ModelSettings(max_tokens=200, temperature=1.0),
        tool_choice="required",
    )
    got = [e async for e in model.stream(request)]
    assert isinstance(got[0], ToolCallChunk)
    assert [e.name for e in got if isinstance(e, ToolCallChunk)] == ["get_weather"]
