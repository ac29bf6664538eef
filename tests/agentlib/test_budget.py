"""Budgets: a run or a conversation that reaches its cap on tokens, cost or time stops
``exhausted`` with a reason, and leaves a transcript the next run continues."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipyagent import Agent, Budget, tool
from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.events import RunWarning, UsageUpdated
from ipyagent.agentlib.messages import ToolCallBlock
from ipyagent.testing import ScriptedModel, pause, text, tool_call, usage


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key}: 42"


def looping(turns: int, *, input_tokens: int = 1_000, output_tokens: int = 100) -> list[object]:
    """A model that calls a tool on every turn, reporting its usage."""
    return [
        [tool_call("lookup", {"key": f"k{i}"}), usage(input_tokens=input_tokens, output_tokens=output_tokens)]
        for i in range(turns)
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tokens=50k", Budget(tokens=50_000)),
        ("tokens=2M, cost=$0.50", Budget(tokens=2_000_000, cost=0.5)),
        ("time=5m", Budget(seconds=300)),
        ("time=90s,cost=1", Budget(seconds=90, cost=1.0)),
        ("TOKENS=1500", Budget(tokens=1500)),
    ],
)
def test_a_budget_reads_as_written_in_a_magic(text: str, expected: Budget) -> None:
    assert Budget.parse(text) == expected


@pytest.mark.parametrize("bad", ["tokens", "tokens=lots", "dollars=3", "time=5 fortnights", "cost=-1"])
def test_an_unreadable_budget_says_how_to_write_one(bad: str) -> None:
    with pytest.raises(UserError) as info:
        Budget.parse(bad)
    assert "tokens=50k" in (info.value.hint or "") + str(info.value)


async def test_a_token_cap_stops_the_run_between_turns_with_a_valid_transcript() -> None:
    model = ScriptedModel([*looping(10), "Done."])
    agent = Agent(model=model, tools=[lookup], budget=Budget(tokens=2_500))
    meter: list[str | None] = []
    agent.on(UsageUpdated, lambda e: meter.append(e.budget))
    result = await agent.run("Look up everything.")
    assert meter == ["1,100 / 2,500 tokens", "2,200 / 2,500 tokens"]  # what the run view shows
    assert result.status == "exhausted"
    assert "2,500" in result.reason and "tokens" in result.reason
    assert result.usage.total_tokens == 2_200  # two turns of 1,100: the third would pass the cap
    assert len(model.requests) == 2
    # Every call has its result: the next run continues the conversation.
    calls = [b.id for m in agent.messages for b in m.content if isinstance(b, ToolCallBlock)]
    answered = {r.tool_call_id for m in agent.messages for r in m.tool_results}
    assert calls and set(calls) == answered
    agent.budget = None
    model.turns[len(model.requests) :] = ["Done."]
    assert (await agent.run("Go on.")).status == "completed"


async def test_a_reply_may_not_take_the_run_past_its_token_cap() -> None:
    model = ScriptedModel(["Short."])
    agent = Agent(model=model, budget=Budget(tokens=5_000), max_tokens=10_000)
    await agent.run("Hi")
    [request] = model.requests
    assert request.settings.max_tokens is not None and request.settings.max_tokens < 5_000


async def test_a_cost_cap_uses_the_price_table() -> None:
    # gpt-4.1: $2 in, $8 out per million: 100k in + 10k out is $0.28 a turn.
    model = ScriptedModel(
        [*looping(5, input_tokens=100_000, output_tokens=10_000), "Done."], model_id="openai/gpt-4.1"
    )
    agent = Agent(model=model, tools=[lookup], budget="cost=0.50")
    result = await agent.run("Go.")
    assert result.status == "exhausted" and "$0.50" in result.reason
    assert result.usage.cost == pytest.approx(0.56)
    assert len(model.requests) == 2


async def test_a_cost_cap_on_a_model_with_no_price_says_it_cannot_apply() -> None:
    model = ScriptedModel(["Hello."], model_id="scripted/unpriced")
    agent = Agent(model=model, budget=Budget(cost=0.01))
    warnings: list[RunWarning] = []
    agent.on(RunWarning, warnings.append)
    result = await agent.run("Hi")
    assert result.status == "completed" and result.usage.cost is None
    assert [w.code for w in warnings] == ["no_price"]
    assert "scripted/unpriced" in warnings[0].message


async def test_a_time_cap_interrupts_a_slow_step_and_stops_the_run_cleanly() -> None:
    model = ScriptedModel([[tool_call("lookup", {"key": "a"})], [pause(30), "Too late."], "Never."])
    agent = Agent(model=model, tools=[lookup], budget=Budget(seconds=0.5))
    result = await agent.run("Go.")
    assert result.status == "exhausted"
    assert "time budget of 0.5 s" in result.reason
    assert agent.messages[-1].role in ("user", "assistant")  # committed, valid
    agent.budget = None
    model.turns[len(model.requests) :] = ["Back."]
    assert (await agent.run("Again.")).text == "Back."


async def test_a_conversation_cap_counts_every_run_and_survives_a_restart(tmp_path: Path) -> None:
    session = tmp_path / "s.agent.jsonl"
    answer = [text("One."), usage(input_tokens=400, output_tokens=10)]
    model = ScriptedModel([*looping(2, input_tokens=300, output_tokens=10), answer, "Two."])
    options = {"tools": [lookup], "system": "Be brief.", "conversation_budget": {"tokens": 1_000}}
    agent = Agent(model=model, session=session, **options)  # type: ignore[arg-type]
    first = await agent.run("First.")  # 2 x 310, then 410: 1,030, more than the reply was allowed
    assert first.status == "exhausted"
    assert "The conversation used 1,030 tokens, past its budget of 1,000" in first.reason
    agent.close()
    again = Agent(model=model, session=session, **options)  # type: ignore[arg-type]
    result = await again.run("Second.")
    assert result.status == "exhausted"
    assert "The conversation used 1,030 tokens, reaching its budget of 1,000" in result.reason
    assert len(model.requests) == 3  # nothing was sent for the second run
    assert [m.text for m in again.messages if m.role == "user" and m.text][-1] == "First."
    again.close()


async def test_a_conversation_time_cap_interrupts_the_run_that_reaches_it(tmp_path: Path) -> None:
    session = tmp_path / "s.agent.jsonl"
    model = ScriptedModel([[tool_call("lookup", {"key": "a"})], [pause(30), "Too late."], "Later."])
    agent = Agent(model=model, tools=[lookup], session=session, conversation_budget="time=0.5s")
    result = await agent.run("Go.")
    assert result.status == "exhausted"
    assert "The conversation ran" in result.reason and "time budget of 0.5 s" in result.reason
    agent.close()
    # The time is counted in the session file: reopened, the conversation refuses new runs.
    again = Agent(model=model, session=session, conversation_budget="time=0.5s")
    sent = len(model.requests)
    refused = await again.run("Again.")
    assert refused.status == "exhausted" and "The conversation ran" in refused.reason
    assert len(model.requests) == sent
    # A reset starts a new conversation, whose budget counts from zero.
    again.reset()
    assert (await again.run("Fresh start.")).text == "Later."
    again.close()


async def test_a_conversation_time_cap_counts_the_runs_recorded_before(tmp_path: Path) -> None:
    session = tmp_path / "s.agent.jsonl"
    first = Agent(model=ScriptedModel(["One."]), session=session)
    await first.run("First.")
    first.close()
    with session.open("a") as f:  # earlier runs took 90 s in all
        f.write('{"type":"run","seconds":60}\n{"type":"run","seconds":30}\n')
    model = ScriptedModel(["Two."])
    roomy = Agent(model=model, session=session, conversation_budget={"seconds": 120})
    assert (await roomy.run("Second.")).text == "Two."  # 90 s of 120: the run may start
    roomy.close()
    tight = Agent(model=model, session=session, conversation_budget={"seconds": 60})
    result = await tight.run("Third.")
    tight.close()
    assert result.status == "exhausted" and "reaching its time budget of 60 s" in result.reason
    assert len(model.requests) == 1
