"""Real peer: our OpenAI adapter against an OpenAI-compatible llama.cpp server on loopback, same
GGUF: `python -m llama_cpp.server` with the llama_cpp backend, and xllamacpp's in-process server
(its ``listening_address``, llama.cpp's own ``llama-server`` code) with xllamacpp.

The servers are code we did not write. Two things about llama_cpp.server shape the test: it
streams OpenAI ``tool_calls`` only when the request forces a tool (``tool_choice`` naming one;
with ``"auto"`` it refuses to stream), and our adapter sends no ``tool_choice``. So the test's
HTTP client forces the tool on the first request of the round trip; everything else — the
streamed call, running the tool, sending the call and its result back, the answer — is the
adapter and the agent as users get them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ipyagent import Agent, tool
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.model import ModelRequest, ModelSettings, TextChunk, UsageReport
from ipyagent.agentlib.providers.openai import OpenAIProvider


@tool(read_only=True)
def get_weather(city: str) -> str:
    """Current weather in a city.

    Args:
        city: The city's name.
    """
    return f"{city}: 17°C, light rain"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(default_gguf: Path, backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if backend == "xllamacpp":
        yield from _xllamacpp_server(default_gguf)
        return
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed")
    port = _free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads", "2"]
    log = tmp_path_factory.mktemp("server") / "server.log"
    # A file, not a pipe: the server logs more at startup than a pipe holds, and would block.
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy())
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited: {log.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(f"{base}/models", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"llama_cpp.server did not start: {log.read_text()[-2000:]}"
            time.sleep(0.3)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _xllamacpp_server(gguf: Path) -> Iterator[str]:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(gguf)
    params.n_ctx, params.n_parallel, params.verbosity = 4096, 1, -1
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = 2
    params.use_jinja = True  # the model's template renders tools and parses its calls
    server = xllamacpp.Server(params)
    try:
        yield str(server.listening_address).rstrip("/") + "/v1"
    finally:
        del server  # stops it and frees the model


async def test_streams_text_and_usage(server: str) -> None:
    async with httpx.AsyncClient(timeout=300) as client:
        provider = OpenAIProvider("default", base_url=server, endpoint="llamacpp", client=client, timeout=300)
        request = ModelRequest(
            model="default",
            messages=[Message.user("Count from 1 to 5, separated by commas.")],
            settings=ModelSettings(max_tokens=30, temperature=0.0),
        )
        events = [e async for e in provider.stream(request)]
    text = "".join(e.text for e in events if isinstance(e, TextChunk))
    assert len([e for e in events if isinstance(e, TextChunk)]) > 3  # it streamed, in pieces
    assert "1" in text and "5" in text
    assert events[-1].type == "end"
    usage = [e for e in events if isinstance(e, UsageReport)]
    assert not usage or usage[-1].usage.output_tokens > 0


class _ForceFirstTool(httpx.AsyncHTTPTransport):
    """Adds ``tool_choice`` naming the first tool to a request whose last message is the user's,
    or ``"required"`` (``named=False``) for llama.cpp's server, which reads only the strings."""

    def __init__(self, *, named: bool = True) -> None:
        super().__init__()
        self.named = named

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(await request.aread())
        if body.get("tools") and body["messages"][-1]["role"] == "user":
            name = body["tools"][0]["function"]["name"]
            named = {"type": "function", "function": {"name": name}}
            body["tool_choice"] = named if self.named else "required"
            headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
            request = httpx.Request(request.method, request.url, headers=headers, json=body)
        return await super().handle_async_request(request)


async def test_tool_call_round_trip_through_the_agent(server: str, backend: str) -> None:
    if backend == "xllamacpp":
        # Measured on xllamacpp 2026.10.11549 with Qwen2.5-Coder-1.5B (use_jinja on, the GGUF's
        # template renders tools): with tool_choice "required" or naming the tool, its server
        # streamed the call as text in a ```json block, neither enforcing nor parsing a call.
        pytest.skip("xllamacpp's server does not return this model's tool calls as tool_calls")
    transport = _ForceFirstTool(named=backend == "llama_cpp")
    async with httpx.AsyncClient(transport=transport, timeout=300) as client:
        provider = OpenAIProvider("default", base_url=server, endpoint="llamacpp", client=client, timeout=300)
        agent = Agent(model=provider, tools=[get_weather], max_turns=3, max_tokens=80, temperature=0.0)
        result = await agent.run("What's the weather in Paris?")
    assert result.status == "completed", (repr(result), result.error)
    calls = [c for m in result.messages for c in m.tool_calls]
    assert calls and calls[0].name == "get_weather"
    assert calls[0].arguments is not None and "paris" in str(calls[0].arguments.get("city", "")).lower()
    results = [r for m in result.messages for r in m.tool_results]
    assert results and results[0].content.startswith("Paris: 17")
    # The server accepted the request carrying the call and its result, and answered it. What
    # the small model says then is its own business (bench/local_model.py measures that).
    assert result.text.strip()
    assert len([m for m in result.messages if m.role == "assistant"]) >= 2
