"""Property tests of the sans-IO layer: any split of the bytes gives the same result, and no
garbage makes anything but our ProtocolError escape (or, for a well-formed error payload, the
provider error it maps to)."""

from __future__ import annotations

import contextlib
import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wire_transcripts import (
    ANTHROPIC_REDACTED_PAUSE,
    ANTHROPIC_STREAM,
    OLLAMA_STREAM,
    OPENAI_PARALLEL,
    OPENAI_REASONING_CONTENT,
    OPENAI_THINK_TAGS,
    OPENAI_TOOL_CALL,
    OPENROUTER_REASONING,
    ctx,
    run_parser,
    summarize,
)

from ipyagent.agentlib.errors import ProtocolError, ProviderError
from ipyagent.agentlib.providers._sse import NDJSONDecoder, SSEDecoder
from ipyagent.agentlib.providers._think_tags import ThinkTagSplitter
from ipyagent.agentlib.providers.anthropic import AnthropicStreamParser
from ipyagent.agentlib.providers.ollama import OllamaStreamParser
from ipyagent.agentlib.providers.openai import OpenAIStreamParser

PARSERS = {
    "openai": lambda: OpenAIStreamParser(ctx()),
    "anthropic": lambda: AnthropicStreamParser(ctx()),
    "ollama": lambda: OllamaStreamParser(ctx()),
}
TRANSCRIPTS = [
    ("openai", OPENAI_TOOL_CALL),
    ("openai", OPENAI_PARALLEL),
    ("openai", OPENAI_REASONING_CONTENT),
    ("openai", OPENROUTER_REASONING),
    ("openai", OPENAI_THINK_TAGS),
    ("anthropic", ANTHROPIC_STREAM),
    ("anthropic", ANTHROPIC_REDACTED_PAUSE),
    ("ollama", OLLAMA_STREAM),
]
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def split(data: bytes, points: list[int]) -> list[bytes]:
    bounds = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


EDIT = st.tuples(
    st.integers(min_value=0), st.sampled_from(["delete", "insert", "flip"]), st.binary(min_size=1, max_size=4)
)


@FAST
@given(
    st.sampled_from(TRANSCRIPTS),
    st.lists(st.integers(min_value=0), max_size=60),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_any_split_and_line_ending_gives_the_same_result(
    case: tuple[str, bytes], points: list[int], eol: str
) -> None:
    kind, data = case
    expected = summarize(run_parser(PARSERS[kind](), data))
    if kind != "ollama":
        data = data.replace(b"\n", eol.encode())
    assert summarize(run_parser(PARSERS[kind](), data, split(data, points))) == expected


def _only_protocol_errors(kind: str, pieces: list[bytes]) -> None:
    with contextlib.suppress(ProtocolError):
        run_parser(PARSERS[kind](), b"", pieces)


@FAST
@given(st.sampled_from(list(PARSERS)), st.lists(st.binary(max_size=80), max_size=12))
def test_random_bytes_raise_nothing_but_protocol_error(kind: str, pieces: list[bytes]) -> None:
    _only_protocol_errors(kind, pieces)


EDIT = st.tuples(
    st.integers(min_value=0), st.sampled_from(["delete", "insert", "flip"]), st.binary(min_size=1, max_size=4)
)


@FAST
@given(
    st.sampled_from(TRANSCRIPTS),
    st.lists(EDIT, min_size=1, max_size=6),
    st.lists(st.integers(min_value=0), max_size=20),
)
def test_mutated_transcripts_raise_nothing_but_protocol_error(
    case: tuple[str, bytes], edits: list[tuple[int, str, bytes]], points: list[int]
) -> None:
    kind, original = case
    data = bytearray(original)
    for position, op, blob in edits:
        at = position % (len(data) + 1)
        if op == "delete":
            del data[at : at + len(blob)]
        elif op == "insert":
            data[at:at] = blob
        elif at < len(data):
            data[at] ^= blob[0] or 1
    _only_protocol_errors(kind, split(bytes(data), points))


# Structurally valid JSON of the wrong shapes: every field of the right name with any type.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
KEYS = [
    "type", "index", "delta", "choices", "content", "reasoning", "reasoning_content", "tool_calls",
    "function", "name", "arguments", "id", "usage", "finish_reason", "message", "content_block",
    "text", "thinking", "partial_json", "signature", "done", "done_reason", "eval_count", "refusal",
]  # fmt: skip
SHAPED = st.recursive(
    JSON,
    lambda children: (
        st.dictionaries(st.sampled_from(KEYS), children, max_size=5) | st.lists(children, max_size=3)
    ),
    max_leaves=20,
)
TYPES = [
    "message_start", "content_block_start", "content_block_delta", "content_block_stop",
    "message_delta", "message_stop", "ping",
]  # fmt: skip


@FAST
@given(st.sampled_from(list(PARSERS)), st.lists(st.tuples(SHAPED, st.sampled_from(TYPES)), max_size=8))
def test_wrong_shapes_raise_nothing_but_provider_errors(kind: str, payloads: list[tuple[Any, str]]) -> None:
    lines = []
    for payload, typ in payloads:
        if kind == "anthropic" and isinstance(payload, dict):
            payload.setdefault("type", typ)
        lines.append(json.dumps(payload))
    if kind == "ollama":
        data = "".join(line + "\n" for line in lines)
    else:
        data = "".join(f"data: {line}\n\n" for line in lines)
    try:
        run_parser(PARSERS[kind](), data.encode())
    except ProtocolError:
        pass
    except ProviderError:
        # Only a payload that really reports an error may become another provider error.
        assert "error" in data


@FAST
@given(st.lists(st.binary(max_size=40), max_size=10))
def test_decoders_raise_only_protocol_error(pieces: list[bytes]) -> None:
    for decoder in (SSEDecoder(), NDJSONDecoder()):
        try:
            for piece in pieces:
                decoder.feed(piece)
            decoder.close()
        except ProtocolError:
            pass


def _split_think(text: str, points: list[int]) -> tuple[str, str]:
    splitter = ThinkTagSplitter()
    pieces = []
    bounds = sorted({0, len(text), *(p % (len(text) + 1) for p in points)})
    for a, b in itertools.pairwise(bounds):
        pieces += splitter.feed(text[a:b])
    pieces += splitter.flush()
    return (
        "".join(t for kind, t in pieces if kind == "thinking"),
        "".join(t for kind, t in pieces if kind == "text"),
    )


THINKY = st.lists(
    st.sampled_from(["<think>", "</think>", "<", "</", "think", ">", " ", "\n", "a", "é"]), max_size=30
)


@FAST
@given(THINKY.map("".join), st.lists(st.integers(min_value=0), max_size=30))
def test_think_splitter_is_independent_of_chunking(text: str, points: list[int]) -> None:
    assert _split_think(text, points) == _split_think(text, [])
