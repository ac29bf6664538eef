"""Prompt caching: how much of a conversation's repeated prefix is read from the provider's cache,
and what that does to the bill.

A 20-turn conversation with tools (each turn: the user asks, the model calls a tool, the result
comes back, the model answers: 40 requests) is sent through the real adapters' request builders
(``providers.anthropic.build_request``, ``providers.openai.build_request``) with ipyagent's own
system prompt and tool schemas. No provider is reachable here, so each provider's cache is
played by a small simulator of its documented rules, and its answer is written as the provider's
wire stream (SSE with the usage fields) and read back through the adapter's stream parser, so
the usage and cost below are what ``RunResult.usage`` would hold:

- Anthropic caches only prefixes that end at a block marked ``cache_control`` (tools, then system,
  then messages), at least 1,024 tokens; a request reads the longest cached prefix that ends at
  a block boundary up to 20 blocks before one of its marks, and writes up to its last mark.
- OpenAI caches every prompt of 1,024 tokens or more by itself, in steps of 128 tokens, and reads
  the longest byte-identical prefix it holds (``prompt_cache_key`` only routes a conversation's
  requests to the same cache machine, which one simulated cache cannot show). Its cached input
  costs 0.25x for gpt-4.1, so 0.25x of the input is its floor, whatever the client does.

Tokens are counted as the adapters' JSON characters / 4. "Repeated prefix" is what a request
shares with the one before it; "cacheable" is the part of it read from the cache. Goals (#28):
cacheable >= 90%, cost <= 0.3x the uncached cost (prices from ``data/prices.toml``).

The embedded model (``--local``, once: it takes a minute of CPU): llama.cpp keeps the KV cache
of the last prompt and reuses the prefix a new prompt shares with it, so the time to the first
token of turn 10 of a conversation should be about that of turn 1, not grow with the transcript.
A last row runs turn 10 again after another conversation took the cache ("cold"): what every
turn would cost without the reuse.

    python bench/prompt_cache.py [--local [--local-model qwen2.5-coder-1.5b]]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from _report import report_sections

from ipyagent.agentlib.messages import Message, TextBlock, ToolCallBlock, ToolResultBlock
from ipyagent.agentlib.model import ModelRequest, ModelSettings, PromptCache, TextChunk, ToolSpec, UsageReport
from ipyagent.agentlib.prices import cost_of, price_for
from ipyagent.agentlib.providers import anthropic, openai
from ipyagent.agentlib.providers._http import ErrorContext
from ipyagent.agentlib.providers._sse import SSEDecoder
from ipyagent.agentlib.system_prompt import build_system_prompt
from ipyagent.agentlib.tools import tool
from ipyagent.agentlib.usage import Usage

TURNS = 20
MIN_CACHED = 1024  # both providers' smallest cacheable prompt (Sonnet; OpenAI)
LOOKBACK = 20  # blocks Anthropic looks back from a mark for a cached prefix
OPENAI_STEP = 128


def tokens(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False)) // 4


# -- the conversation --------------------------------------------------------------------------


@tool(read_only=True)
def describe_dataframe(name: str, rows: int = 5) -> str:
    """Describe a DataFrame of the kernel: its shape, dtypes, and its first rows.

    Args:
        name: The variable's name.
        rows: How many rows of its head to show.
    """
    return ""


@tool(read_only=True)
def run_python(code: str) -> str:
    """Run Python code in the user's kernel and return what it printed, its last value and any
    error. Use it to compute, inspect variables and check assumptions.

    Args:
        code: The code to run, as in a notebook cell.
    """
    return ""


@tool(read_only=True)
def read_cells(start: int = 0, count: int = 20) -> str:
    """Read cells of the notebook with their ids, sources and outputs (cut when long).

    Args:
        start: The index of the first cell.
        count: How many cells to read.
    """
    return ""


@tool
def edit_cell(cell_id: str, expected: str, source: str) -> str:
    """Replace the source of a cell; ``expected`` must be its current source (stale edits fail).

    Args:
        cell_id: The cell's stable id.
        expected: The source the edit replaces.
        source: The new source.
    """
    return ""


TOOLS: list[ToolSpec] = [t.spec for t in (describe_dataframe, run_python, read_cells, edit_cell)]
SYSTEM = build_system_prompt(TOOLS, workspace="/home/user/project")
RESULT = "\n".join(
    f"{i:>4}  2024-{1 + i % 12:02d}-{1 + i % 28:02d}  region_{i % 7}  {1000 + 37 * i:>8.2f}  {i % 5}"
    for i in range(40)
)


def conversation() -> list[list[Message]]:
    """The transcript before each request of the conversation."""
    messages: list[Message] = []
    before: list[list[Message]] = []
    for turn in range(TURNS):
        messages.append(Message.user(f"Question {turn}: how did sales in region_{turn % 7} change?"))
        before.append(list(messages))
        call = ToolCallBlock(
            id=f"call_{turn}",
            name="run_python",
            arguments={"code": f"df[df.region == 'region_{turn % 7}'].groupby('month').sales.sum()"},
            raw_arguments="",
        )
        messages.append(Message(role="assistant", content=(TextBlock(text="Let me compute that."), call)))
        messages.append(
            Message(role="user", content=(ToolResultBlock(tool_call_id=call.id, content=RESULT),))
        )
        before.append(list(messages))
        messages.append(
            Message(role="assistant", content=(TextBlock(text=f"Sales in region_{turn % 7} rose 4%."),))
        )
    return before


ANSWER_TOKENS = 40  # each reply's length, the same with and without caching


# -- the providers' caches, simulated --------------------------------------------------------------


def anthropic_blocks(body: dict[str, Any]) -> list[tuple[dict[str, Any], int]]:
    """The request's blocks in the order the API caches them: (block, tokens); a cache mark is
    not content and is not counted."""
    out = [(t, _size(t)) for t in body.get("tools", [])]
    system = body.get("system")
    if isinstance(system, str):
        out.append(({"type": "text", "text": system}, tokens(system)))
    elif isinstance(system, list):
        out += [(b, _size(b)) for b in system]
    for message in body["messages"]:
        out += [(b, _size(b) + 1) for b in message["content"]]
    return out


def _size(block: dict[str, Any]) -> int:
    return tokens({k: v for k, v in block.items() if k != "cache_control"})


def _key(blocks: list[tuple[dict[str, Any], int]], end: int) -> str:
    digest = hashlib.sha256()
    for block, _ in blocks[:end]:
        digest.update(json.dumps({k: v for k, v in block.items() if k != "cache_control"}).encode())
    return digest.hexdigest()


@dataclass
class AnthropicCache:
    entries: set[str] = field(default_factory=set)

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        blocks = anthropic_blocks(body)
        sizes = [n for _, n in blocks]
        marks = [i + 1 for i, (b, _) in enumerate(blocks) if "cache_control" in b]
        total = sum(sizes)
        read = 0
        for mark in marks:  # the longest cached prefix within the lookback of a mark
            for end in range(mark, max(0, mark - LOOKBACK), -1):
                if _key(blocks, end) in self.entries:
                    read = max(read, sum(sizes[:end]))
                    break
        written = 0
        for mark in marks:
            size = sum(sizes[:mark])
            if size >= MIN_CACHED:
                self.entries.add(_key(blocks, mark))
                written = max(written, size)
        write = max(0, written - read)
        hour = any(b.get("cache_control", {}).get("ttl") == "1h" for b, _ in blocks)
        return {
            "input_tokens": total - read - write,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write,
            "cache_creation": {  # how the API splits the writes by TTL
                "ephemeral_5m_input_tokens": 0 if hour else write,
                "ephemeral_1h_input_tokens": write if hour else 0,
            },
            "output_tokens": ANSWER_TOKENS,
        }


@dataclass
class OpenAICache:
    prompts: list[str] = field(default_factory=list)

    def usage(self, body: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps({"tools": body.get("tools"), "messages": body["messages"]}, ensure_ascii=False)
        common = max((_common(text, p) for p in self.prompts), default=0)
        self.prompts.append(text)
        total = len(text) // 4
        cached = (common // 4) // OPENAI_STEP * OPENAI_STEP if common // 4 >= MIN_CACHED else 0
        return {
            "prompt_tokens": total,
            "completion_tokens": ANSWER_TOKENS,
            "prompt_tokens_details": {"cached_tokens": min(cached, total)},
        }


def _common(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


# -- the wire: the simulated answer read back through the adapters' parsers ----------------------


def sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    return b"".join(
        (f"event: {name}\n" if name else "").encode() + b"data: " + json.dumps(data).encode() + b"\n\n"
        for name, data in events
    )


def anthropic_reply(usage: dict[str, int]) -> Usage:
    start = {k: v for k, v in usage.items() if k != "output_tokens"}
    wire = sse(
        [
            ("message_start", {"type": "message_start", "message": {"id": "msg", "usage": start}}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )
    parser = anthropic.AnthropicStreamParser(ErrorContext("anthropic", "bench", "http://127.0.0.1"))
    return _usage(parser.feed_many(SSEDecoder().feed(wire)) + parser.finish())


def openai_reply(usage: dict[str, Any]) -> Usage:
    wire = (
        sse(
            [
                (
                    None,
                    {"id": "c", "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]},
                ),
                (None, {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
                (None, {"id": "c", "choices": [], "usage": usage}),
            ]
        )
        + b"data: [DONE]\n\n"
    )
    parser = openai.OpenAIStreamParser(ErrorContext("openai", "bench", "http://127.0.0.1"))
    return _usage(parser.feed_many(SSEDecoder().feed(wire)) + parser.finish())


def _usage(events: list[Any]) -> Usage:
    reports = [e.usage for e in events if e.type == "usage"]
    return reports[-1]


# -- the runs -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    usage: Usage = field(default_factory=Usage)
    repeated: int = 0  # prompt tokens shared with the previous request
    read: int = 0  # of them, read from the cache


def run_anthropic(cache: PromptCache) -> Outcome:
    sim, out, previous = AnthropicCache(), Outcome(), None
    settings = ModelSettings(prompt_cache=cache)
    for messages in conversation():
        request = ModelRequest(
            model="claude-sonnet-4-5", system=SYSTEM, messages=messages, tools=TOOLS, settings=settings
        )
        body = anthropic.build_request(request, model="claude-sonnet-4-5")
        usage = anthropic_reply(sim.usage(body))
        blocks = anthropic_blocks(body)
        if previous is not None:
            out.repeated += _shared(previous, blocks)
            out.read += usage.cache_read_tokens
        previous = blocks
        out.usage += usage
    return out


def _shared(before: list[tuple[dict[str, Any], int]], after: list[tuple[dict[str, Any], int]]) -> int:
    shared = 0
    for (a, n), (b, _) in zip(before, after, strict=False):
        if {k: v for k, v in a.items() if k != "cache_control"} != {
            k: v for k, v in b.items() if k != "cache_control"
        }:
            break
        shared += n
    return shared


def run_openai(cache: PromptCache, key: bool) -> Outcome:
    sim, out, previous = OpenAICache(), Outcome(), ""
    dialect = openai.OpenAIDialect(max_tokens_field="max_completion_tokens", prompt_cache_key=key)
    settings = ModelSettings(prompt_cache=cache)
    for messages in conversation():
        request = ModelRequest(
            model="gpt-4.1",
            system=SYSTEM,
            messages=messages,
            tools=TOOLS,
            settings=settings,
            cache_key="conv",
        )
        body = openai.build_request(request, model="gpt-4.1", dialect=dialect)
        text = json.dumps({"tools": body.get("tools"), "messages": body["messages"]}, ensure_ascii=False)
        usage = openai_reply(sim.usage(body))
        if previous:
            out.repeated += _common(previous, text) // 4
            out.read += usage.cache_read_tokens
        previous = text
        out.usage += usage
    return out


def row(provider: str, model: str, setting: str, outcome: Outcome, uncached: float) -> list[Any]:
    price = price_for(model)
    assert price is not None
    cost = cost_of(outcome.usage, price)
    u = outcome.usage
    return [
        provider,
        setting,
        u.requests,
        u.input_tokens + u.cache_read_tokens,
        u.cache_read_tokens,
        u.cache_write_tokens,
        f"{100 * outcome.read / outcome.repeated:.0f}%" if outcome.repeated else "-",
        f"${cost:.4f}",
        f"{cost / uncached:.2f}x",
    ]


# -- the embedded model ---------------------------------------------------------------------------


async def first_token(model: Any, request: ModelRequest) -> tuple[float, str, Usage]:
    """Seconds to the first text of the reply, the reply, and its usage."""
    started, first, parts, usage = time.perf_counter(), None, [], Usage()
    async for event in model.stream(request):
        if isinstance(event, TextChunk):
            first = first or time.perf_counter()
            parts.append(event.text)
        elif isinstance(event, UsageReport):
            usage = event.usage
    return (first or time.perf_counter()) - started, "".join(parts), usage


async def local_turns(name: str, turns: int = 10) -> tuple[list[str], list[list[Any]]]:
    from ipyagent.agentlib.local_models import resolve_local_model
    from ipyagent.agentlib.providers.local import LocalModel

    model = LocalModel(resolve_local_model(name, progress=False), name=name, n_threads=2)
    model.temperature = 0.0
    await asyncio.to_thread(model.load)
    table = RESULT.splitlines()
    settings = ModelSettings(max_tokens=8)
    messages: list[Message] = []
    rows: list[list[Any]] = []
    request = None
    for turn in range(turns):
        rows_shown = "\n".join(table[4 * turn : 4 * turn + 4])
        messages.append(Message.user(f"Rows:\n{rows_shown}\nWhich region is in the first row? One word."))
        request = ModelRequest(model=name, system=SYSTEM, messages=list(messages), settings=settings)
        ttft, reply, usage = await first_token(model, request)
        prompt = usage.input_tokens + usage.cache_read_tokens
        rows.append([f"turn {turn + 1}", prompt, usage.cache_read_tokens, round(ttft, 3)])
        messages.append(Message(role="assistant", content=(TextBlock(text=reply),)))
    assert request is not None
    other = ModelRequest(model=name, system="Be terse.", messages=[Message.user("Hi")], settings=settings)
    await first_token(model, other)  # another conversation takes the KV cache
    ttft, _, usage = await first_token(model, request)
    prompt = usage.input_tokens + usage.cache_read_tokens
    rows.append([f"turn {turns}, cold", prompt, usage.cache_read_tokens, round(ttft, 3)])
    return ["turn", "prompt tok", "reused (KV cache)", "first token s"], rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--local", action="store_true", help="also time the embedded model's turns")
    parser.add_argument("--local-model", default="qwen2.5-coder-1.5b")
    args = parser.parse_args()
    columns = [
        "provider",
        "prompt_cache",
        "requests",
        "prompt tok",
        "cache read",
        "cache write",
        "cacheable",
        "cost",
        "vs uncached",
    ]
    rows = []
    extra: dict[str, Any] = {"turns": TURNS, "system_prompt_tokens": tokens(SYSTEM), "tools": len(TOOLS)}
    claude = price_for("anthropic/claude-sonnet-4-5")
    gpt = price_for("openai/gpt-4.1")
    assert claude is not None and gpt is not None
    off = run_anthropic("off")
    base = cost_of(off.usage, claude)
    for setting in ("off", "5m", "1h"):
        outcome = run_anthropic(setting)  # type: ignore[arg-type]
        rows.append(row("anthropic", "anthropic/claude-sonnet-4-5", setting, outcome, base))
        extra[f"anthropic_{setting}"] = {
            "cacheable_share": outcome.read / outcome.repeated,
            "cost_ratio": cost_of(outcome.usage, claude) / base,
        }
    # OpenAI's uncached cost: every prompt token at the input price.
    plain = run_openai("off", key=False)
    u = plain.usage
    base_openai = cost_of(
        u.model_copy(update={"input_tokens": u.input_tokens + u.cache_read_tokens, "cache_read_tokens": 0}),
        gpt,
    )
    openai_run = run_openai("5m", key=True)
    rows.append(row("openai", "openai/gpt-4.1", "5m + key", openai_run, base_openai))
    extra["openai_5m"] = {
        "cacheable_share": openai_run.read / openai_run.repeated,
        "cost_ratio": cost_of(openai_run.usage, gpt) / base_openai,
    }
    sections: list[tuple[str, list[str], list[list[Any]]]] = [
        ("20-turn conversation with tools (simulated caches)", columns, rows)
    ]
    if args.local:
        load = os.getloadavg()[0]
        local_columns, local_rows = asyncio.run(local_turns(args.local_model))
        sections.append((f"embedded model {args.local_model}, 2 threads", local_columns, local_rows))
        extra["local_cpu_load"] = f"{load:.2f} before, {os.getloadavg()[0]:.2f} after"
        first, tenth, cold = (r[3] for r in (local_rows[0], local_rows[-2], local_rows[-1]))
        extra["local_ttft_turn10_vs_turn1"] = round(tenth / first, 2)
        extra["local_ttft_turn10_cold_vs_warm"] = round(cold / tenth, 2)
    report_sections("prompt_cache", sections, extra)


if __name__ == "__main__":
    main()
