"""The ask_user tool: the user's answer goes back to the model; with nobody to answer, the model
is told so at once."""

from __future__ import annotations

import json
from typing import Any

from ipyagent import Agent
from ipyagent.agentlib.ask_tool import (
    MAX_CHOICE_CHARS,
    MAX_CHOICES,
    MAX_QUESTION_CHARS,
    NO_ANSWER,
    ask_user_tool,
)
from ipyagent.agentlib.events import EVENT_ADAPTER, AskUserRequired
from ipyagent.testing import ScriptedModel, tool_call
from ipyagent.widgets.reducer import ViewReducer


def asking() -> ScriptedModel:
    question = {"question": "Which column holds the price?", "choices": ["price", "amount", " "]}
    return ScriptedModel([tool_call("ask_user", question), "Using it."])


async def test_the_answer_goes_back_to_the_model() -> None:
    model = asking()
    agent = Agent(model=model, tools=[ask_user_tool()])
    asked: list[AskUserRequired] = []

    def answer(event: AskUserRequired) -> None:
        asked.append(event)
        agent.answer(event.question_id, "amount")

    agent.on(AskUserRequired, answer)
    result = await agent.run("Total the sales.")
    assert result.status == "completed"
    assert [(e.question, e.choices) for e in asked] == [
        ("Which column holds the price?", ["price", "amount"])
    ]
    [reply] = model.requests[1].messages[-1].tool_results
    assert reply.content == "amount" and not reply.is_error


async def test_with_nobody_to_answer_the_model_is_told_at_once() -> None:
    model = asking()
    agent = Agent(model=model, tools=[ask_user_tool()])  # no listener: a headless run
    assert (await agent.run("Total the sales.")).status == "completed"
    [reply] = model.requests[1].messages[-1].tool_results
    assert reply.content == NO_ANSWER


async def test_a_skipped_question_is_no_answer() -> None:
    model = asking()
    agent = Agent(model=model, tools=[ask_user_tool()])
    agent.on(AskUserRequired, lambda e: agent.answer(e.question_id, None))  # Skip
    await agent.run("Total the sales.")
    assert model.requests[1].messages[-1].tool_results[0].content == NO_ANSWER


def test_asking_changes_nothing_so_it_needs_no_permission() -> None:
    assert ask_user_tool().read_only


def asked_with(question: str, choices: list[str]) -> tuple[ScriptedModel, Agent, list[Any]]:
    model = ScriptedModel([tool_call("ask_user", {"question": question, "choices": choices}), "Fine."])
    agent = Agent(model=model, tools=[ask_user_tool()])
    events: list[Any] = []
    agent.on("*", events.append)
    agent.on(AskUserRequired, lambda e: agent.answer(e.question_id, e.choices[0] if e.choices else "yes"))
    return model, agent, events


async def test_too_many_choices_are_refused_and_the_model_is_told_to_narrow_down() -> None:
    # 10,000 choices made a 1.9 MB question, kept whole in the saved widget state.
    choices = [f"data/part-{i:05d}.parquet" for i in range(10_000)]
    model, agent, events = asked_with("Which file holds the sales?", choices)
    assert (await agent.run("Total the sales.")).status == "completed"
    [reply] = model.requests[1].messages[-1].tool_results
    assert reply.is_error
    assert f"at most {MAX_CHOICES} choices" in reply.content and "10,000" in reply.content
    assert "type" in reply.content  # the user can always type an answer of their own
    assert len(reply.content) < 1000
    # Nothing was asked: no question reached the events, nor the view.
    assert not [e for e in events if isinstance(e, AskUserRequired)]
    view = ViewReducer()
    for event in events:
        view.feed(event)
    assert not [b for b in view.state["blocks"] if b["kind"] == "question"]


async def test_a_choice_or_a_question_too_long_is_refused() -> None:
    long_choice = ["yes", "no", "x" * (MAX_CHOICE_CHARS + 1)]
    model, agent, events = asked_with("Go on?", long_choice)
    await agent.run("Do it.")
    [reply] = model.requests[1].messages[-1].tool_results
    assert reply.is_error and f"at most {MAX_CHOICE_CHARS} characters" in reply.content
    assert "choice 3" in reply.content

    model, agent, events = asked_with("Go on? " + "why " * MAX_QUESTION_CHARS, ["yes", "no"])
    await agent.run("Do it.")
    [reply] = model.requests[1].messages[-1].tool_results
    assert reply.is_error and f"at most {MAX_QUESTION_CHARS:,} characters" in reply.content
    assert not [e for e in events if isinstance(e, AskUserRequired)]


async def test_a_question_at_the_limits_is_asked_and_stays_small() -> None:
    question = "q" * MAX_QUESTION_CHARS
    choices = [f"{i:03d}" + "c" * (MAX_CHOICE_CHARS - 3) for i in range(MAX_CHOICES)]
    model, agent, events = asked_with(question, [*choices, "  "])  # blank choices do not count
    await agent.run("Ask.")
    [asked] = [e for e in events if isinstance(e, AskUserRequired)]
    assert asked.choices == choices and asked.question == question
    assert model.requests[1].messages[-1].tool_results[0].content == choices[0]
    # What the widget gets for the question: the event, and the view's block and patches.
    view = ViewReducer()
    for event in events:
        view.feed(event)
    [block] = [b for b in view.state["blocks"] if b["kind"] == "question"]
    limit = MAX_QUESTION_CHARS + MAX_CHOICES * MAX_CHOICE_CHARS + 1_000
    assert len(EVENT_ADAPTER.dump_json(asked)) < limit and len(json.dumps(block)) < limit
