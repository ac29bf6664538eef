"""MCP overhead: one tool called through a stdio MCP server vs the same tool in-process.

Four ways to call ``add(a, b)``, each ``--calls`` times, one call at a time:

- in-process: the :class:`~ipyagent.Tool` made from the function, called directly;
- SDK client: the official ``mcp`` client's ``call_tool`` on a server over stdio, on the
  caller's loop (the floor: JSON-RPC over pipes, a process switch each way);
- ipyagent: the same server through :class:`~ipyagent.agentlib.mcp_servers.McpServers` (its
  own loop and thread, so one more hop each way, plus the argument check and result mapping);
- mcp-server-time: the published server's ``get_current_time``, through ipyagent.

Then whole agent runs of ``--rounds`` tool rounds (a scripted model) with the tool in-process
and through MCP: the difference per round is what a run pays per MCP call. And how long a
server takes to start and list its tools.

Size: one call whose result is 1, 10 and 50 MB (``tests/agentlib/mcp_raw_server.py``), with the
default ``max_result_bytes``: how long it takes, the process's peak memory after it, and the
longest stall of the caller's event loop meanwhile (a 10 ms ticker's worst lateness).

Shutdown: a server that ignores SIGTERM and the end of its stdin, with a ``setsid``
grandchild, started by a Python process playing the kernel (``tests/agentlib/mcp_kernel_stub.py``)
that then closes its servers, exits, or is killed: how long until none of the processes it
started is left.

    python bench/mcp.py [--calls 500] [--rounds 200] [--only calls,size,shutdown]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _report import report_sections

# This file is named like the SDK it measures: with its folder first on sys.path (as a script's
# is), `import mcp` would find this file. Once _report is imported, the folder is not needed.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from ipyagent import Agent, tool  # noqa: E402
from ipyagent.agentlib.mcp_servers import McpServers  # noqa: E402
from ipyagent.agentlib.tool_sources import SourceContext  # noqa: E402
from ipyagent.agentlib.tools import RunContext, Tool  # noqa: E402
from ipyagent.testing import ScriptedModel, text, tool_call, usage  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SERVER = [sys.executable, str(Path(__file__).with_name("_mcp_server.py"))]
TIME_SERVER = [sys.executable, "-m", "mcp_server_time"]
TESTS = ROOT / "tests" / "agentlib"
RAW_SERVER = [sys.executable, str(TESTS / "mcp_raw_server.py")]
#: Seconds a size row or a shutdown row may take before it is reported as not finishing.
GIVE_UP = 30.0


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def no_answer(question: str, choices: list[str]) -> str | None:
    return None


CONTEXT = RunContext(run_id="bench", call_id="c", tool_name="add", _ask=no_answer)


async def timed(call: Callable[[int], Awaitable[Any]], calls: int) -> list[float]:
    for i in range(min(20, calls)):  # warm up
        await call(i)
    samples = []
    for i in range(calls):
        started = time.perf_counter()
        await call(i)
        samples.append((time.perf_counter() - started) * 1e6)
    return samples


def row(label: str, samples: list[float], base: float | None) -> list[Any]:
    mean = statistics.fmean(samples)
    p95 = statistics.quantiles(samples, n=20)[-1]
    extra = "" if base is None else mean - base
    return [label, len(samples), mean, statistics.median(samples), p95, extra]


async def servers_tools(command: list[str], name: str) -> tuple[McpServers, dict[str, Tool], float]:
    # Started from the repository's root: in bench/, `python -m` would import this file as `mcp`.
    entry = {"command": command[0], "args": command[1:], "trusted": True, "cwd": str(ROOT)}
    servers = McpServers({name: entry}, read_config=False)
    started = time.perf_counter()
    found = await servers.tools_for_run(SourceContext(ask=no_answer))
    startup = time.perf_counter() - started
    assert not found.notes, found.notes
    return servers, {t.name: t for t in found.tools}, startup


async def sdk_samples(calls: int) -> list[float]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:], cwd=ROOT)
    with open(os.devnull, "w") as quiet:  # noqa: ASYNC230 - opening /dev/null does not block
        async with Client(stdio_client(params, errlog=quiet)) as client:

            async def call(i: int) -> Any:
                return await client.call_tool("add", {"a": i, "b": 1})

            return await timed(call, calls)


async def run_rounds(rounds: int, tools: list[Tool], mcp: McpServers | bool) -> float:
    fixed = usage(input_tokens=100, output_tokens=10)
    name = tools[0].name if tools else "bench__add"
    script = [[tool_call(name, {"a": i, "b": 1}), fixed] for i in range(rounds)] + [[text("done"), fixed]]
    agent = Agent(
        model=ScriptedModel(script, chunk_size=64, record_requests=False),
        tools=tools,
        max_turns=rounds + 5,
        mcp=mcp,
        max_repeated_calls=rounds + 5,
    )
    started = time.perf_counter()
    result = await agent.run("go")
    elapsed = time.perf_counter() - started
    assert result.status == "completed", repr(result)
    assert not any(r.is_error for m in result.messages for r in m.tool_results)
    return elapsed


async def worst_lateness(done: asyncio.Event) -> float:
    """The longest a 10 ms sleep on this loop overran until ``done``: how long it stalled."""
    worst = 0.0
    while not done.is_set():
        started = time.perf_counter()
        await asyncio.sleep(0.01)
        worst = max(worst, time.perf_counter() - started - 0.01)
    return worst


async def size_rows() -> list[list[Any]]:
    entry = {"command": RAW_SERVER[0], "args": RAW_SERVER[1:], "trusted": True, "timeout": GIVE_UP}
    servers = McpServers({"raw": entry}, read_config=False)
    rows: list[list[Any]] = []
    try:
        found = await servers.tools_for_run(SourceContext(ask=no_answer))
        big = {t.name: t for t in found.tools}["raw__big"]
        for megabytes in (1, 10, 50):
            done = asyncio.Event()
            ticking = asyncio.create_task(worst_lateness(done))
            started = time.perf_counter()
            try:
                output = await asyncio.wait_for(big.call({"size": megabytes * 1_000_000}, CONTEXT), GIVE_UP)
                elapsed: float | str = (time.perf_counter() - started) * 1e3
                chars = len(output.text)
            except asyncio.TimeoutError:
                elapsed, chars = f"> {GIVE_UP * 1e3:g} (timeout)", 0
            done.set()
            worst = await ticking
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            rows.append([f"{megabytes} MB", elapsed, chars, peak, worst * 1e3])
    finally:
        servers.close()
    return rows


def shutdown_row(ending: str) -> list[Any]:
    server = {"command": RAW_SERVER[0], "args": [*RAW_SERVER[1:], "stubborn", "grandchild"], "trusted": True}
    kernel = subprocess.Popen(
        [sys.executable, str(TESTS / "mcp_kernel_stub.py"), json.dumps({"raw": server})],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert kernel.stdin is not None and kernel.stdout is not None
    pids: list[int] = json.loads(kernel.stdout.readline())
    started = time.perf_counter()
    if ending in ("close", "exit"):
        kernel.stdin.write(ending + "\n")
        kernel.stdin.flush()
    else:
        kernel.send_signal(getattr(signal, ending))
    kernel.wait()
    while (left := [p for p in pids if _alive(p)]) and time.perf_counter() - started < GIVE_UP:
        time.sleep(0.02)
    elapsed = time.perf_counter() - started
    kernel.stdin.close()
    kernel.stdout.close()
    for pid in left:  # the bench leaves nothing behind
        os.kill(pid, signal.SIGKILL)
    return [ending, len(pids), elapsed if not left else f"> {GIVE_UP:g}", len(left)]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended


async def main(calls: int, rounds: int, only: set[str]) -> None:
    sections: list[tuple[str, list[str], list[list[Any]]]] = []
    summary: dict[str, Any] = {}
    if "calls" in only:
        call_sections, summary = await call_rows(calls, rounds)
        sections.extend(call_sections)
    if "size" in only:
        sizes = await size_rows()
        columns = ["result", "call ms", "chars the model gets", "peak RSS MB", "worst loop stall ms"]
        sections.append(("size (default max_result_bytes)", columns, sizes))
        summary["size_50mb_ms"] = sizes[-1][1]
    if "shutdown" in only:
        endings = [shutdown_row(ending) for ending in ("close", "exit", "SIGTERM", "SIGKILL")]
        columns = ["kernel ends by", "processes", "s until none left", "left"]
        sections.append(("shutdown (server ignores SIGTERM and EOF, setsid grandchild)", columns, endings))
        summary["shutdown_worst_s"] = max((r[2] for r in endings if isinstance(r[2], float)), default=None)
    report_sections("mcp", sections, summary)


async def call_rows(
    calls: int, rounds: int
) -> tuple[list[tuple[str, list[str], list[list[Any]]]], dict[str, Any]]:
    local = tool(add, read_only=True)
    in_process = await timed(lambda i: local.call({"a": i, "b": 1}, CONTEXT), calls)
    base = statistics.fmean(in_process)
    sdk = await sdk_samples(calls)
    servers, tools, startup = await servers_tools(SERVER, "bench")
    time_servers, time_tools, time_startup = await servers_tools(TIME_SERVER, "time")
    try:
        remote = tools["bench__add"]
        through = await timed(lambda i: remote.call({"a": i, "b": 1}, CONTEXT), calls)
        clock = time_tools["time__get_current_time"]
        timed_clock = await timed(lambda i: clock.call({"timezone": "Etc/UTC"}, CONTEXT), calls)
        local_run = await run_rounds(rounds, [local], False)
        mcp_run = await run_rounds(rounds, [], servers)
    finally:
        servers.close()
        time_servers.close()
    per_call = [
        row("in-process tool", in_process, None),
        row("SDK client, stdio", sdk, base),
        row("ipyagent McpServers, stdio", through, base),
        row("mcp-server-time via ipyagent", timed_clock, base),
    ]
    per_round = (mcp_run - local_run) / rounds * 1e6
    runs = [
        ["tool in-process", rounds, local_run * 1e3, local_run / rounds * 1e6],
        ["tool via stdio MCP server", rounds, mcp_run * 1e3, mcp_run / rounds * 1e6],
    ]
    sections: list[tuple[str, list[str], list[list[Any]]]] = [
        (
            "one call at a time",
            ["path", "calls", "mean µs", "p50 µs", "p95 µs", "over in-process µs"],
            per_call,
        ),
        ("agent runs", ["tool", "rounds", "total ms", "µs/round"], runs),
        (
            "startup",
            ["server", "start + list tools ms"],
            [["bench (SDK)", startup * 1e3], ["mcp-server-time", time_startup * 1e3]],
        ),
    ]
    return sections, {
        "mcp_overhead_us_per_call": round(statistics.fmean(through) - base, 1),
        "ipyagent_over_sdk_us_per_call": round(statistics.fmean(through) - statistics.fmean(sdk), 1),
        "mcp_overhead_us_per_run_round": round(per_round, 1),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--only", default="calls,size,shutdown", help="sections to run, comma-separated")
    options = parser.parse_args()
    asyncio.run(main(options.calls, options.rounds, set(options.only.split(","))))
