"""Loop overhead: a scripted run of N tool rounds with a no-op tool.

Measures what the agent loop adds per round (assembling the streamed reply, events, validation,
running the tool, committing messages) beyond the model itself: the scripted model's own time is
measured separately by draining the same script without an agent, and subtracted. Also peak
memory and how memory grows with the transcript.

    python bench/loop_overhead.py [--rounds 1000]

Target: < 1 ms per round; memory grows only with the transcript.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
import tracemalloc

from _report import report

from ipyagent import Agent, tool
from ipyagent.agentlib.model import ModelRequest
from ipyagent.testing import ScriptedModel, text, tool_call, usage


@tool(read_only=True)
def noop(i: int) -> str:
    """Do nothing."""
    return "ok"


async def noop_async(i: int) -> str:
    return "ok"


def script(rounds: int) -> list[object]:
    # Fixed usage: a scripted model that estimates tokens would re-read the whole transcript
    # every turn, and that is the model's cost, not the loop's.
    fixed = usage(input_tokens=100, output_tokens=10)
    return [[tool_call("noop", {"i": i}), fixed] for i in range(rounds)] + [[text("done"), fixed]]


async def model_only(rounds: int) -> float:
    model = ScriptedModel(script(rounds), chunk_size=64, record_requests=False)
    request = ModelRequest(model="script", messages=[])
    started = time.perf_counter()
    for _ in range(rounds + 1):
        async for _event in model.stream(request):
            pass
    return time.perf_counter() - started


async def agent_run(rounds: int, tool_fn: object) -> tuple[float, int, int]:
    agent = Agent(
        model=ScriptedModel(script(rounds), chunk_size=64, record_requests=False),
        tools=[tool_fn],
        max_turns=rounds + 5,
    )
    gc.collect()
    tracemalloc.start()
    started = time.perf_counter()
    result = await agent.run("go")
    elapsed = time.perf_counter() - started
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert result.status == "completed", repr(result)
    transcript = len(json.dumps([m.model_dump(mode="json") for m in agent.messages]))
    return elapsed, peak, transcript


async def main(rounds: int) -> None:
    # The model's own cost is the same scripted stream drained without an agent. Estimating it
    # with tracing off keeps it comparable to a traced run only roughly, so time runs untraced.
    model_time = await model_only(rounds)
    rows = []
    for label, fn in (
        ("async no-op tool", tool(noop_async, name="noop", read_only=True)),
        ("sync no-op tool", noop),
    ):
        agent = Agent(
            model=ScriptedModel(script(rounds), chunk_size=64, record_requests=False),
            tools=[fn],
            max_turns=rounds + 5,
        )
        started = time.perf_counter()
        result = await agent.run("go")
        total = time.perf_counter() - started
        assert result.status == "completed", repr(result)
        per_round = (total - model_time) / rounds * 1e6
        rows.append([label, rounds, total * 1e3, per_round])
    growth = []
    for n in (rounds // 4, rounds // 2, rounds):
        _, peak, transcript = await agent_run(n, tool(noop_async, name="noop", read_only=True))
        growth.append({"rounds": n, "peak_kib": peak / 1024, "transcript_kib": transcript / 1024})
    report(
        "loop_overhead",
        ["case", "rounds", "total ms", "overhead µs/round"],
        rows,
        {
            "model_only_ms": round(model_time * 1e3, 1),
            "memory": growth,
            "peak_bytes_per_transcript_byte": round(growth[-1]["peak_kib"] / growth[-1]["transcript_kib"], 1),
            "target_us_per_round": 1000,
        },
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=1000)
    asyncio.run(main(parser.parse_args().rounds))
