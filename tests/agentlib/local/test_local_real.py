"""The real default model (Qwen2.5-Coder, from its PyPI weight packages): a few agent tasks,
and cancellation of a long prompt. Skipped when the weight packages are not installed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ipyagent import Agent, tool
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.model import ModelRequest, TextChunk
from ipyagent.agentlib.providers.local import LocalModel


@tool(read_only=True)
def get_weather(city: str) -> str:
    """Current weather in a city.

    Args:
        city: The city's name.
    """
    return f"{city}: 17°C, light rain"


@pytest.fixture(scope="module")
def model(default_gguf: Path) -> LocalModel:
    return LocalModel(default_gguf, name="default", seed=0)


async def test_calls_a_tool_with_valid_arguments_then_answers(model: LocalModel) -> None:
    agent = Agent(model=model, tools=[get_weather], max_turns=3, max_tokens=120, temperature=0.0)
    result = await agent.run("Use the weather tool: what's the weather in Paris?")
    assert result.status == "completed", repr(result)
    calls = [c for m in result.messages for c in m.tool_calls]
    assert calls and calls[0].name == "get_weather"
    assert calls[0].arguments is not None and "paris" in calls[0].arguments["city"].lower()
    assert "17" in result.text
    # The answer after the result is text: not the call written again, nor its JSON envelope.
    assert len(calls) == 1
    assert not result.text.lstrip().startswith(("{", "```", "<")), result.text


async def test_answers_without_a_tool_when_none_is_needed(model: LocalModel) -> None:
    agent = Agent(model=model, tools=[get_weather], max_turns=2, max_tokens=40, temperature=0.0)
    result = await agent.run("What is the capital of France? Answer in one word.")
    assert result.status == "completed", repr(result)
    assert not [c for m in result.messages for c in m.tool_calls]
    assert "paris" in result.text.lower()


async def test_cancelling_a_long_prompt_aborts_its_evaluation(
    model: LocalModel, default_gguf: Path, backend: str, backend_impl: Any
) -> None:
    long = "Summarise this text. " + "The quick brown fox jumps over the lazy dog. " * 300
    request = ModelRequest(model="default", messages=[Message.user(long)])
    first: list[str] = []

    async def consume() -> None:
        async for event in model.stream(request):
            if isinstance(event, TextChunk):
                first.append(event.text)

    task = asyncio.create_task(consume())
    await asyncio.sleep(1.0)  # the ~3,000-token prompt takes far longer than this to evaluate
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    loaded = backend_impl.load(default_gguf, model.n_ctx, None)
    # The worker lets go of the model (a generous bound: this checks that it stops, not how
    # fast, which depends on the machine and its load) ...
    assert await asyncio.to_thread(loaded.lock.acquire, timeout=60.0)
    try:
        # ... and it got there by aborting the prompt's evaluation, not by finishing it: fewer
        # tokens are in the context than the user's text alone has.
        if backend == "llama_cpp":
            assert loaded.llm.n_tokens < len(loaded.llm.tokenize(long.encode(), add_bos=False))
        else:  # the server's last progress report: part of the prompt, of all of it
            processed, total = loaded.progress
            assert 0 < processed < total
    finally:
        loaded.lock.release()
    assert not first
