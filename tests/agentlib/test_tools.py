"""Tools from functions: decorator forms, JSON schemas, validation, calling, and outputs."""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterator
from typing import Any, Literal, Optional

import pytest
from pydantic import BaseModel

from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.tools import RunContext, Tool, ToolArgumentsError, ToolOutput, to_output, tool

SENTINEL = object()


async def no_answer(question: str, choices: list[str]) -> str | None:
    return None


def make_context(ask: Any = no_answer) -> RunContext:
    return RunContext(run_id="run_1", call_id="call_1", tool_name="t", _ask=ask)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Book(BaseModel):
    title: str
    pages: int = 0


def everything(
    s: str,
    i: int,
    fl: float,
    b: bool,
    maybe: Optional[int],  # noqa: UP045 — Optional on purpose: both spellings must work
    names: list[str],
    mode: Literal["fast", "slow"],
    color: Color,
    book: Book,
    count: int = 3,
    title: str = "untitled",
) -> dict[str, Any]:
    """Take one of everything.

    Args:
        s: A string.
        book: The book to file.
    """
    return {"count": count, "title": title}


def keywords(node: Any, parent: str = "") -> Iterator[str]:
    """Every JSON-schema keyword in ``node`` (the names inside ``properties`` are not keywords)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if parent != "properties":
                yield key
            yield from keywords(value, key)
    elif isinstance(node, list):
        for value in node:
            yield from keywords(value)


# -- building tools ------------------------------------------------------------------------------


def test_bare_decorator_uses_the_function_name_and_docstring_summary() -> None:
    @tool
    def get_weather(city: str) -> str:
        """Look up the weather.

        Args:
            city: Where.
        """
        return city

    assert isinstance(get_weather, Tool)
    assert get_weather.name == "get_weather"
    assert get_weather.description == "Look up the weather."
    assert get_weather.read_only is False
    assert get_weather.timeout is None


def test_decorator_with_options() -> None:
    @tool(name="lookup", read_only=True, timeout=5.0, description="Find things.")
    def find(q: str) -> str:
        """Ignored summary."""
        return q

    assert (find.name, find.read_only, find.timeout) == ("lookup", True, 5.0)
    assert find.description == "Find things."
    assert find.spec.name == "lookup"
    assert find.spec.description == "Find things."


def test_called_as_a_function_and_with_empty_parentheses() -> None:
    def ping() -> str:
        """Ping."""
        return "pong"

    assert tool(ping).name == "ping"
    assert tool()(ping).name == "ping"
    assert tool(ping).spec.parameters == {"additionalProperties": False, "properties": {}, "type": "object"}


def test_an_explicit_empty_description_is_kept() -> None:
    def quiet() -> None:
        """A summary the model must not see."""

    assert tool(description="")(quiet).description == ""


@pytest.mark.parametrize("name", ["has space", "dot.ted", "a" * 65, "naïve", "semi;colon"])
def test_invalid_tool_names_raise_user_error(name: str) -> None:
    with pytest.raises(UserError) as info:
        tool(name=name)(lambda: None)
    assert info.value.code == "invalid_tool_name"
    assert repr(name) in str(info.value)


def test_a_lambda_needs_an_explicit_name() -> None:
    with pytest.raises(UserError, match="<lambda>"):
        tool(lambda: None)
    assert tool(name="noop")(lambda: None).name == "noop"


def test_a_tool_name_with_a_trailing_newline_is_rejected() -> None:
    # Providers reject such names; `$` in the name pattern matches before a trailing newline.
    with pytest.raises(UserError):
        tool(name="bad\n")(lambda: None)


def test_a_parameter_with_a_leading_underscore_is_a_user_error() -> None:
    def hidden(_scratch: int = 0) -> None:
        """Has a private-looking parameter."""

    with pytest.raises(UserError):
        tool(hidden)


def test_parameters_named_like_basemodel_attributes_build_without_warnings() -> None:
    # `schema`, `json` and `copy` are ordinary parameter names for a tool (warnings are errors here).
    def query(sql: str, schema: str = "public", json: bool = False, copy: bool = False) -> str:
        """Run a query."""
        return f"{sql}|{schema}|{json}|{copy}"

    t = tool(query)
    assert t.validate({"sql": "q", "schema": "s", "json": True}) == {"sql": "q", "schema": "s", "json": True}


# -- schemas -------------------------------------------------------------------------------------


def test_schema_for_scalar_optional_list_literal_enum_and_model_parameters() -> None:
    params = tool(everything).spec.parameters
    props = params["properties"]
    assert params["type"] == "object"
    assert params["additionalProperties"] is False
    assert props["s"] == {"type": "string", "description": "A string."}
    assert props["i"] == {"type": "integer"}
    assert props["fl"] == {"type": "number"}
    assert props["b"] == {"type": "boolean"}
    assert props["maybe"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert props["names"] == {"type": "array", "items": {"type": "string"}}
    assert props["mode"] == {"type": "string", "enum": ["fast", "slow"]}
    assert params["$defs"]["Color"] == {"type": "string", "enum": ["red", "blue"]}
    assert props["color"] == {"$ref": "#/$defs/Color"}
    assert props["book"] == {"$ref": "#/$defs/Book", "description": "The book to file."}
    assert params["$defs"]["Book"]["required"] == ["title"]
    assert props["count"] == {"type": "integer", "default": 3}
    assert params["required"] == ["s", "i", "fl", "b", "maybe", "names", "mode", "color", "book"]


def test_schema_has_no_title_noise_but_keeps_properties_named_title() -> None:
    params = tool(everything).spec.parameters
    assert "title" not in set(keywords(params))
    assert params["properties"]["title"] == {"type": "string", "default": "untitled"}
    assert params["$defs"]["Book"]["properties"]["title"] == {"type": "string"}


def test_schema_keeps_a_default_value_that_has_a_title_key() -> None:
    def publish(meta: dict[str, str] = {"title": "Draft", "lang": "en"}) -> None:  # noqa: B006
        """Publish."""

    prop = tool(publish).spec.parameters["properties"]["meta"]
    assert prop["default"] == {"title": "Draft", "lang": "en"}


def test_schema_of_a_default_it_cannot_serialize_is_clean() -> None:
    def f(x: object = SENTINEL) -> None:
        """F."""

    params = tool(f).spec.parameters  # warnings are errors in this test run
    assert "default" not in params["properties"]["x"]
    assert "x" not in params.get("required", [])


def test_numpy_docstring_descriptions_reach_the_schema() -> None:
    def scale(value: float, factor: float = 2.0) -> float:
        """Scale a value.

        Parameters
        ----------
        value : float
            The value to scale.
        factor : float
            How much.
        """
        return value * factor

    t = tool(scale)
    assert t.description == "Scale a value."
    assert t.spec.parameters["properties"]["value"]["description"] == "The value to scale."
    assert t.spec.parameters["properties"]["factor"]["description"] == "How much."


def test_run_context_is_hidden_from_the_schema() -> None:
    def whoami(ctx: RunContext, greeting: str) -> str:
        """Who am I."""
        return greeting

    t = tool(whoami)
    assert t.context_parameter == "ctx"
    assert list(t.spec.parameters["properties"]) == ["greeting"]
    assert t.spec.parameters["required"] == ["greeting"]
    with pytest.raises(ToolArgumentsError, match="ctx"):
        t.validate({"greeting": "hi", "ctx": "forged"})


# -- validation ----------------------------------------------------------------------------------


def test_validation_converts_to_the_annotated_types() -> None:
    args = tool(everything).validate(
        {
            "s": "x",
            "i": 1,
            "fl": 1,
            "b": True,
            "maybe": None,
            "names": ["a"],
            "mode": "fast",
            "color": "red",
            "book": {"title": "Dune"},
        }
    )
    assert args["color"] is Color.RED
    assert args["book"] == Book(title="Dune")
    assert args["maybe"] is None
    assert "count" not in args and "title" not in args


def test_validation_errors_are_readable_and_name_the_field() -> None:
    t = tool(everything)
    with pytest.raises(ToolArgumentsError) as info:
        t.validate({"s": "x", "i": "many", "book": {"pages": 3}})
    text = str(info.value)
    assert text.startswith("Invalid arguments for tool `everything`:")
    assert "- i: Input should be a valid integer" in text
    assert "- book.title: Field required" in text
    assert "- mode: Field required" in text
    assert text.endswith("Fix the arguments and call the tool again.")


def test_extra_arguments_are_rejected() -> None:
    def f(x: int) -> int:
        """F."""
        return x

    with pytest.raises(ToolArgumentsError, match=r"- verbose: Extra inputs are not permitted"):
        tool(f).validate({"x": 1, "verbose": True})


def test_literal_and_enum_reject_unknown_values() -> None:
    base = {"s": "", "i": 0, "fl": 0, "b": False, "maybe": 1, "names": [], "book": {"title": ""}}
    with pytest.raises(ToolArgumentsError, match=r"- mode: Input should be 'fast' or 'slow'"):
        tool(everything).validate({**base, "mode": "medium", "color": "red"})
    with pytest.raises(ToolArgumentsError, match=r"- color: "):
        tool(everything).validate({**base, "mode": "fast", "color": "green"})


# -- calling -------------------------------------------------------------------------------------


async def test_omitted_arguments_are_not_passed_so_the_function_default_applies() -> None:
    def f(x: object = SENTINEL, y: int | None = 7) -> tuple[bool, int | None]:
        """F."""
        return x is SENTINEL, y

    t = tool(f)
    assert t.validate({}) == {}
    assert await t.call(t.validate({}), make_context()) == (True, 7)
    assert await t.call(t.validate({"y": None}), make_context()) == (True, None)


async def test_sync_tools_run_in_a_worker_thread() -> None:
    def where() -> int:
        """Which thread."""
        return threading.get_ident()

    assert await tool(where).call({}, make_context()) != threading.get_ident()


async def test_async_tools_are_awaited() -> None:
    async def double(x: int) -> int:
        """Double."""
        return 2 * x

    t = tool(double)
    assert await t.call(t.validate({"x": 21}), make_context()) == 42


async def test_async_callable_objects_are_awaited() -> None:
    class Counter:
        __name__ = "counter"

        async def __call__(self, step: int) -> int:
            return step + 1

    t = tool(Counter())
    assert t.name == "counter"
    assert await t.call(t.validate({"step": 1}), make_context()) == 2


async def test_the_run_context_is_injected() -> None:
    asked: list[tuple[str, list[str]]] = []

    async def ask(question: str, choices: list[str]) -> str | None:
        asked.append((question, choices))
        return "yes"

    async def confirm(what: str, ctx: RunContext) -> str:
        """Confirm."""
        answer = await ctx.ask_user(f"Really {what}?", ["yes", "no"])
        return f"{ctx.call_id}:{answer}"

    t = tool(confirm)
    assert await t.call(t.validate({"what": "delete"}), make_context(ask)) == "call_1:yes"
    assert asked == [("Really delete?", ["yes", "no"])]


async def test_positional_only_parameters_are_passed_positionally() -> None:
    def sub(a: int, b: int, /) -> int:
        """Subtract."""
        return a - b

    t = tool(sub)
    assert [name for name, _default in t.positional_only] == ["a", "b"]
    assert await t.call(t.validate({"b": 1, "a": 10}), make_context()) == 9


async def test_an_omitted_positional_only_argument_does_not_shift_the_next_one() -> None:
    def span(start: int = 0, stop: int = 10, /) -> tuple[int, int]:
        """A span."""
        return start, stop

    t = tool(span)
    assert await t.call(t.validate({"stop": 5}), make_context()) == (0, 5)


async def test_a_positional_only_run_context_is_injected() -> None:
    def tag(ctx: RunContext, label: str, /) -> str:
        """Tag."""
        return f"{ctx.run_id}:{label}"

    t = tool(tag)
    assert await t.call(t.validate({"label": "x"}), make_context()) == "run_1:x"


# -- outputs -------------------------------------------------------------------------------------


def test_to_output_of_common_values() -> None:
    assert to_output("hi") == ToolOutput(text="hi")
    assert to_output(None).text == "(done, no output)"
    assert to_output({"a": 1, "b": "é"}).text == '{"a": 1, "b": "é"}'
    assert to_output([1, 2]).text == "[1, 2]"
    assert to_output(Book(title="Dune", pages=412)).text == '{"title":"Dune","pages":412}'


def test_to_output_passes_a_tool_output_through() -> None:
    out = ToolOutput(text="done", display={"text/html": "<b>done</b>"}, is_error=True)
    assert to_output(out) is out


def test_to_output_of_unserializable_values() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque thing"

    assert to_output({"x": Opaque()}).text == '{"x": "opaque thing"}'
    loop: dict[str, Any] = {}
    loop["self"] = loop
    assert to_output(loop).text == repr(loop)
