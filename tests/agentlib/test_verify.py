"""``Agent(verify=True)``: before a run completes with numbers no tool output shows, the model
is asked once to compute them or correct the answer; the final answer's claims are traced again."""

from __future__ import annotations

from typing import Any

import pytest

from ipyagent import Agent, tool
from ipyagent.agentlib import events as ev
from ipyagent.agentlib.errors import UserError
from ipyagent.testing import ScriptedModel, tool_call


@tool(read_only=True)
def run_python(code: str) -> str:
    """Run code."""
    return {"df.x.mean()": "13.1", "df.x.median()": "12.5"}.get(code, "")


def mean(code: str = "df.x.mean()") -> Any:
    return tool_call("run_python", {"code": code})


async def run(model: ScriptedModel, *, verify: bool, max_turns: int = 50) -> tuple[Any, list[ev.RunWarning]]:
    agent = Agent(model=model, tools=[run_python], verify=verify, max_turns=max_turns)
    warnings: list[ev.RunWarning] = []
    agent.on("run_warning", warnings.append)
    return await agent.run("What are the mean and the median of df.x?"), warnings


async def test_untraced_numbers_get_exactly_one_more_turn_and_are_traced_again() -> None:
    # The first answer guesses the median; asked, the model computes it and answers again.
    model = ScriptedModel(
        [mean(), "Mean 13.1, median 12.4.", mean("df.x.median()"), "Mean 13.1, median 12.5."]
    )
    result, warnings = await run(model, verify=True)
    assert result.status == "completed" and len(model.requests) == 4
    asked = [m.text for m in result.messages if m.role == "user" and "not in any tool output" in m.text]
    assert asked == [
        "These numbers in your answer are not in any tool output of this run: 12.4. Compute them "
        "with a tool, or correct the answer; then give the whole answer again."
    ]
    assert [w.code for w in warnings] == ["verify"] and "12.4" in warnings[0].message
    assert [(c.text, c.traced) for c in result.claims] == [("13.1", True), ("12.5", True)]


async def test_the_model_is_asked_once_even_when_it_still_cannot_trace_them() -> None:
    model = ScriptedModel([mean(), "Mean 13.1, median 12.4.", "I am sure: median 12.4."])
    result, warnings = await run(model, verify=True)
    assert len(model.requests) == 3 and len(warnings) == 1
    assert [(c.text, c.traced) for c in result.claims] == [("12.4", False)]


async def test_a_traced_answer_ends_without_another_turn() -> None:
    model = ScriptedModel([mean(), "The mean is 13.1."])
    result, warnings = await run(model, verify=True)
    assert len(model.requests) == 2 and warnings == [] and result.text == "The mean is 13.1."


async def test_verify_is_off_by_default() -> None:
    assert Agent().verify is False
    model = ScriptedModel([mean(), "Mean 13.1, median 12.4."])
    result, warnings = await run(model, verify=False)
    assert len(model.requests) == 2 and warnings == []
    assert [(c.text, c.traced) for c in result.claims] == [("13.1", True), ("12.4", False)]


async def test_a_run_with_no_turn_left_completes_without_asking() -> None:
    model = ScriptedModel([mean(), "Median 12.4."])
    result, warnings = await run(model, verify=True, max_turns=2)
    assert result.status == "completed" and len(model.requests) == 2 and warnings == []


def test_verify_carries_into_the_run_config_and_a_fork() -> None:
    agent = Agent(model=ScriptedModel([]), verify=True)
    assert agent._run_config(agent.provider).verify is True
    assert agent.fork().verify is True


def test_limits_a_run_cannot_work_with_are_refused_as_given() -> None:
    with pytest.raises(UserError, match="max_turns"):
        Agent(max_turns=0)
    with pytest.raises(UserError, match="compact_threshold"):
        Agent(compact_threshold=1.5)
