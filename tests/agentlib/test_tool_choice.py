"""The loop's tool-choice policy: what a request may call is decided by the default policy, the
caller or a hook, and holds until the model has called a tool."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ipyagent import Agent, Hooks, tool
from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.messages import Message, ToolResultBlock
from ipyagent.agentlib.model import ModelRequest, ToolChoice, ToolSpec
from ipyagent.agentlib.tool_choice import (
    call_named_tools,
    check_tool_choice,
    expects_tool_call,
    mentions_tool,
    named_calls,
)
from ipyagent.testing import ScriptedModel, tool_call


@tool(read_only=True)
def get_weather(city: str) -> str:
    """Weather in a city."""
    return f"{city}: 17°C"


@tool(read_only=True)
def run_python(code: str) -> str:
    """Run code."""
    return "ok"


SPECS = [get_weather.spec, run_python.spec]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('Call get_weather with city "Oslo".', ["get_weather"]),
        ("Use `run_python` to compute it.", ["run_python"]),
        ("please call the tool get_weather for Oslo", ["get_weather"]),
        ("Use run_python, not get_weather.", ["run_python"]),
        ("Don't guess: call get_weather for Oslo.", ["get_weather"]),  # the negation is elsewhere
        ("Call get_weather for Oslo, then run_python on it.", ["get_weather"]),  # only one is an order
        ("Don't call run_python, just answer.", []),
        ("Without using get_weather, guess Oslo's weather.", []),
        ("Do not ever call run_python.", []),
        ("What does get_weather return?", []),  # named, not an instruction
        ("call get_weather_now", []),  # a different word
    ],
)
def test_named_calls(text: str, expected: list[str]) -> None:
    assert named_calls(text, SPECS) == expected


def test_the_default_policy_requires_what_the_user_said_to_call() -> None:
    assert call_named_tools([Message.user("Call get_weather for Oslo.")], SPECS) == ("get_weather",)
    assert call_named_tools([Message.user("Weather in Oslo?")], SPECS) == "auto"
    result = ToolResultBlock(tool_call_id="c1", name="get_weather", content="call get_weather again")
    assert call_named_tools([Message(role="user", content=(result,))], SPECS) == "auto"  # not the user's


def agent(*turns: object, **options: object) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(list(turns))
    return Agent(model=model, tools=[get_weather, run_python], **options), model  # type: ignore[arg-type]


def choices(model: ScriptedModel) -> list[ToolChoice]:
    return [r.tool_choice for r in model.requests]


async def test_the_loop_applies_the_default_policy_to_the_request_answering_the_user() -> None:
    a, model = agent(tool_call("get_weather", {"city": "Oslo"}), "17°C in Oslo.")
    result = await a.run("Call get_weather for Oslo, then answer in one sentence.")
    assert result.status == "completed"
    assert choices(model) == [("get_weather",), "auto"]  # the answer after the result is free


async def test_without_a_named_tool_every_request_is_auto() -> None:
    a, model = agent(tool_call("get_weather", {"city": "Oslo"}), "17°C.")
    await a.run("Weather in Oslo?")
    assert choices(model) == ["auto", "auto"]


async def test_the_caller_switches_the_policy_off() -> None:
    a, model = agent("Sure.", tool_choice="auto")
    await a.run("Call get_weather for Oslo.")
    assert choices(model) == ["auto"]


@pytest.mark.parametrize("choice", ["required", "none", ["run_python"]])
async def test_a_fixed_choice_holds_until_the_model_calls_a_tool(choice: str | list[str]) -> None:
    a, model = agent(tool_call("run_python", {"code": "1"}), "Done.")
    await a.run("Compute it.", tool_choice=choice)  # type: ignore[arg-type]
    expected = tuple(choice) if isinstance(choice, list) else choice
    assert choices(model) == [expected, "auto"]


async def test_a_run_choice_replaces_the_agents_for_that_run_only() -> None:
    a, model = agent("One.", "Two.", tool_choice="none")
    await a.run("Call get_weather.", tool_choice="auto")
    await a.run("Call get_weather.")
    assert choices(model) == ["auto", "none"]


async def test_a_policy_is_asked_before_every_request_with_the_run_so_far() -> None:
    seen: list[int] = []

    def policy(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ToolChoice:
        seen.append(len(messages))
        return "required" if len(messages) < 3 else "none"

    a, model = agent(tool_call("get_weather", {"city": "Oslo"}), "17°C.", tool_choice=policy)
    await a.run("Weather?")
    assert seen == [1, 3]  # the prompt; then the prompt, the call and its result
    assert choices(model) == ["required", "none"]


async def test_a_hook_has_the_last_word() -> None:
    hooks = Hooks()
    hooks.before_model_call(lambda request: request.model_copy(update={"tool_choice": "none"}))
    a, model = agent("Fine.", hooks=hooks)
    await a.run("Call get_weather for Oslo.")
    assert choices(model) == ["none"]


async def test_a_hook_sees_the_loops_choice() -> None:
    seen: list[ToolChoice] = []
    hooks = Hooks()
    hooks.before_model_call(lambda request: seen.append(request.tool_choice))
    a, _ = agent(tool_call("get_weather", {"city": "Oslo"}), "17°C.", hooks=hooks)
    await a.run("Use get_weather for Oslo.")
    assert seen == [("get_weather",), "auto"]


@pytest.mark.parametrize("bad", ["always", [], [""], 3])
def test_an_invalid_choice_is_refused_up_front(bad: object) -> None:
    with pytest.raises(UserError, match="Invalid tool_choice"):
        check_tool_choice(bad)
    with pytest.raises(UserError, match="Invalid tool_choice"):
        agent(tool_choice=bad)


async def test_naming_a_tool_the_run_does_not_offer_fails_the_run_with_a_hint() -> None:
    a, model = agent("Never sent.")
    result = await a.run("Hi.", tool_choice=["get_time"])
    assert result.status == "failed" and result.error is not None
    assert "get_time" in result.error.message and "get_weather" in result.error.hint
    assert model.requests == []


async def test_required_without_tools_fails_the_run() -> None:
    model = ScriptedModel(["Never sent."])
    result = await Agent(model=model, tool_choice="required").run("Hi.")
    assert result.status == "failed" and result.error is not None
    assert "no tools" in result.error.message


async def test_a_fork_keeps_the_choice() -> None:
    a, _ = agent(tool_choice="none")
    assert a.fork().tool_choice == "none"


def test_requests_default_to_auto_and_take_a_list_of_names() -> None:
    request = ModelRequest(model="m", messages=[], tool_choice=["a", "b"])  # type: ignore[arg-type]
    assert request.tool_choice == ("a", "b")
    assert ModelRequest(model="m", messages=[]).tool_choice == "auto"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Is get_weather right for Oslo?", True),
        ("Use `get_weather` for Oslo", True),
        ("What's the weather in Oslo?", False),
        ("get_weather_now for Oslo", False),  # a different word
    ],
)
def test_a_tool_named_in_passing_is_a_mention(text: str, expected: bool) -> None:
    assert mentions_tool(text, SPECS) is expected


def test_a_call_is_expected_only_under_auto_and_only_in_answer_to_the_user() -> None:
    asked = [Message.user("Is get_weather right for Oslo?")]
    assert expects_tool_call("auto", asked, SPECS)
    assert not expects_tool_call("none", asked, SPECS)  # the choice says more than a hint could
    assert not expects_tool_call("auto", asked, [run_python.spec])  # not offered
    result = ToolResultBlock(tool_call_id="c1", name="get_weather", content="get_weather: ok")
    after = [*asked, Message(role="user", content=(result,))]
    assert not expects_tool_call("auto", after, SPECS)  # a tool result names the tool, not the user


async def test_the_loop_marks_the_request_that_answers_a_mention() -> None:
    seen: list[tuple[ToolChoice, bool]] = []
    hooks = Hooks()
    hooks.before_model_call(lambda request: seen.append((request.tool_choice, request.expects_tool_call)))
    a, _ = agent(tool_call("get_weather", {"city": "Oslo"}), "17°C.", hooks=hooks)
    await a.run("Is get_weather right for Oslo?")
    assert seen == [("auto", True), ("auto", False)]
