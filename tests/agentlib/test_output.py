"""Typed answers: ``agent.run(..., output_type=...)`` validates the final answer, asks again with
the problems when it is invalid, and fails with a structured error when the retries run out."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from ipyagent import Agent, AgentRunFailed, tool
from ipyagent.agentlib.errors import OutputValidationError
from ipyagent.agentlib.model import ModelRequest
from ipyagent.agentlib.output import output_spec
from ipyagent.testing import ReplayModel, ScriptedModel, tool_call


class Ticket(BaseModel):
    """A support ticket, classified."""

    category: Literal["billing", "bug", "other"]
    urgency: int = Field(ge=1, le=5)


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Row(TypedDict):
    name: str
    count: int


async def test_a_valid_answer_becomes_the_typed_output() -> None:
    model = ScriptedModel(['{"category": "bug", "urgency": 4}'])
    result = await Agent(model=model).run("The app crashes on start.", output_type=Ticket)
    assert result.ok
    assert result.output == Ticket(category="bug", urgency=4)
    request = model.requests[0]
    assert request.output_schema is not None
    assert request.output_schema.name == "final_result"
    assert request.output_schema.json_schema["properties"]["category"]["enum"] == ["billing", "bug", "other"]
    assert request.output_schema.description == "A support ticket, classified."
    # The system prompt says how to answer, schema included.
    assert "only a JSON object" in request.system
    assert '"urgency"' in request.system


async def test_an_invalid_answer_is_shown_its_problems_and_asked_again() -> None:
    model = ScriptedModel(['{"category": "feature", "urgency": 9}', '{"category": "other", "urgency": 2}'])
    agent = Agent(model=model)
    warnings: list[str] = []
    agent.on("run_warning", lambda e: warnings.append(e.code))
    result = await agent.run("Add dark mode please.", output_type=Ticket)
    assert result.output == Ticket(category="other", urgency=2)
    retry = model.requests[1].messages[-1]
    assert retry.role == "user"
    assert "not a valid Ticket" in retry.text
    assert "category" in retry.text and "'feature'" in retry.text
    assert "urgency" in retry.text and "less than or equal to 5" in retry.text
    assert warnings == ["invalid_output"]


async def test_text_that_is_not_json_is_asked_again() -> None:
    model = ScriptedModel(["It is a bug, fairly urgent.", '```json\n{"category": "bug", "urgency": 3}\n```'])
    result = await Agent(model=model).run("Crash.", output_type=Ticket)
    assert "not JSON" in model.requests[1].messages[-1].text
    assert result.output == Ticket(category="bug", urgency=3)  # a fenced answer is read too


async def test_exhausted_retries_fail_the_run_with_a_structured_error() -> None:
    model = ScriptedModel(["nope", '{"category": 1}', '{"urgency": 0}'])
    result = await Agent(model=model).run("x", output_type=Ticket, output_retries=2)
    assert result.status == "failed"
    assert result.output is None
    assert result.error is not None
    assert result.error.code == "invalid_output"
    assert "urgency" in result.error.message  # the last problems
    assert "output_retries" in result.error.hint
    assert len(model.requests) == 3
    with pytest.raises(AgentRunFailed) as raised:
        result.raise_for_status()
    assert raised.value.code == "invalid_output"
    assert OutputValidationError("x").info.code == "invalid_output"
    # The transcript stays valid: a next run continues it.
    model.add("ok")
    assert (await Agent(model=model, messages=result.messages).run("again")).ok


async def test_no_retries_means_the_first_invalid_answer_fails() -> None:
    model = ScriptedModel(["{}"])
    result = await Agent(model=model).run("x", output_type=Ticket, output_retries=0)
    assert result.error is not None and result.error.code == "invalid_output"
    assert len(model.requests) == 1


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (Literal["positive", "negative"], '{"result": "negative"}', "negative"),
        (Literal["positive", "negative"], '"positive"', "positive"),  # the bare value is read too
        (int, '{"result": 42}', 42),
        (list[Point], '{"result": [{"x": 1, "y": 2}]}', [Point(1.0, 2.0)]),
        (Point, '{"x": 0.5, "y": -1}', Point(0.5, -1.0)),
        (Row, '{"name": "a", "count": 3}', {"name": "a", "count": 3}),
        (
            list[Ticket],
            '{"result": [{"category": "bug", "urgency": 1}]}',
            [Ticket(category="bug", urgency=1)],
        ),
    ],
)
async def test_literals_lists_dataclasses_and_plain_types(
    output_type: object, answer: str, expected: object
) -> None:
    model = ScriptedModel([answer])
    result = await Agent(model=model).run("x", output_type=output_type)
    assert result.ok, result.reason
    assert result.output == expected
    schema = model.requests[0].output_schema
    assert schema is not None and schema.json_schema["type"] == "object"


def test_a_type_that_is_not_an_object_is_wrapped_with_its_definitions_at_the_root() -> None:
    spec = output_spec(list[Ticket])
    assert spec is not None and spec.wrapped
    schema = spec.schema.json_schema
    assert schema["required"] == ["result"]
    assert schema["properties"]["result"]["items"] == {"$ref": "#/$defs/Ticket"}
    assert "Ticket" in schema["$defs"]
    assert not spec.schema.strict  # urgency has a default-free bound, but the model is open


def test_strict_is_set_only_for_schemas_that_meet_the_strict_rules() -> None:
    class Closed(BaseModel):
        model_config = {"extra": "forbid"}
        label: Literal["a", "b"]

    closed, literal = output_spec(Closed), output_spec(Literal["a", "b"])
    assert closed is not None and closed.schema.strict
    assert literal is not None and literal.schema.strict
    assert output_spec(str) is None and output_spec(None) is None


def test_the_answers_name_avoids_the_runs_tools() -> None:
    spec = output_spec(int, taken=["final_result"])
    assert spec is not None and spec.schema.name == "final_result_2"


def test_a_type_pydantic_cannot_use_is_refused_with_a_hint() -> None:
    from ipyagent import UserError

    with pytest.raises(UserError) as raised:
        output_spec(object())
    assert raised.value.code == "invalid_output_type"


async def test_tools_first_then_the_typed_answer() -> None:
    @tool(read_only=True)
    def lookup(order: str) -> str:
        """Look an order up."""
        return "refund pending"

    model = ScriptedModel([tool_call("lookup", {"order": "A1"}), '{"category": "billing", "urgency": 2}'])
    result = await Agent(model=model, tools=[lookup]).run("Where is my refund for A1?", output_type=Ticket)
    assert result.output == Ticket(category="billing", urgency=2)
    assert all(r.output_schema is not None for r in model.requests)
    assert [t.name for t in model.requests[0].tools] == ["lookup"]


async def test_without_an_output_type_the_output_is_the_text_and_no_schema_is_sent() -> None:
    model = ScriptedModel(["plain"])
    result = await Agent(model=model).run("x")
    assert result.output == "plain"
    assert model.requests[0].output_schema is None
    assert "Final answer" not in model.requests[0].system


def test_a_request_with_an_output_schema_round_trips_through_json() -> None:
    spec = output_spec(Ticket)
    assert spec is not None
    request = ModelRequest(model="m", messages=[], output_schema=spec.schema)
    again = ModelRequest.model_validate(json.loads(request.model_dump_json()))
    assert again.output_schema == spec.schema


async def test_a_typed_run_records_and_replays_from_a_cassette(tmp_path: Path) -> None:
    cassette = tmp_path / "typed.cassette.jsonl"
    script = ScriptedModel(['{"category": "bug", "urgency": 9}', '{"category": "bug", "urgency": 4}'])
    recorded = await Agent(model=ReplayModel(script, cassette=cassette, mode="record")).run(
        "Crash.", output_type=Ticket
    )
    assert recorded.output == Ticket(category="bug", urgency=4)
    replayed = await Agent(model=ReplayModel(cassette=cassette)).run("Crash.", output_type=Ticket)
    assert replayed.output == recorded.output  # the invalid answer and the retry replayed too
    # Asking for another type is another request: the replay says how it differs.
    other = await Agent(model=ReplayModel(cassette=cassette)).run("Crash.", output_type=int)
    assert other.error is not None and other.error.code == "replay_mismatch"
