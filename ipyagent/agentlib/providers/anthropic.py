"""The Anthropic Messages wire format (streaming SSE).

This module owns :func:`build_request` (our messages to ``POST {base_url}/v1/messages``, with the
signed thinking blocks Anthropic needs back), :class:`AnthropicStreamParser` (decoded SSE events
to provider events, sans-IO: text, thinking with its signature, redacted thinking, tool_use via
``input_json_delta``, cumulative usage, ``error`` events after HTTP 200, pings) and
:class:`AnthropicProvider`. It does not retry, assign tool-call ids or assemble messages.

The request's ``tool_choice`` becomes the API's: ``{"type": "none"}``, ``{"type": "any"}`` for
``"required"``, ``{"type": "tool", "name": ...}`` for one name, and for several names only those
tools with ``{"type": "any"}``. ``"auto"`` is not sent (it is the default). With thinking on, the
API refuses to be made to call a tool ("any" and "tool" are rejected): a required choice is then
sent as ``auto`` (with only the named tools, for names), and the model may answer in text.

Prompt caching (the request's ``settings.prompt_cache``): the API caches only prefixes that end
at a block marked ``cache_control``, at most four marks a request. Unless caching is ``"off"``,
the last tool and the system prompt are marked (the prefix every request of a conversation
shares), then the last block of the last message and the last block of the user message before
it: the latter is where the previous request's mark stood, so a new request reads the prefix the
previous one wrote even when the reply in between was longer than the API's 20-block lookback.
A thinking block may not carry a mark, so an assistant message's mark goes on its last block that
is not thinking. ``"1h"`` adds ``ttl: "1h"`` to every mark (the API wants marks of a longer TTL
before shorter ones, which one TTL for all satisfies) and the ``extended-cache-ttl`` beta header.
A prefix shorter than the model's minimum (1,024 tokens for Sonnet, more for some models) is
silently not cached: no error, no write.

The API has no JSON mode, so a request's ``output_schema`` (a typed answer) is an *answer tool*:
a tool of that name and schema, with ``tool_choice`` making the reply a call to it (to any tool,
when the request offers others; ``"none"`` makes it the answer's). The stream's call to it
comes back as the answer's text (its JSON), ending the reply as text would: the transcript holds
an answer, not a call waiting for a result. A ``"required"`` or named choice asks for a tool
call, not the answer, and gets no answer tool; with thinking on, the call cannot be forced (under
``"none"`` only the answer tool is sent then) and the model may answer in text.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from ..errors import ProtocolError, UserError
from ..messages import (
    FinishReason,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ..model import (
    EventBatch,
    ModelRequest,
    PromptCache,
    ProviderEvent,
    ResponseEnd,
    ThinkingChunk,
    ThinkingLevel,
    ToolCallChunk,
    ToolSpec,
    UsageReport,
)
from ..usage import Usage
from ._http import ErrorContext, HTTPProvider, error_from_payload, parse_json
from ._sse import SSEDecoder, SSEEvent

__all__ = [
    "MAX_CACHE_MARKS",
    "AnthropicProvider",
    "AnthropicStreamParser",
    "answer_tool",
    "build_request",
    "thinking_budget",
]

API_VERSION = "2023-06-01"
# The beta that introduced the 1-hour cache TTL; sent with "1h" for API versions that still need it.
EXTENDED_TTL_BETA = "extended-cache-ttl-2025-04-11"
# max_tokens is required by the API; this fits every current model's output limit.
DEFAULT_MAX_TOKENS = 8192
_MIN_BUDGET = 1024  # the API's smallest thinking budget
MAX_CACHE_MARKS = 4  # the API rejects a request with more cache_control marks
# Blocks the API refuses a cache_control mark on.
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
_BUDGETS: dict[ThinkingLevel, int] = {"low": 2048, "medium": 8192, "high": 24576}

_STOP: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
    "model_context_window_exceeded": "length",
    # pause_turn asks the client to send the reply back so the model can go on; the loop does.
    "pause_turn": "pause",
}


def thinking_budget(level: ThinkingLevel | None) -> int | None:
    """``budget_tokens`` for a thinking level (``None``: thinking off)."""
    return None if level is None or level == "none" else _BUDGETS[level]


def build_request(request: ModelRequest, *, model: str, endpoint: str = "anthropic") -> dict[str, Any]:
    """The JSON body of a streaming Messages request.

    Thinking blocks go back only with their signature and only to the endpoint that signed them
    (``Message.model`` starts with ``endpoint/``); the API rejects foreign or unsigned ones.
    """
    settings = request.settings
    budget = thinking_budget(settings.thinking)
    max_tokens = settings.max_tokens
    if budget is not None:
        if max_tokens is None:
            max_tokens = budget + DEFAULT_MAX_TOKENS
        elif max_tokens <= _MIN_BUDGET:
            raise UserError(
                f"max_tokens={max_tokens} leaves no room for thinking (Anthropic needs a budget of at "
                f"least {_MIN_BUDGET} tokens below max_tokens).",
                hint="Raise max_tokens or set thinking='none'.",
                code="invalid_settings",
            )
        elif budget >= max_tokens:
            budget = max(_MIN_BUDGET, max_tokens // 2)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens or DEFAULT_MAX_TOKENS,
        "messages": _messages(request.messages, endpoint),
        "stream": True,
    }
    if request.system:
        body["system"] = request.system
    tools, choice = _tool_choice(request, thinking=budget is not None)
    wire_tools = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]
    answer = answer_tool(request)
    if answer is not None and request.output_schema is not None:
        output = request.output_schema
        only_answer = request.tool_choice == "none" or not tools
        if only_answer and budget is not None:
            wire_tools = []  # the call cannot be forced with thinking on: offer nothing else
        wire_tools.append(
            {"name": answer, "description": output.description, "input_schema": output.json_schema}
        )
        choice = (
            None
            if budget is not None
            else {"type": "tool", "name": answer}
            if only_answer
            else {"type": "any"}
        )
    if wire_tools:
        body["tools"] = wire_tools
        if choice is not None:
            body["tool_choice"] = choice
    if budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    elif settings.temperature is not None:
        # With thinking on the API accepts no temperature but 1, so it is only sent without.
        body["temperature"] = settings.temperature
    if settings.prompt_cache != "off":
        _mark_cache(body, settings.prompt_cache)
    return body


def _mark_cache(body: dict[str, Any], ttl: PromptCache) -> None:
    """Put the cache marks on ``body`` (see the module's docstring for where and why)."""
    mark: dict[str, str] = {"type": "ephemeral"}
    if ttl == "1h":
        mark["ttl"] = "1h"
    blocks: list[dict[str, Any]] = []
    if body.get("tools"):
        blocks.append(body["tools"][-1])
    if body.get("system"):
        system: dict[str, Any] = {"type": "text", "text": body["system"]}
        body["system"] = [system]  # only a block can carry a mark
        blocks.append(system)
    messages: list[dict[str, Any]] = body["messages"]
    last = _markable(messages[-1]) if messages else None
    if last is not None:
        blocks.append(last)
    # The previous request's last mark: on the user message before the last one.
    users = [m for m in messages[:-1] if m["role"] == "user"]
    before = _markable(users[-1]) if users else None
    if before is not None:
        blocks.insert(len(blocks) - (last is not None), before)
    for block in blocks[:MAX_CACHE_MARKS]:
        block["cache_control"] = dict(mark)


def _markable(message: dict[str, Any]) -> dict[str, Any] | None:
    """The last block of ``message`` that may carry a cache mark (``None``: none may)."""
    for block in reversed(message["content"]):
        if block.get("type") not in _UNMARKABLE:
            return block  # type: ignore[no-any-return]
    return None


def answer_tool(request: ModelRequest) -> str | None:
    """The name of the answer tool this request offers (see the module's docstring), if any."""
    output = request.output_schema
    if output is None or request.tool_choice not in ("auto", "none"):
        return None
    return output.name


def _tool_choice(
    request: ModelRequest, *, thinking: bool
) -> tuple[Sequence[ToolSpec], dict[str, Any] | None]:
    """The tools to send and the ``tool_choice`` object (``None``: not sent)."""
    choice = request.tool_choice
    if choice == "auto":
        return request.tools, None
    if choice == "none":
        return request.tools, {"type": "none"}
    tools = request.tools if choice == "required" else [t for t in request.tools if t.name in choice]
    if thinking:  # the API rejects a forced call with thinking on: the best it takes is auto
        return tools, None
    if isinstance(choice, tuple) and len(choice) == 1:
        return request.tools, {"type": "tool", "name": choice[0]}
    return tools, {"type": "any"}


def _messages(messages: Any, endpoint: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        content = _user(message) if message.role == "user" else _assistant(message, endpoint)
        if not content:
            continue  # the API rejects empty messages (e.g. a reply interrupted at once)
        if out and out[-1]["role"] == message.role:
            out[-1]["content"].extend(content)  # roles must alternate
        else:
            out.append({"role": message.role, "content": content})
    return out


def _user(message: Message) -> list[dict[str, Any]]:
    # Tool results must open the user turn that answers the calls.
    results: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_call_id}
            if block.images:  # a tool result holds images itself here
                text = [{"type": "text", "text": block.content}] if block.content else []
                result["content"] = [*text, *(_image(image) for image in block.images)]
            elif block.content:
                result["content"] = block.content
            if block.is_error:
                result["is_error"] = True
            results.append(result)
        elif isinstance(block, TextBlock) and block.text:
            rest.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            rest.append(_image(block))
    return results + rest


def _image(block: ImageBlock) -> dict[str, Any]:
    source = (
        {"type": "url", "url": block.url}
        if block.url
        else {"type": "base64", "media_type": block.media_type, "data": block.data or ""}
    )
    return {"type": "image", "source": source}


def _assistant(message: Message, endpoint: str) -> list[dict[str, Any]]:
    own = message.model is None or message.model.split("/", 1)[0] == endpoint
    out: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ThinkingBlock):
            if not own:
                continue  # another endpoint's signature would be rejected
            if block.redacted:
                out.append({"type": "redacted_thinking", "data": block.redacted})
            elif block.signature:
                out.append({"type": "thinking", "thinking": block.text, "signature": block.signature})
        elif isinstance(block, TextBlock) and block.text:
            out.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolCallBlock):
            # The wire needs an object; malformed arguments (kept raw in the transcript) got an
            # error result from the loop, so an empty input tells the model nothing false.
            out.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments or {}}
            )
    return out


class AnthropicStreamParser:
    """Sans-IO: feed :class:`SSEEvent` to :meth:`feed_many` (or :meth:`feed`), call
    :meth:`finish` at the end of the body. Raises :class:`ProtocolError` for a broken stream and
    the mapped provider error for an ``error`` event (``overloaded_error`` is retryable)."""

    def __init__(
        self, ctx: ErrorContext, *, context_limit: int | None = None, answer_tool: str | None = None
    ) -> None:
        self._ctx = ctx
        #: A call to this tool is the typed answer: its input streams out as text.
        self._answer_tool = answer_tool
        self._answer_blocks: set[int] = set()
        self._calls = 0
        self._context_limit = context_limit
        self._stopped = False
        self._stop_reason: str | None = None
        self._response_id: str | None = None
        self._raw_usage: dict[str, int] = {}
        # block index -> the input of a tool_use start, sent only if no input_json_delta follows
        self._tool_input: dict[int, str] = {}
        self._batch = EventBatch()

    def feed_many(self, events: Iterable[SSEEvent]) -> list[ProviderEvent]:
        """The events of one network read in; their provider events, merged per block, out."""
        for event in events:
            self._event(event, self._batch)
        return self._batch.take()

    def feed(self, event: SSEEvent) -> list[ProviderEvent]:
        return self.feed_many((event,))

    def _event(self, event: SSEEvent, out: EventBatch) -> None:
        if self._stopped:
            return
        try:
            payload = parse_json(event.data)
        except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
            raise ProtocolError(
                f"{self._ctx.who} sent an event that is not JSON: {self._ctx.redact(event.data[:200])!r}",
                hint="The server does not speak the Anthropic Messages stream — check the endpoint's "
                "base URL and kind.",
                code="invalid_json",
            ) from exc
        if not isinstance(payload, dict):
            raise self._malformed("an event that is not a JSON object")
        kind = payload.get("type", event.event)
        if kind == "error" or event.event == "error":
            raise error_from_payload(payload.get("error") or payload, self._ctx)
        if kind == "message_start":
            message = payload.get("message")
            if isinstance(message, dict):
                if isinstance(message.get("id"), str):
                    self._response_id = message["id"]
                self._update_usage(message.get("usage"))
        elif kind == "content_block_start":
            self._block_start(payload, out)
        elif kind == "content_block_delta":
            self._block_delta(payload, out)
        elif kind == "content_block_stop":
            index = self._index(payload)
            pending = self._tool_input.pop(index, None)
            if pending and index in self._answer_blocks:
                out.text(pending, key=index)
            elif pending:
                out.add(ToolCallChunk(key=index, arguments=pending))
        elif kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                self._stop_reason = delta["stop_reason"]
            self._update_usage(payload.get("usage"))
        elif kind == "message_stop":
            self._stopped = True
        # "ping" and event types added after this was written are ignored on purpose.

    def _index(self, payload: dict[str, Any]) -> int:
        index = payload.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise self._malformed("a content block event without an index")
        return index

    def _block_start(self, payload: dict[str, Any], out: EventBatch) -> None:
        index = self._index(payload)
        block = payload.get("content_block")
        if not isinstance(block, dict):
            raise self._malformed("content_block_start without a content block")
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str) and block["text"]:
            out.text(block["text"], key=index)
        elif kind == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"]:
            out.thinking(block["thinking"], key=index)
        elif kind == "redacted_thinking":
            data = block.get("data")
            out.add(ThinkingChunk(redacted=data if isinstance(data, str) else "", key=index))
        elif kind == "tool_use":
            name, call_id = block.get("name"), block.get("id")
            if not isinstance(name, str) or not name:
                raise self._malformed("a tool_use block without a name")
            if name == self._answer_tool:
                self._answer_blocks.add(index)
            else:
                self._calls += 1
                out.add(ToolCallChunk(key=index, id=call_id if isinstance(call_id, str) else None, name=name))
            start_input = block.get("input")
            if isinstance(start_input, dict) and start_input:
                self._tool_input[index] = json.dumps(start_input)

    def _block_delta(self, payload: dict[str, Any], out: EventBatch) -> None:
        index = self._index(payload)
        delta = payload.get("delta")
        if not isinstance(delta, dict):
            raise self._malformed("content_block_delta without a delta")
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(delta.get("text"), str) and delta["text"]:
            out.text(delta["text"], key=index)
        elif kind == "thinking_delta" and isinstance(delta.get("thinking"), str) and delta["thinking"]:
            out.thinking(delta["thinking"], key=index)
        elif kind == "signature_delta" and isinstance(delta.get("signature"), str):
            out.add(ThinkingChunk(signature=delta["signature"], key=index))
        elif kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            self._tool_input.pop(index, None)  # the deltas carry the input; the start's is a stub
            if delta["partial_json"] and index in self._answer_blocks:
                out.text(delta["partial_json"], key=index)
            elif delta["partial_json"]:
                out.add(ToolCallChunk(key=index, arguments=delta["partial_json"]))

    def _update_usage(self, usage: Any) -> None:
        # Usage is cumulative: each report replaces the fields it carries.
        if isinstance(usage, dict):
            for name, value in usage.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    self._raw_usage[name] = value
            # The writes split by how long they are kept (a 1-hour write costs more).
            creation = usage.get("cache_creation")
            hour = creation.get("ephemeral_1h_input_tokens") if isinstance(creation, dict) else None
            if isinstance(hour, int) and not isinstance(hour, bool):
                self._raw_usage["cache_write_1h"] = hour

    def _usage(self) -> Usage:
        raw = self._raw_usage
        read, write = raw.get("cache_read_input_tokens", 0), raw.get("cache_creation_input_tokens", 0)
        # The wire's input_tokens leaves out both cache reads and cache writes. Ours is the whole
        # prompt minus cache reads (input + cache_read_tokens = prompt), so writes are added in.
        return Usage(
            input_tokens=raw.get("input_tokens", 0) + write,
            output_tokens=raw.get("output_tokens", 0),
            cache_read_tokens=read,
            cache_write_tokens=write,
            cache_write_1h_tokens=raw.get("cache_write_1h", 0),
            requests=1,
        )

    def _malformed(self, what: str) -> ProtocolError:
        return ProtocolError(
            f"{self._ctx.who} sent {what}.",
            hint="The server does not speak the Anthropic Messages stream — check the endpoint's base URL "
            "and kind.",
            code="invalid_event",
        )

    def finish(self) -> list[ProviderEvent]:
        """End of the body: check ``message_stop`` came, report usage and the stop reason."""
        if not self._stopped:
            raise ProtocolError(
                f"The stream from {self._ctx.who} ended before message_stop.",
                hint="The connection was probably cut — retry.",
                code="incomplete_stream",
                retryable=True,
            )
        out: list[ProviderEvent] = []
        if self._raw_usage:
            out.append(UsageReport(usage=self._usage(), context_limit=self._context_limit))
        reason = _STOP.get(self._stop_reason or "end_turn", "stop")
        if reason == "tool_calls" and not self._calls:
            reason = "stop"  # the only call was the answer tool's: the reply is an answer
        out.append(ResponseEnd(finish_reason=reason, response_id=self._response_id))
        return out


class AnthropicProvider(HTTPProvider):
    """A Claude model behind the Anthropic Messages API (``base_url`` without ``/v1``)."""

    models_hint = "See the model names at https://docs.anthropic.com/en/docs/about-claude/models."

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        model = self._wire_model(request.model)
        body = build_request(request, model=model, endpoint=self.endpoint)
        headers = {"Accept": "text/event-stream", "anthropic-version": API_VERSION}
        if request.settings.prompt_cache == "1h":
            headers["anthropic-beta"] = EXTENDED_TTL_BETA  # an endpoint's own anthropic-beta wins
        if self._secret is not None:
            headers["x-api-key"] = self._secret.reveal()
        parser = AnthropicStreamParser(
            self._error_context(model), context_limit=self.context_limit, answer_tool=answer_tool(request)
        )
        decoder = SSEDecoder()
        async for event in self._events("/v1/messages", body, headers, model, decoder, parser):
            yield event
