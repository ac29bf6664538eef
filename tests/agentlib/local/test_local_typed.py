"""A typed answer on the local model: its JSON-schema grammar, checked on a tiny random-weight
GGUF (random weights, so whatever it writes is the grammar's doing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from ipyagent import Agent
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.model import ModelRequest, ModelSettings, TextChunk, ToolCallChunk, ToolSpec
from ipyagent.agentlib.output import output_spec
from ipyagent.agentlib.providers._local_grammar import tool_grammar, typed_answer_grammar
from ipyagent.agentlib.providers.local import LocalModel


class Mood(BaseModel):
    label: Literal["positive", "negative"]
    sure: bool


class Batch(BaseModel):
    moods: list[Mood]


SPEC = output_spec(Mood)
assert SPEC is not None
LOOKUP = ToolSpec(
    name="lookup",
    description="Look up.",
    parameters={"type": "object", "properties": {"key": {"enum": ["a", "b"]}}, "required": ["key"]},
)


def request(*, tools: list[ToolSpec] | None = None) -> ModelRequest:
    return ModelRequest(
        model="tiny",
        messages=[Message.user("How does this review feel?")],
        tools=tools or [],
        output_schema=SPEC.schema,
        settings=ModelSettings(max_tokens=80),
    )


def test_the_typed_answer_grammars_compile_with_and_without_tools(backend: str, check_grammar: Any) -> None:
    dialect = "lark" if backend == "xllamacpp" else "gbnf"
    nested = output_spec(list[Batch])  # definitions ($defs) in the answer and in a tool
    assert nested is not None
    tool = ToolSpec(
        name="nested",
        description="",
        parameters={
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Mood"}}},
            "$defs": {"Mood": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        },
    )
    for grammar in (
        typed_answer_grammar(nested.schema.json_schema, dialect),
        tool_grammar([tool], answer=nested.schema.json_schema, dialect=dialect),
        tool_grammar([tool, LOOKUP], answer=SPEC.schema.json_schema, dialect=dialect),
    ):
        check_grammar(grammar)
    combined = tool_grammar([LOOKUP], answer=SPEC.schema.json_schema, dialect=dialect)
    if dialect == "gbnf":
        assert combined.startswith("root ::= x-tool-calls | x-fenced-call | x-answer\n")
        assert "x-text" not in combined  # no free text: an answer is the schema's JSON
    else:
        assert "start: tool_calls | fenced_call | answer\n" in combined
        assert "TEXT" not in combined


async def test_with_no_tools_the_reply_is_json_of_the_schema(tiny_gguf: Path) -> None:
    for seed in (1, 2, 3):
        model = LocalModel(tiny_gguf, n_ctx=1024, seed=seed, temperature=1.0)
        events = [e async for e in model.stream(request())]
        text = "".join(e.text for e in events if isinstance(e, TextChunk))
        assert SPEC.read(text) == Mood.model_validate(json.loads(text))


async def test_with_tools_the_reply_is_a_call_or_json_of_the_schema(tiny_gguf: Path) -> None:
    for seed in (1, 2, 3, 4):
        model = LocalModel(tiny_gguf, n_ctx=1024, seed=seed, temperature=1.0)
        events = [e async for e in model.stream(request(tools=[LOOKUP]))]
        calls = [e for e in events if isinstance(e, ToolCallChunk)]
        text = "".join(e.text for e in events if isinstance(e, TextChunk))
        if calls:
            assert calls[0].name == "lookup"
        else:
            assert isinstance(SPEC.read(text), Mood)


async def test_after_tool_results_a_typed_answer_replaces_the_envelope(tiny_gguf: Path) -> None:
    # Past successful results the local model offers no tool ("none"): the reply is the schema's
    # JSON, not the {"answer": "..."} envelope of a text answer.
    from ipyagent.agentlib.messages import ToolCallBlock, ToolResultBlock

    call = ToolCallBlock(id="c1", name="lookup", arguments={"key": "a"}, raw_arguments='{"key": "a"}')
    messages = [
        Message.user("How does this review feel?"),
        Message(role="assistant", content=(call,)),
        Message(role="user", content=(ToolResultBlock(tool_call_id="c1", name="lookup", content="great"),)),
    ]
    model = LocalModel(tiny_gguf, n_ctx=1024, seed=5, temperature=1.0)
    req = request(tools=[LOOKUP]).model_copy(update={"messages": messages})
    events = [e async for e in model.stream(req)]
    text = "".join(e.text for e in events if isinstance(e, TextChunk))
    assert isinstance(SPEC.read(text), Mood)


async def test_a_typed_run_on_the_local_model(tiny_gguf: Path) -> None:
    agent = Agent(model=LocalModel(tiny_gguf, n_ctx=2048, seed=7), max_tokens=80)
    result = await agent.run("How does this review feel?", output_type=Mood)
    assert result.status == "completed", repr(result)
    assert isinstance(result.output, Mood)
