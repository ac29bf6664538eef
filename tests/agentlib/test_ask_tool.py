"""The ask_user tool: the user's answer goes back to the model; with nobody to answer, the model
is told so at once."""

from __future__ import annotations

from ipyagent import Agent
from ipyagent.agentlib.ask_tool import NO_ANSWER, ask_user_tool
from ipyagent.agentlib.events import AskUserRequired
from ipyagent.testing import ScriptedModel, tool_call


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
