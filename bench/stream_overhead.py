"""How much CPU the streaming stack adds over reading the raw stream, and what a turn costs
before its first token.

A loopback server (a child process, so its CPU is not counted) streams a 20,000-token reply in
the OpenAI Chat Completions format. Measured, as client-process CPU time (median of runs):

  (a) raw httpx: read lines, ``json.loads`` each ``data:`` payload (one client for all runs);
  (b) our OpenAI adapter producing provider events;
  (c) a whole ``Agent.run`` consuming them.

Then the multi-turn case: a fresh agent per conversation runs ``--turns`` model turns (a tool
call each, then a short answer) against the same server, and closes. Measured per turn, from the
request starting to its first streamed token (text or tool call), wall and CPU time:

  (d) turn 1, which opens the connection;
  (e) turns 2 and later, which may reuse it.

Prints a table with the ratios b/a and c/a (target: c/a <= 1.3) and writes JSON to
``bench/results/stream_overhead.json`` (through ``_report``, like the other benchmarks). It
measures; it asserts nothing.

    python bench/stream_overhead.py [--tokens 20000] [--runs 5] [--conversations 20] [--turns 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from _report import report


def transcript(tokens: int) -> bytes:
    def event(delta: dict[str, object], finish: str | None = None) -> str:
        payload = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "model": "bench",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(payload)}\n\n"

    parts = [event({"role": "assistant", "content": ""})]
    parts += [event({"content": f" tok{i % 100}"}) for i in range(tokens)]
    parts.append(event({}, "stop"))
    usage = {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": tokens + 10}
    parts.append(f"data: {json.dumps({'id': 'chatcmpl-bench', 'choices': [], 'usage': usage})}\n\n")
    parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()


def turn_reply(request: dict[str, Any], turns: int) -> bytes:
    """The multi-turn case's reply: a tool call until ``turns - 1`` results are in, then text."""
    results = sum(1 for m in request.get("messages", []) if m.get("role") == "tool")

    def event(delta: dict[str, object], finish: str | None = None) -> str:
        payload = {"id": "chatcmpl-turn", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(payload)}\n\n"

    if results < turns - 1:
        call = {"index": 0, "id": f"call_{results}", "type": "function",
                "function": {"name": "step", "arguments": json.dumps({"n": results})}}  # fmt: skip
        parts = [event({"role": "assistant", "tool_calls": [call]}), event({}, "tool_calls")]
    else:
        parts = [event({"role": "assistant", "content": "done"}), event({}, "stop")]
    return "".join([*parts, "data: [DONE]\n\n"]).encode()


def serve(tokens: int, turns: int) -> None:
    """The child process: serve the transcript to every POST (a turn's reply to model "turns"),
    print the port, run forever. Connections are kept alive (HTTP/1.1 with a Content-Length)."""
    transcript_body = transcript(tokens)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes; with Nagle's algorithm the body would wait
        # for the client's delayed ACK (40 ms), which servers of streamed replies do not do.
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
            body = turn_reply(request, turns) if request.get("model") == "turns" else transcript_body
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            for start in range(0, len(body), 16384):
                self.wfile.write(body[start : start + 16384])

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


_raw_clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}


async def raw_httpx(base_url: str) -> int:
    # One client for every run, as the adapters keep theirs: (a) pays no client setup either.
    loop = asyncio.get_running_loop()
    if loop not in _raw_clients:
        _raw_clients[loop] = httpx.AsyncClient()
    client = _raw_clients[loop]
    count = 0
    async with client.stream("POST", base_url + "/chat/completions", json={"model": "bench"}) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                json.loads(line[6:])
                count += 1
    return count


def _provider(base_url: str) -> object:
    from ipyagent.agentlib.providers.openai import OpenAIProvider

    return OpenAIProvider("bench", base_url=base_url, api_key="bench-key-not-secret", endpoint="bench")


async def adapter(base_url: str) -> int:
    from ipyagent.agentlib.messages import Message
    from ipyagent.agentlib.model import ModelRequest

    provider = _provider(base_url)
    request = ModelRequest(model="bench", messages=[Message.user("hi")])
    count = 0
    async for _ in provider.stream(request):  # type: ignore[attr-defined]
        count += 1
    return count


async def agent_run(base_url: str) -> int:
    from ipyagent.agentlib.agent import Agent

    result = await Agent(model=_provider(base_url)).run("hi")  # type: ignore[arg-type]
    return len(str(getattr(result, "text", result)))


async def conversation(base_url: str, turns: int) -> list[tuple[float, float]]:
    """One fresh agent's run of ``turns`` model turns; (wall, cpu) seconds from each request's
    start to its first token."""
    from ipyagent.agentlib.agent import Agent
    from ipyagent.agentlib.endpoints import register_endpoint
    from ipyagent.agentlib.tools import tool

    @tool(read_only=True)
    def step(n: int) -> str:
        """One step."""
        return f"step {n} done"

    register_endpoint("bench-turns", kind="openai", base_url=base_url)
    agent = Agent(model="bench-turns/turns", tools=[step])
    started: list[tuple[float, float]] = []
    first: list[tuple[float, float]] = []

    def on_event(event: Any) -> None:
        if event.type == "request_started":
            started.append((time.perf_counter(), time.process_time()))
        elif event.type in ("text_delta", "tool_call_start") and len(first) < len(started):
            wall, cpu = started[-1]
            first.append((time.perf_counter() - wall, time.process_time() - cpu))

    agent.on("*", on_event)
    try:
        result = await agent.run("Take the steps.")
    finally:
        agent.close()  # the next conversation's turn 1 opens a connection of its own
    if len(first) != turns or getattr(result, "text", "") != "done":
        raise RuntimeError(f"expected {turns} turns ending in 'done', got {len(first)}: {result!r}")
    return first


async def measure_turns(base_url: str, conversations: int, turns: int) -> dict[str, dict[str, float] | str]:
    try:
        await conversation(base_url, turns)  # warm-up: imports
        samples = [await conversation(base_url, turns) for _ in range(conversations)]
    except Exception as exc:
        return {"turns": f"failed: {type(exc).__name__}: {exc}"}
    firsts = [s[0] for s in samples]
    later = [t for s in samples for t in s[1:]]
    return {
        name: {
            "wall_s": statistics.median(w for w, _ in values),
            "cpu_s": statistics.median(c for _, c in values),
        }
        for name, values in (("d_first_token_turn_1", firsts), ("e_first_token_turns_2+", later))
    }


async def timed(fn: Callable[[str], Awaitable[int]], base_url: str) -> tuple[float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    await fn(base_url)
    return time.process_time() - c0, time.perf_counter() - w0


async def measure_all(base_url: str, runs: int) -> dict[str, dict[str, float] | str]:
    """Runs of (a), (b) and (c) take turns, so a change in the machine's load (another process
    starting, say) shifts all three alike instead of skewing the ratios."""
    measures = {"a_raw_httpx": raw_httpx, "b_adapter": adapter, "c_agent_run": agent_run}
    failed: dict[str, str] = {}
    for name, fn in measures.items():  # warm-up: imports, connection setup
        try:
            await fn(base_url)
        except Exception as exc:  # the loop may not be ready; report it rather than crash
            failed[name] = f"failed: {type(exc).__name__}: {exc}"
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in measures if name not in failed}
    for _ in range(runs):
        for name in samples:
            samples[name].append(await timed(measures[name], base_url))
    results: dict[str, dict[str, float] | str] = {}
    for name in measures:
        if name in failed:
            results[name] = failed[name]
            continue
        cpu, wall = zip(*samples[name], strict=True)
        results[name] = {"cpu_s": statistics.median(cpu), "wall_s": statistics.median(wall)}
    return results


async def measure(
    base_url: str, runs: int, conversations: int, turns: int
) -> dict[str, dict[str, float] | str]:
    results = await measure_all(base_url, runs)
    results.update(await measure_turns(base_url, conversations, turns))
    for client in _raw_clients.values():
        await client.aclose()
    return results


def main(tokens: int, runs: int, conversations: int, turns: int) -> dict[str, object]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--tokens", str(tokens), "--turns", str(turns)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        base_url = f"http://127.0.0.1:{child.stdout.readline().strip()}"
        results = asyncio.run(measure(base_url, runs, conversations, turns))
    finally:
        child.terminate()
        child.wait()
    return {
        "tokens": tokens,
        "runs": runs,
        "conversations": conversations,
        "turns": turns,
        "platform": platform.platform(),
        "results": results,
    }


def show(data: dict[str, object]) -> None:
    results = data.pop("results")
    assert isinstance(results, dict)
    base = results["a_raw_httpx"]["cpu_s"]
    rows: list[list[object]] = []
    ratios: dict[str, float | None] = {"b/a": None, "c/a": None}
    first_token: dict[str, float] = {}
    for name, value in results.items():
        if isinstance(value, str):
            rows.append([name, value, "", ""])
            continue
        cpu, wall = f"{value['cpu_s'] * 1000:.1f}", f"{value['wall_s'] * 1000:.1f}"
        if name.startswith(("d_", "e_")):  # per turn, to the first token: no ratio to a whole reply
            rows.append([name, cpu, wall, ""])
            first_token[f"{name}_wall_ms"] = round(value["wall_s"] * 1000, 2)
            continue
        ratio = value["cpu_s"] / base
        rows.append([name, cpu, wall, f"{ratio:.2f}"])
        if name != "a_raw_httpx":
            ratios[f"{name[0]}/a"] = round(ratio, 3)
    print(
        f"(a)-(c): {data['tokens']:,}-token reply, median of {data['runs']} runs, CPU of the client "
        f"process; (d), (e): median over {data['conversations']} conversations of {data['turns']} turns\n"
    )
    report(
        "stream_overhead",
        ["measure", "cpu ms", "wall ms", "ratio to (a)"],
        rows,
        {**data, **ratios, **first_token, "target c/a": 1.3},
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.tokens, args.turns)
    else:
        show(main(args.tokens, args.runs, args.conversations, args.turns))
