"""Sub-agents: what a delegation costs, and how soon cancelling the parent ends the child.

- **delegation overhead**: a run whose model calls ``delegate`` once, the sub-agent answering at
  once, against the same run calling a no-op tool instead: the difference is what starting,
  running and ending a child run costs (its own request included, a scripted one).
- **forwarding**: a sub-agent streaming a long answer in small pieces, against the parent
  streaming the same answer itself: what marking each event ``via`` and passing it on to the
  parent's bus adds per event.
- **cancel latency**: ``agent.cancel()`` on the parent while the sub-agent streams, runs a slow
  tool, or waits on a permission prompt: the time until the sub-agent's ``run_cancelled`` and
  until the parent's run returned.
- **parallel delegates under a budget**: 3 and 10 ``delegate`` calls in one turn under
  ``tokens=1000`` and ``tokens=3000``, each child looking a key up and answering, on a scripted
  model that reports the prompt it was sent and honours ``max_tokens``: the tokens the whole
  tree spent, how many children finished, and the run's wall time (a shared ledger makes
  requests that do not fit wait for each other).

    python bench/subagents.py [--repeat 20]

Target: cancelling ends the child within a second (the issue's number); measured in
milliseconds here.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from _report import report_sections

from ipyagent import Agent, Budget, tool
from ipyagent.agentlib import events as ev
from ipyagent.agentlib.budget import spent_tokens
from ipyagent.agentlib.delegation import SUBAGENT_NOTE
from ipyagent.agentlib.model import ModelRequest
from ipyagent.agentlib.usage import estimate_tokens
from ipyagent.testing import ScriptedModel, text, tool_call, usage


@tool(read_only=True)
def noop() -> str:
    """Do nothing."""
    return "ok"


@tool
def change() -> str:
    """Change something (asks first)."""
    return "changed"


@tool(read_only=True)
async def slow() -> str:
    """Take a minute."""
    await asyncio.sleep(60)
    return "never"


def delegate(tools: list[str]) -> Any:
    return tool_call("delegate", {"task": "Do the task.", "tools": tools})


async def timed_run(turns: list[Any], tools: list[Any], *, delegate_: bool, chunk: int = 64) -> float:
    agent = Agent(model=ScriptedModel(turns, chunk_size=chunk), tools=tools, delegate=delegate_)
    started = time.perf_counter()
    result = await agent.run("go")
    assert result.status == "completed", repr(result)
    return time.perf_counter() - started


async def overhead(repeat: int) -> list[list[Any]]:
    with_child, with_tool = [], []
    for _ in range(repeat):
        with_child.append(await timed_run([[delegate(["noop"])], "child", "parent"], [noop], delegate_=True))
        with_tool.append(await timed_run([[tool_call("noop")], "parent"], [noop], delegate_=False))
    child, plain = statistics.median(with_child), statistics.median(with_tool)
    return [["one delegate call", child * 1e3, plain * 1e3, (child - plain) * 1e3]]


async def forwarding(pieces: int) -> list[list[Any]]:
    answer = "word " * pieces  # five characters a piece
    parent = await timed_run([[text(answer)]], [], delegate_=False, chunk=5)
    child = await timed_run([[delegate([])], [text(answer)], "parent"], [], delegate_=True, chunk=5)
    per_event = (child - parent) / pieces * 1e6
    return [[f"{pieces:,} text pieces", parent * 1e3, child * 1e3, per_event]]


async def cancel_once(case: str) -> tuple[float, float]:
    if case == "child streaming":
        model = ScriptedModel([[delegate([])], [text("word " * 5000)]], chunk_size=5, delay=0.005)
        tools: list[Any] = []
    elif case == "child's slow tool":
        model = ScriptedModel([[delegate(["slow"])], [tool_call("slow")], "never"])
        tools = [slow]
    else:  # waiting on a permission prompt nobody answers
        model = ScriptedModel([[delegate(["change"])], [tool_call("change")], "never"])
        tools = [change]
    agent = Agent(model=model, tools=tools, delegate=True)
    busy = asyncio.Event()
    child_ended = asyncio.Event()
    ended_at: list[float] = []

    def on_event(event: Any) -> None:
        if event.via and isinstance(event, ev.TextDelta | ev.ToolExecuting | ev.PermissionRequired):
            busy.set()
        if event.via and isinstance(event, ev.RunCancelled):
            ended_at.append(time.perf_counter())
            child_ended.set()

    agent.on("*", on_event)
    agent.on("permission_required", lambda e: None)  # someone could answer: the prompt waits
    run = asyncio.ensure_future(agent.run("go"))
    await asyncio.wait_for(busy.wait(), 10)
    await asyncio.sleep(0.02)
    started = time.perf_counter()
    agent.cancel()
    result = await run
    returned = time.perf_counter()
    await asyncio.wait_for(child_ended.wait(), 5)
    assert result.status == "cancelled", repr(result)
    return (ended_at[0] - started) * 1e3, (returned - started) * 1e3


async def cancel_latency(repeat: int) -> list[list[Any]]:
    rows = []
    for case in ("child streaming", "child's slow tool", "child waiting on a prompt"):
        times = [await cancel_once(case) for _ in range(repeat)]
        child = [t[0] for t in times]
        parent = [t[1] for t in times]
        rows.append(
            [case, repeat, statistics.median(child), max(child), statistics.median(parent), max(parent)]
        )
    return rows


def honest(request: ModelRequest, step: Any, reply: int) -> list[Any]:
    """``step`` with the usage a provider that honours max_tokens reports."""
    cap = request.settings.max_tokens
    prompt = estimate_tokens(request.system, request.messages)
    return [step, usage(input_tokens=prompt, output_tokens=reply if cap is None else min(reply, cap))]


def child_or_parent(request: ModelRequest) -> list[Any]:
    if SUBAGENT_NOTE not in request.system:
        return honest(request, text("All done."), 3)
    if request.messages[-1].tool_results:
        return honest(request, text("It holds 42."), 4)
    return honest(request, tool_call("noop"), 3)


async def under_budget(children: int, cap: int) -> list[Any]:
    calls = [
        tool_call("delegate", {"task": f"Look up key k{n}.", "tools": ["noop"]}) for n in range(children)
    ]
    model = ScriptedModel(
        [[*calls, usage(input_tokens=300, output_tokens=60)], *[child_or_parent] * (3 * children + 2)]
    )
    agent = Agent(
        model=model,
        tools=[noop],
        delegate=True,
        budget=Budget(tokens=cap),
        max_consecutive_failures=children + 1,
    )
    started = time.perf_counter()
    result = await agent.run("go")
    elapsed = time.perf_counter() - started
    answers = [r for m in agent.messages for r in m.tool_results if r.name == "delegate"]
    finished = sum(not r.is_error for r in answers)
    return [
        children,
        f"{cap:,}",
        spent_tokens(result.usage),
        f"{finished} of {children}",
        result.status,
        elapsed * 1e3,
    ]


async def main(repeat: int) -> None:
    sections = [
        (
            "delegation overhead",
            ["case", "with delegate ms", "with a no-op tool ms", "overhead ms"],
            await overhead(repeat),
        ),
        (
            "forwarding",
            ["case", "parent streams ms", "sub-agent streams ms", "added µs/event"],
            await forwarding(5000),
        ),
        (
            "cancel latency",
            ["while", "runs", "child ended median ms", "max ms", "parent returned median ms", "max ms"],
            await cancel_latency(repeat),
        ),
        (
            "parallel delegates under a token cap",
            ["children", "cap", "tokens spent", "children finished", "run status", "run ms"],
            [await under_budget(n, cap) for cap in (1000, 3000) for n in (3, 10)],
        ),
    ]
    report_sections("subagents", sections, {"target_cancel_ms": 1000})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=20)
    asyncio.run(main(parser.parse_args().repeat))
