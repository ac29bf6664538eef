"""Hung calls: how long a normal sync tool takes after N sync tool calls that never returned.

Each scenario is a real agent run: one turn of N read-only calls of a tool that blocks until the
scenario ends (each abandoned at its 0.05 s timeout), then a turn that calls a sync tool that
answers at once; the row gives that call's duration as the run reports it (``tool_result``).
"tool workers" is how sync tools run now (:mod:`ipyagent.agentlib.workers`); "default executor"
runs the same functions through ``asyncio.to_thread``, as they ran before, for comparison: its
six workers (on two cores) are taken by the first six hung calls, so the normal call waits until
its own timeout (2 s here).

    python bench/hung_calls.py [--repeat 5]

Target: after 20 hung calls a normal sync tool answers in under 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
from collections.abc import Callable
from typing import Any

from _report import report

from ipyagent import Agent, tool
from ipyagent.agentlib import events as ev
from ipyagent.agentlib.tools import Tool
from ipyagent.testing import ScriptedModel, tool_call

NORMAL_TIMEOUT = 2.0


def tools_for(way: str, release: threading.Event) -> list[Tool]:
    def hang_fn(i: int) -> str:
        release.wait()
        return "released"

    def answer_fn(i: int) -> str:
        return "ok"

    if way == "tool workers":
        hang: Callable[..., Any] = hang_fn
        answer: Callable[..., Any] = answer_fn
    else:  # the same functions on asyncio's default executor, as sync tools ran before

        async def hang(i: int) -> str:
            return await asyncio.to_thread(hang_fn, i)

        async def answer(i: int) -> str:
            return await asyncio.to_thread(answer_fn, i)

    return [
        tool(hang, name="hang", read_only=True, timeout=0.05),
        tool(answer, name="answer", read_only=True, timeout=NORMAL_TIMEOUT),
    ]


async def scenario(way: str, hung: int) -> float | None:
    """The normal call's duration in seconds, or None when it timed out."""
    release = threading.Event()
    turns: list[Any] = [[tool_call("hang", {"i": i}) for i in range(hung)]] if hung else []
    model = ScriptedModel([*turns, [tool_call("answer", {"i": 0})], "done"])
    agent = Agent(model=model, tools=tools_for(way, release), max_consecutive_failures=hung + 2)
    durations: dict[str, float] = {}
    errors: set[str] = set()

    def seen(event: ev.ToolResult) -> None:
        if event.name == "answer":
            durations[event.call_id] = event.duration
            if event.is_error:
                errors.add(event.call_id)

    agent.on(ev.ToolResult, seen)
    try:
        result = await agent.run("go")
        assert result.status == "completed", repr(result)
    finally:
        release.set()  # the hung calls end, so the loop's executor can shut down
    ((call_id, duration),) = durations.items()
    return None if call_id in errors else duration


def run_once(way: str, hung: int) -> float | None:
    return asyncio.run(scenario(way, hung))  # a fresh loop: a fresh default executor


def main(repeat: int) -> None:
    rows: list[list[Any]] = []
    for hung in (0, 6, 20):
        for way in ("tool workers", "default executor"):
            times = [run_once(way, hung) for _ in range(repeat)]
            done = [t * 1e3 for t in times if t is not None]
            timed_out = len(times) - len(done)
            median = statistics.median(done) if done else f"timed out ({NORMAL_TIMEOUT:g} s)"
            worst = max(done) if done and not timed_out else f"timed out ({NORMAL_TIMEOUT:g} s)"
            rows.append([hung, way, repeat, median, worst])
    report(
        "hung_calls",
        ["hung calls before", "sync tools run on", "runs", "normal call median ms", "max ms"],
        rows,
        {"target_ms": 1000},
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    main(parser.parse_args().repeat)
