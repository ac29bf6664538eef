"""How much CPU the streaming stack adds over reading the raw stream.

A loopback server (a child process, so its CPU is not counted) streams a 20,000-token reply in
the OpenAI Chat Completions format. Measured, as client-process CPU time (median of runs):

  (a) raw httpx: read lines, ``json.loads`` each ``data:`` payload;
  (b) our OpenAI adapter producing provider events;
  (c) a whole ``Agent.run`` consuming them.

Prints a table with the ratios b/a and c/a (target: c/a <= 1.3) and writes JSON to
``bench/results/stream_overhead.json`` (through ``_report``, like the other benchmarks). It
measures; it asserts nothing.

    python bench/stream_overhead.py [--tokens 20000] [--runs 5]
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


def serve(tokens: int) -> None:
    """The child process: serve the transcript to every POST, print the port, run forever."""
    body = transcript(tokens)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", "0")))
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


async def raw_httpx(base_url: str) -> int:
    count = 0
    async with (
        httpx.AsyncClient() as client,
        client.stream("POST", base_url + "/chat/completions", json={"model": "bench"}) as response,
    ):
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


def main(tokens: int, runs: int) -> dict[str, object]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--tokens", str(tokens)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        base_url = f"http://127.0.0.1:{child.stdout.readline().strip()}"
        results = asyncio.run(measure_all(base_url, runs))
    finally:
        child.terminate()
        child.wait()
    return {"tokens": tokens, "runs": runs, "platform": platform.platform(), "results": results}


def show(data: dict[str, object]) -> None:
    results = data.pop("results")
    assert isinstance(results, dict)
    base = results["a_raw_httpx"]["cpu_s"]
    rows: list[list[object]] = []
    ratios: dict[str, float | None] = {"b/a": None, "c/a": None}
    for name, value in results.items():
        if isinstance(value, str):
            rows.append([name, value, "", ""])
            continue
        ratio = value["cpu_s"] / base
        rows.append([name, f"{value['cpu_s'] * 1000:.1f}", f"{value['wall_s'] * 1000:.1f}", f"{ratio:.2f}"])
        if name != "a_raw_httpx":
            ratios[f"{name[0]}/a"] = round(ratio, 3)
    print(f"{data['tokens']:,}-token reply, median of {data['runs']} runs, CPU of the client process\n")
    report(
        "stream_overhead",
        ["measure", "cpu ms", "wall ms", "ratio to (a)"],
        rows,
        {**data, **ratios, "target c/a": 1.3},
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.tokens)
    else:
        show(main(args.tokens, args.runs))
