"""The local provider on a tiny random-weight GGUF: loading, streaming, usage, cancellation."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ipyagent import Agent
from ipyagent.agentlib.errors import ContextOverflowError
from ipyagent.agentlib.messages import Message
from ipyagent.agentlib.model import (
    ModelRequest,
    ModelSettings,
    ProviderEvent,
    ResponseEnd,
    TextChunk,
    ToolSpec,
    UsageReport,
)
from ipyagent.agentlib.providers.local import LocalModel, tool_grammar


def request(text: str, *, max_tokens: int | None = 12, **kwargs: object) -> ModelRequest:
    return ModelRequest(
        model="tiny",
        messages=[Message.user(text)],
        settings=ModelSettings(max_tokens=max_tokens, temperature=0.0),
        **kwargs,  # type: ignore[arg-type]
    )


async def collect(model: LocalModel, req: ModelRequest) -> list[ProviderEvent]:
    return [event async for event in model.stream(req)]


def workers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ipyagent-local-model"]


async def test_streams_text_usage_and_end(tiny_gguf: Path) -> None:
    model = LocalModel(tiny_gguf, name="tiny", n_ctx=512)
    assert model.model_id == "local/tiny" and model.context_limit == 512
    events = await collect(model, request("Hello"))
    texts = [e.text for e in events if isinstance(e, TextChunk)]
    assert len(texts) > 1 and all(t.isprintable() for t in texts)
    usage = next(e for e in events if isinstance(e, UsageReport))
    assert usage.usage.output_tokens == 12 and usage.context_limit == 512
    assert usage.usage.input_tokens + usage.usage.cache_read_tokens > 5
    assert events[-1] == ResponseEnd(finish_reason="length")
    # Greedy decoding on the same prompt gives the same text.
    again = await collect(model, request("Hello"))
    assert "".join(e.text for e in again if isinstance(e, TextChunk)) == "".join(texts)


async def test_loads_once_per_file(tiny_gguf: Path) -> None:
    first = LocalModel(tiny_gguf, n_ctx=512)
    second = LocalModel(tiny_gguf, name="other", n_ctx=512)
    assert first.load() is second.load()


async def test_the_shared_prompt_prefix_is_reused(tiny_gguf: Path) -> None:
    model = LocalModel(tiny_gguf, n_ctx=512)
    history = [Message.user("A first question that is long enough to matter."), Message.user("more")]
    await collect(
        model, ModelRequest(model="tiny", messages=history[:1], settings=ModelSettings(max_tokens=2))
    )
    events = await collect(
        model, ModelRequest(model="tiny", messages=history, settings=ModelSettings(max_tokens=2))
    )
    usage = next(e for e in events if isinstance(e, UsageReport)).usage
    assert usage.cache_read_tokens > 10


async def test_cancelling_stops_generation_and_frees_the_model(tiny_gguf: Path, backend_impl: Any) -> None:
    model = LocalModel(tiny_gguf, n_ctx=2048)
    seen: list[str] = []
    streaming = asyncio.Event()

    async def consume() -> None:
        async for event in model.stream(request("Go on forever", max_tokens=None)):
            if isinstance(event, TextChunk):
                seen.append(event.text)
                if len(seen) == 5:
                    streaming.set()

    task = asyncio.create_task(consume())
    await streaming.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    cancelled_at = time.perf_counter()
    loaded = backend_impl.load(tiny_gguf, 2048, None)
    assert await asyncio.to_thread(loaded.lock.acquire, timeout=2.0)
    loaded.lock.release()
    assert time.perf_counter() - cancelled_at < 1.0
    for thread in workers():
        thread.join(timeout=2.0)
    assert not workers()
    assert len(seen) < 1000  # it stopped long before the context window ran out
    # The model works again right away.
    events = await collect(model, request("Again", max_tokens=3))
    assert next(e for e in events if isinstance(e, UsageReport)).usage.output_tokens == 3


async def test_closing_the_stream_early_stops_the_worker(tiny_gguf: Path) -> None:
    model = LocalModel(tiny_gguf, n_ctx=2048)
    stream = model.stream(request("Go", max_tokens=None))
    async for event in stream:
        if isinstance(event, TextChunk):
            break
    await stream.aclose()  # type: ignore[attr-defined]
    for thread in workers():
        thread.join(timeout=2.0)
    assert not workers()


async def test_a_prompt_larger_than_the_window_is_a_context_overflow(tiny_gguf: Path) -> None:
    model = LocalModel(tiny_gguf, n_ctx=64)
    with pytest.raises(ContextOverflowError, match="context window"):
        await collect(model, request("x" * 500))


async def test_an_agent_runs_on_it(tiny_gguf: Path) -> None:
    agent = Agent(model=LocalModel(tiny_gguf, n_ctx=2048), max_tokens=8, temperature=0.0)
    result = await agent.run("hi")
    assert result.status == "completed", repr(result)
    assert result.text and result.usage.output_tokens == 8


async def test_with_tools_the_reply_is_a_valid_call_or_text(tiny_gguf: Path) -> None:
    weather = ToolSpec(
        name="get_weather",
        description="Weather.",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 5}, "units": {"enum": ["C", "F"]}},
            "required": ["city", "units"],
        },
    )
    model = LocalModel(tiny_gguf, n_ctx=1024, seed=1)
    for _ in range(3):
        events = await collect(model, request("weather?", max_tokens=40, tools=[weather]))
        text = "".join(e.text for e in events if isinstance(e, TextChunk))
        assert not text.startswith("<")  # the grammar: a reply opening with "<" is a tool call


def test_the_tool_grammar_compiles(backend: str, check_grammar: Any) -> None:
    tools = [
        ToolSpec(name="no_args", description="", parameters={"type": "object", "properties": {}}),
        ToolSpec(
            name="nested",
            description="",
            parameters={
                "type": "object",
                "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
                "required": ["items"],
                "$defs": {"Item": {"type": "object", "properties": {"n": {"type": "integer"}}}},
            },
        ),
    ]
    dialect = "lark" if backend == "xllamacpp" else "gbnf"
    check_grammar(tool_grammar(tools, dialect=dialect))
    if dialect == "lark":  # the rest of a reply whose nudged first token opened a call
        for first in ("<", "<tool_call>", "<tool_call>\n"):
            check_grammar(tool_grammar(tools, dialect=dialect, opened=first))


async def test_a_long_run_of_whitespace_ends_the_reply(tiny_gguf: Path, backend_impl: Any) -> None:
    # A grammar that allows only newlines (and no end for a long while) stands in for a model
    # stuck writing them.
    from ipyagent.agentlib.providers._local_llama import MAX_BLANK_RUN, Done

    loaded = backend_impl.load(tiny_gguf, 1024, None)
    tokens = backend_impl.tokenize_prompt(loaded, "Hello")
    job = backend_impl.Job(loaded, tokens, 500, 1.0, 'root ::= "\\n"{1000}', 0, 0.0)
    queue: asyncio.Queue[object] = asyncio.Queue()
    await asyncio.to_thread(job.run, asyncio.get_running_loop(), queue)
    await asyncio.sleep(0)  # the worker's items are delivered through the loop
    items = [queue.get_nowait() for _ in range(queue.qsize())]
    done = items[-1]
    assert isinstance(done, Done), done
    assert (done.generated, done.truncated) == (MAX_BLANK_RUN, False)
    assert set("".join(i for i in items if isinstance(i, str))) == {"\n"}


def test_a_draft_is_what_followed_the_latest_match_of_the_last_tokens() -> None:
    import numpy as np

    from ipyagent.agentlib.providers._local_llama import find_draft

    seq = np.array([5, 1, 2, 3, 9, 9, 1, 2, 3, 7, 8, 4, 1, 2, 3], dtype=np.intc)
    assert find_draft(seq, 3) == [7, 8, 4]  # after the latest earlier "1 2 3", not the first
    assert find_draft(seq, 10) == [7, 8, 4, 1, 2, 3]  # up to the end of what is known
    assert find_draft(np.array([4, 2, 6, 8, 6], dtype=np.intc), 2) == []  # one token is not enough
    assert find_draft(np.array([1, 2, 9, 1, 2], dtype=np.intc), 4) == [9, 1, 2]  # two are
    assert find_draft(np.array([1, 2], dtype=np.intc), 4) == []


async def run_job(loaded: object, tokens: list[int], lookup: int) -> tuple[str, object]:
    from ipyagent.agentlib.providers._local_llama import Done, Job

    job = Job(loaded, tokens, 120, 0.0, None, 0, 0.0, lookup)  # type: ignore[arg-type]
    queue: asyncio.Queue[object] = asyncio.Queue()
    await asyncio.to_thread(job.run, asyncio.get_running_loop(), queue)
    await asyncio.sleep(0)
    items = [queue.get_nowait() for _ in range(queue.qsize())]
    assert isinstance(items[-1], Done), items[-1]
    return "".join(i for i in items if isinstance(i, str)), job


async def test_prompt_lookup_gives_the_same_reply_and_keeps_only_sampled_tokens(
    tiny_gguf: Path, backend: str
) -> None:
    if backend != "llama_cpp":
        pytest.skip("prompt-lookup drafts are llama_cpp's generation loop only")
    from ipyagent.agentlib.providers._local_llama import load

    loaded = load(tiny_gguf, 1024, None)
    llm = loaded.llm
    # Greedy random weights fall into loops: the reply copies itself, and drafts guess right.
    tokens = llm.tokenize(b"abcabcabc xyz abcabc", add_bos=True, special=True)
    plain, _ = await run_job(loaded, tokens, 0)
    fast, job = await run_job(loaded, tokens, 6)
    assert fast == plain
    assert job.drafted > job.accepted > 0  # type: ignore[attr-defined]
    # The next request reuses the KV cache up to n_tokens: it must hold the prompt and the reply
    # as sampled (all but the last token, never evaluated), not a wrong guess.
    assert llm.n_tokens == len(tokens) + len(fast) - 1
    assert list(llm.input_ids[: len(tokens)]) == tokens
    assert bytes(llm.detokenize(list(llm.input_ids[len(tokens) : llm.n_tokens]))).decode() == fast[:-1]
