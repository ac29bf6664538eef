"""Wire transcripts written from the shapes in shared/reference/wire-formats.md, and a helper
that folds provider events into a comparable summary."""

# ruff: noqa: E501 - the reference streams are kept verbatim, one wire line per source line

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ipyagent.agentlib.model import (
    ProviderEvent,
    ResponseEnd,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageReport,
)
from ipyagent.agentlib.usage import Usage


def sse(*payloads: Any, done: bool = True) -> bytes:
    """``data:`` events (a str payload is sent verbatim, a ``(name, payload)`` pair is named)."""
    out = []
    for p in payloads:
        name = None
        if isinstance(p, tuple):
            name, p = p
        data = p if isinstance(p, str) else json.dumps(p)
        out.append((f"event: {name}\n" if name else "") + f"data: {data}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def ndjson(*payloads: Any) -> bytes:
    return "".join(json.dumps(p) + "\n" for p in payloads).encode()


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
        **extra,
    }


# -- OpenAI-compatible -------------------------------------------------------------------------

# The reference tool-call stream, verbatim.
OPENAI_TOOL_CALL = b"""\
data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_ZR5x","type":"function","function":{"name":"get_capital","arguments":""}}]},"finish_reason":null}],"usage":null}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\""}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"country"}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\\":\\"UK\\"}"}}]}}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}

data: {"choices":[],"usage":{"prompt_tokens":53,"completion_tokens":15,"total_tokens":68,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}

data: [DONE]

"""

OPENAI_PARALLEL = sse(
    chunk({"role": "assistant", "content": "Checking both."}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_rate", "arguments": ""},
                }
            ]
        }
    ),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": '{"tz'},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"cur": "EUR"}'}}]}),
    chunk({"tool_calls": [{"index": 1, "function": {"arguments": '": "UTC"}'}}]}),
    chunk({}, "tool_calls", usage={"prompt_tokens": 10, "completion_tokens": 20}),  # DeepSeek placement
)

# DeepSeek / llama.cpp: reasoning_content; OpenRouter: comment lines, reasoning, cost.
OPENAI_REASONING_CONTENT = sse(
    chunk({"role": "assistant", "reasoning_content": "Two plus "}),
    chunk({"reasoning_content": "two is four."}),
    chunk({"content": "4"}),
    chunk({}, "stop"),
    {"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 9}},
)
OPENROUTER_REASONING = (
    b": OPENROUTER PROCESSING\n\n"
    + sse(chunk({"role": "assistant", "reasoning": "Hmm.", "reasoning_content": "Hmm."}), done=False)
    + b": OPENROUTER PROCESSING\n\n"
    + sse(
        chunk({"content": "Hi"}),
        chunk({}, "stop", usage={"prompt_tokens": 5, "completion_tokens": 2, "cost": 0.0012}),
    )
)
OPENAI_THINK_TAGS = sse(
    chunk({"role": "assistant", "content": "<th"}),
    chunk({"content": "ink>Let me think"}),
    chunk({"content": " hard.</thi"}),
    chunk({"content": "nk>\n\nThe answer is <b>42</b>."}),
    chunk({}, "stop"),
)
# vLLM with continuous usage stats: a running total on every chunk (replace, never add).
VLLM_CONTINUOUS_USAGE = sse(
    chunk({"content": "a"}, usage={"prompt_tokens": 3, "completion_tokens": 1}),
    chunk({"content": "b"}, usage={"prompt_tokens": 3, "completion_tokens": 2}),
    chunk({}, "length", usage={"prompt_tokens": 3, "completion_tokens": 3}),
)
OPENAI_REFUSAL = sse(chunk({"refusal": "I can't help with that."}), chunk({}, "stop"))
OPENAI_CONTENT_FILTER = sse(
    chunk({"content": "Once upon"}),
    {"id": "x", "choices": [{"index": 0, "delta": None, "finish_reason": "content_filter"}]},
    {"id": "x", "choices": None},
)
OPENROUTER_ERROR_CHUNK = sse(
    chunk({"content": "Partial"}),
    {
        "id": "x",
        "object": "chat.completion.chunk",
        "error": {"code": 502, "message": "Upstream provider failed"},
    },
    done=False,
)
GROQ_ERROR_EVENT = sse(
    chunk({"content": ""}),
    (
        "error",
        {
            "error": {
                "message": "Failed to call a function.",
                "type": "invalid_request_error",
                "code": "tool_use_failed",
            }
        },
    ),
    done=False,
)
OPENAI_INVALID_JSON = sse(chunk({"content": "ok"}), '{"choices": [ {"index": 0, "delta": ', done=True)
OPENAI_TRUNCATED = sse(chunk({"content": "Hello"}), chunk({"content": " wor"}), done=False)

# -- Anthropic -----------------------------------------------------------------------------------

# The reference stream, verbatim, plus a ping and a text block.
ANTHROPIC_STREAM = b"""\
event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":43,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}

event: ping
data: {"type": "ping"}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB..."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Looking it up."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01","name":"get_rate","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\\"cur\\": \\"EUR\\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":175}}

event: message_stop
data: {"type":"message_stop"}

"""


def anthropic(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


MESSAGE_START = {
    "type": "message_start",
    "message": {"id": "msg_2", "usage": {"input_tokens": 5, "output_tokens": 1}},
}
ANTHROPIC_REDACTED_PAUSE = anthropic(
    MESSAGE_START,
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "redacted_thinking", "data": "EmwKAhgB"},
    },
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "t2", "name": "noop", "input": {}},
    },
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "pause_turn"}, "usage": {"output_tokens": 3}},
    {"type": "message_stop"},
)
ANTHROPIC_OVERLOADED = anthropic(
    MESSAGE_START,
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
)
ANTHROPIC_TRUNCATED = ANTHROPIC_STREAM[: ANTHROPIC_STREAM.index(b"event: message_delta")]

# -- Ollama --------------------------------------------------------------------------------------

OLLAMA_STREAM = ndjson(
    {
        "model": "qwen3",
        "created_at": "t",
        "message": {"role": "assistant", "content": "", "thinking": "Weather? "},
        "done": False,
    },
    {
        "model": "qwen3",
        "created_at": "t",
        "message": {"role": "assistant", "content": "", "thinking": "Call the tool."},
        "done": False,
    },
    {"model": "qwen3", "created_at": "t", "message": {"role": "assistant", "content": "The"}, "done": False},
    {
        "model": "qwen3",
        "created_at": "t",
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"function": {"index": 0, "name": "get_weather", "arguments": {"city": "Toronto"}}}
            ],
        },
        "done": False,
    },
    {
        "model": "qwen3",
        "created_at": "t",
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"index": 0, "name": "get_time", "arguments": {}}}],
        },
        "done": False,
    },
    {
        "model": "qwen3",
        "created_at": "t",
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": "stop",
        "total_duration": 123,
        "load_duration": 1,
        "prompt_eval_count": 26,
        "prompt_eval_duration": 2,
        "eval_count": 290,
        "eval_duration": 3,
    },
)
OLLAMA_ERROR_LINE = ndjson(
    {"model": "qwen3", "created_at": "t", "message": {"role": "assistant", "content": "Hi"}, "done": False},
    {"error": "an error was encountered while running the model: unexpected EOF"},
)
OLLAMA_TRUNCATED = OLLAMA_STREAM[: OLLAMA_STREAM.rindex(b'{"model"')]


@dataclass
class Summary:
    """Provider events folded the way the loop's assembler would, for comparison."""

    text: str = ""
    thinking: str = ""
    signatures: list[str] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)
    calls: dict[int | str, dict[str, Any]] = field(default_factory=dict)
    usage: Usage | None = None
    finish: str | None = None
    response_id: str | None = None
    text_keys: list[Any] = field(default_factory=list)


def summarize(events: list[ProviderEvent]) -> Summary:
    s = Summary()
    for i, e in enumerate(events):
        assert s.finish is None, "events after ResponseEnd"
        if isinstance(e, TextChunk):
            s.text += e.text
            if not s.text_keys or s.text_keys[-1] != e.key:
                s.text_keys.append(e.key)
        elif isinstance(e, ThinkingChunk):
            s.thinking += e.text
            if e.signature:
                s.signatures.append(e.signature)
            if e.redacted is not None:
                s.redacted.append(e.redacted)
        elif isinstance(e, ToolCallChunk):
            call = s.calls.setdefault(e.key, {"id": None, "name": None, "arguments": ""})
            call["id"] = call["id"] or e.id
            call["name"] = call["name"] or e.name
            call["arguments"] += e.arguments
        elif isinstance(e, UsageReport):
            s.usage = e.usage
        elif isinstance(e, ResponseEnd):
            assert i == len(events) - 1
            s.finish, s.response_id = e.finish_reason, e.response_id
    return s


def run_parser(
    parser: Any, data: bytes, pieces: list[bytes] | None = None, *, one_by_one: bool = False
) -> list[ProviderEvent]:
    """Feed ``data`` (or its ``pieces``) through the right decoder into ``parser``, sans IO: each
    piece's items as one batch, as the adapters do, or ``one_by_one`` through ``feed``."""
    from ipyagent.agentlib.providers._sse import NDJSONDecoder, SSEDecoder
    from ipyagent.agentlib.providers.ollama import OllamaStreamParser

    decoder: Any = NDJSONDecoder() if isinstance(parser, OllamaStreamParser) else SSEDecoder()
    events: list[ProviderEvent] = []

    def parse(items: list[Any]) -> None:
        if one_by_one:
            events.extend(out for item in items for out in parser.feed(item))
        else:
            events.extend(parser.feed_many(items))

    for piece in pieces if pieces is not None else [data]:
        parse(decoder.feed(piece))
    parse(decoder.close())
    events.extend(parser.finish())
    return events


def ctx(endpoint: str = "test") -> Any:
    from ipyagent.agentlib.providers._http import ErrorContext

    return ErrorContext(endpoint=endpoint, model="m", base_url="http://127.0.0.1:1")
