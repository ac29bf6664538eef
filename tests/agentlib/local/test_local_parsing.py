"""The sans-IO parts of the local provider: tool calls found in text, prompts, the call schema."""

from __future__ import annotations

import json
import sys

import pytest

from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.messages import Message, TextBlock, ToolCallBlock, ToolResultBlock
from ipyagent.agentlib.model import ModelRequest, ModelSettings, ToolSpec
from ipyagent.agentlib.providers._local_llama import import_llama
from ipyagent.agentlib.providers.local import (
    ParsedCall,
    ToolTextParser,
    render_prompt,
    tool_call_schema,
)

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def parse(text: str, *, step: int | None = None, names: tuple[str, ...] = ("get_weather",)) -> list[object]:
    """Feed ``text`` whole, or ``step`` characters at a time, and merge adjacent text pieces."""
    parser = ToolTextParser(names)
    pieces: list[str | ParsedCall] = []
    chunks = [text] if step is None else [text[i : i + step] for i in range(0, len(text), step)]
    for chunk in chunks:
        pieces.extend(parser.feed(chunk))
    pieces.extend(parser.flush())
    merged: list[object] = []
    for piece in pieces:
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        else:
            merged.append(piece)
    return merged


CALL = ParsedCall("get_weather", '{"city": "Paris"}')


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello there.", ["Hello there."]),
        ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>', [CALL]),
        ('```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```', [CALL]),
        ('```\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n```', [CALL]),
        ('{"name": "get_weather", "arguments": {"city": "Paris"}}', [CALL]),
        (
            'Let me check.\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\n',
            ["Let me check.\n", CALL, "\n"],
        ),
        # Not calls: given back unchanged.
        ("```python\nprint('hi')\n```", ["```python\nprint('hi')\n```"]),
        (
            '```json\n{"name": "other_tool", "arguments": {}}\n```',
            ['```json\n{"name": "other_tool", "arguments": {}}\n```'],
        ),
        ('{"a": 1}', ['{"a": 1}']),
        ("Use `x < y` and 3 ` ticks", ["Use `x < y` and 3 ` ticks"]),
        # A tag cut off by the end of the reply still counts when its JSON is complete.
        ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}', [CALL]),
        ("<tool_call>\n{broken", ["<tool_call>\n{broken"]),
    ],
)
@pytest.mark.parametrize("step", [None, 1, 3, 7])
def test_tool_calls_in_text(text: str, expected: list[object], step: int | None) -> None:
    assert parse(text, step=step) == expected


def test_two_tagged_calls_and_double_encoded_arguments() -> None:
    text = (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Rome\\"}"}\n</tool_call>'
    )
    assert parse(text, step=5) == [CALL, "\n", ParsedCall("get_weather", '{"city": "Rome"}')]


def test_without_tools_everything_is_text() -> None:
    text = '```json\n{"name": "get_weather", "arguments": {}}\n```'
    assert parse(text, step=2, names=()) == [text]


def test_text_streams_without_waiting_for_the_end() -> None:
    parser = ToolTextParser(["get_weather"])
    assert parser.feed("Hello ") == ["Hello "]
    assert parser.feed("world `") == ["world "]  # a backtick might open a fence: held
    assert parser.feed("x`") == ["`x"]
    assert parser.flush() == ["`"]


@pytest.fixture
def jinja() -> None:
    pytest.importorskip("jinja2", reason="chat templates need jinja2 (pip install 'ipyagent[local]')")


def _qwen_like_template() -> str:
    return (
        "{% if tools %}TOOLS:{% for t in tools %}{{ t.function.name }}{{ t | tojson }}"
        "{% endfor %}\n{% endif %}"
        "{% for m in messages %}[{{ m.role }}]{{ m.content }}"
        "{% for c in m.tool_calls or [] %}CALL {{ c.function.name }} {{ c.function.arguments | tojson }}"
        "{% endfor %}\n{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"
    )


def _conversation() -> list[Message]:
    call = ToolCallBlock.from_raw(id="c1", name="get_weather", raw_arguments='{"city": "Paris"}')
    return [
        Message.user("Weather in Paris?"),
        Message(role="assistant", content=(TextBlock(text="Checking."), call)),
        Message(
            role="user",
            content=(ToolResultBlock(tool_call_id="c1", name="get_weather", content="boom", is_error=True),),
        ),
    ]


def test_render_with_a_template_that_knows_tools(jinja: None) -> None:
    request = ModelRequest(model="m", system="Be brief.", messages=_conversation(), tools=[WEATHER])
    prompt = render_prompt(_qwen_like_template(), request)
    assert prompt.startswith("TOOLS:get_weather{")
    assert '"description": "Weather in a city."' in prompt  # plain JSON, not HTML-escaped
    # (trim_blocks, as in Hugging Face's apply_chat_template, eats the newline after a block tag)
    assert (
        '[system]Be brief.[user]Weather in Paris?[assistant]Checking.CALL get_weather {"city": "Paris"}'
        in prompt
    )
    assert "[tool]Error: boom[assistant]" in prompt
    assert prompt.endswith("[assistant]")


def test_render_without_a_template_or_tool_support_uses_chatml_and_tags(jinja: None) -> None:
    request = ModelRequest(model="m", system="Be brief.", messages=_conversation(), tools=[WEATHER])
    prompt = render_prompt(None, request)
    assert prompt.startswith("<|im_start|>system\nBe brief.\n\n# Tools")
    assert json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}}) in prompt
    assert "<tool_response>\nError: boom\n</tool_response>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_render_passes_the_thinking_switch(jinja: None) -> None:
    template = "{% if enable_thinking is defined and not enable_thinking %}/no_think{% endif %}"
    request = ModelRequest(model="m", messages=[], settings=ModelSettings(thinking="none"))
    assert render_prompt(template, request) == "/no_think"


def test_call_schema_keeps_each_tools_definitions_apart() -> None:
    def spec(name: str) -> ToolSpec:
        return ToolSpec(
            name=name,
            description="",
            parameters={
                "type": "object",
                "properties": {"p": {"$ref": "#/$defs/Point"}},
                "$defs": {"Point": {"type": "object", "properties": {name: {"type": "integer"}}}},
            },
        )

    schema = tool_call_schema([spec("a"), spec("b")])
    assert set(schema["$defs"]) == {"t0-Point", "t1-Point"}
    first, second = schema["oneOf"]
    assert first["properties"]["arguments"]["properties"]["p"] == {"$ref": "#/$defs/t0-Point"}
    assert second["properties"]["name"] == {"const": "b"}


def test_missing_llama_cpp_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    with pytest.raises(UserError) as info:
        import_llama()
    assert "pip install 'ipyagent[local]'" in info.value.hint
    assert "-DGGML_NATIVE=OFF" in info.value.hint


def test_missing_xllamacpp_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from ipyagent.agentlib.providers._local_xllama import import_xllamacpp

    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    with pytest.raises(UserError) as info:
        import_xllamacpp()
    assert "pip install 'ipyagent[local]'" in info.value.hint
