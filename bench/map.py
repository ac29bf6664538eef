"""What ``agent.map`` costs: throughput by concurrency, checkpointing per item, and resuming.

A loopback server (a child process, so its CPU is not counted) speaks the OpenAI Chat
Completions wire and answers every request after ``--latency`` seconds with a typed answer (the
number in the prompt, doubled) and its usage. Measured in this process:

  (a) 1,000 items at concurrency 1, 8 and 32, checkpointed as by default (fsync per item):
      items per second (wall) and CPU per item in this process (what the kernel pays);
  (b) the checkpoint's cost per item to the map's loop: appending one record (fsync runs on a
      thread of its own), against what an fsync inline would cost;
  (c) resuming a 10,000-item map with 9,000 items on file: the time until the first new
      request leaves (reading and checking the checkpoint, skipping what is done), the whole
      rerun, and how many requests it made (it should make 1,000).

Prints a table and writes ``bench/results/map.json``. It measures; it asserts nothing.

    python bench/map.py [--items 1000] [--latency 0.02] [--concurrency 1,8,32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _report import report_sections


def serve(latency: float) -> None:
    """The child process: answer each POST after ``latency`` seconds; print the port; run forever."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
            prompt = next(m["content"] for m in request["messages"] if m["role"] == "user")
            answer = json.dumps({"result": 2 * int(prompt.split()[-1])})
            time.sleep(latency)
            chunks = [
                {"choices": [{"index": 0, "delta": {"role": "assistant", "content": answer}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {"choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 8, "total_tokens": 128}},
            ]
            body = ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128

    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


def agent(base_url: str) -> Any:
    from ipyagent import Agent
    from ipyagent.agentlib.providers.openai import OpenAIProvider

    provider = OpenAIProvider("bench", base_url=base_url, api_key="bench-key-not-secret", endpoint="bench")
    return Agent(model=provider, system="Double the number.")


async def throughput(base_url: str, items: int, concurrency: int, folder: Path) -> list[Any]:
    bench_agent = agent(base_url)
    path = folder / f"c{concurrency}.jsonl"
    cpu, wall = time.process_time(), time.perf_counter()
    result = await bench_agent.map(
        range(items),
        "Double {item}",
        output_type=int,
        concurrency=concurrency,
        checkpoint=path,
        progress=False,
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    ok = sum(1 for i, value in enumerate(result) if value == 2 * i)
    bench_agent.close()
    return [concurrency, items, ok, round(items / wall, 1), round(cpu / items * 1000, 3), round(wall, 2)]


def checkpoint_writes(folder: Path, count: int) -> list[list[Any]]:
    """What the map's loop pays per finished item (the append; fsync runs on its own thread),
    and what one fsync per item would cost it instead."""
    import os

    from ipyagent.agentlib.checkpoint import CheckpointRecord, open_checkpoint

    rows = []
    for fsync in (True, False):
        store = open_checkpoint(folder / f"writes-{fsync}.jsonl", "f" * 64, fsync=fsync)
        times = []
        for index in range(count):
            record = CheckpointRecord(index, "k" * 16, True, {"result": index}, None, {"input_tokens": 120})
            started = time.perf_counter()
            store.write(record)
            times.append(time.perf_counter() - started)
        closing = time.perf_counter()
        store.close()
        closed = round((time.perf_counter() - closing) * 1e3, 1)
        mode = "append, fsync on its thread" if fsync else "append, no fsync"
        rows.append(
            [mode, count, round(statistics.median(times) * 1e6, 1), round(max(times) * 1e6, 1), closed]
        )
    fd = os.open(folder / "fsync.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    times = []
    for _ in range(min(count, 200)):
        started = time.perf_counter()
        os.write(fd, b"x" * 100 + b"\n")
        os.fsync(fd)
        times.append(time.perf_counter() - started)
    os.close(fd)
    rows.append(["append + fsync inline (not done)", len(times), round(statistics.median(times) * 1e6, 1),
                 round(max(times) * 1e6, 1), 0.0])  # fmt: skip
    return rows


class Instant:
    """A model that answers at once, and notes when its first request came."""

    model_id = "bench/instant"
    context_limit = None

    def __init__(self) -> None:
        self.requests = 0
        self.first: float | None = None

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        from ipyagent.agentlib.model import ResponseEnd, TextChunk, UsageReport
        from ipyagent.agentlib.usage import Usage

        if self.first is None:
            self.first = time.perf_counter()
        self.requests += 1
        number = int(request.messages[0].text.split()[-1])
        yield TextChunk(text=json.dumps({"result": 2 * number}))
        yield UsageReport(usage=Usage(input_tokens=120, output_tokens=8))
        yield ResponseEnd()


async def resume(folder: Path, total: int, done: int) -> list[list[Any]]:
    from ipyagent import Agent
    from ipyagent.agentlib.checkpoint import CheckpointRecord, open_checkpoint
    from ipyagent.agentlib.map_items import fingerprint, prompt_key
    from ipyagent.agentlib.output import output_spec

    prompts = [f"Double {n}" for n in range(total)]
    spec = output_spec(int)
    assert spec is not None
    call = fingerprint(prompts, spec.schema.json_schema, Instant.model_id)
    path = folder / "resume.jsonl"
    store = open_checkpoint(path, call, fsync=False)
    for index in range(done):  # what a crashed map left on file
        store.write(
            CheckpointRecord(index, prompt_key(prompts[index]), True, 2 * index, None, {"input_tokens": 120})
        )
    store.close()
    model = Instant()
    started = time.perf_counter()
    result = await Agent(model=model, system="Double the number.").map(
        range(total), "Double {item}", output_type=int, checkpoint=path, progress=False
    )
    whole = time.perf_counter() - started
    assert model.first is not None
    ok = sum(1 for i, value in enumerate(result) if value == 2 * i)
    return [[total, done, model.requests, ok, round(model.first - started, 3), round(whole, 2)]]


async def measure(base_url: str, items: int, levels: list[int]) -> dict[str, list[list[Any]]]:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        await throughput(base_url, 20, 4, folder)  # warm-up: imports, the connection pool
        rows = [await throughput(base_url, items, level, folder) for level in levels]
        writes = checkpoint_writes(folder, 2000)
        resumed = await resume(folder, 10_000, 9_000)
    return {"throughput": rows, "checkpoint": writes, "resume": resumed}


def main(items: int, latency: float, levels: list[int]) -> None:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--latency", str(latency)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        base_url = f"http://127.0.0.1:{child.stdout.readline().strip()}"
        results = asyncio.run(measure(base_url, items, levels))
    finally:
        child.terminate()
        child.wait()
    report_sections(
        "map",
        [
            (
                f"(a) {items:,} items, server latency {latency * 1000:g} ms, checkpointed (fsync)",
                ["concurrency", "items", "correct", "items/s", "CPU ms/item", "wall s"],
                results["throughput"],
            ),
            (
                "(b) checkpoint cost per item, to the map's loop",
                ["mode", "writes", "median µs", "max µs", "close ms"],
                results["checkpoint"],
            ),
            (
                "(c) resume: 9,000 of 10,000 on file",
                ["items", "on file", "requests made", "correct", "s to first request", "s whole rerun"],
                results["resume"],
            ),
        ],
        {"latency_s": latency, "platform": platform.platform(), "cpus": __import__("os").cpu_count()},
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--concurrency", default="1,8,32")
    args = parser.parse_args()
    if args.serve:
        serve(args.latency)
    else:
        main(args.items, args.latency, [int(c) for c in args.concurrency.split(",")])
