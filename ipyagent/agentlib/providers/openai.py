"""The OpenAI-compatible Chat Completions wire format (streaming SSE).

One adapter serves every server that speaks ``POST {base_url}/chat/completions`` with
``stream: true``: OpenAI, Gemini, Mistral, xAI, OpenRouter, Groq, Together, DeepSeek, Fireworks,
Cerebras, Hugging Face's router, vLLM, llama.cpp's server, LM Studio and Ollama's ``/v1``. What
differs between them is captured by :class:`OpenAIDialect` (where reasoning arrives, how the
thinking level is asked for, the name of the token limit, the word for a required tool call,
whether usage is asked for), which the endpoint sets.

This module owns :func:`build_request` (our messages to the wire), :class:`OpenAIStreamParser`
(decoded SSE events to provider events, sans-IO) and :class:`OpenAIProvider`. It does not retry,
assign tool-call ids or assemble messages.

The request's ``tool_choice`` becomes the API's: ``"none"`` as it is, ``"required"`` in the
endpoint's word for it (Mistral's ``"any"``), one tool name as ``{"type": "function", "function":
{"name": ...}}``; several names send only those tools, with ``"required"`` (OpenAI's
``allowed_tools`` would keep the whole list, but few other servers know it). ``"auto"`` is not
sent: it is every server's default when tools are given.
Servers that ignore ``tool_choice`` (some versions of Ollama's ``/v1``, LM Studio) cannot be
made to honour it from here.

The request's ``output_schema`` (a typed answer) becomes ``response_format: {"type":
"json_schema", ...}``, ``strict`` only when the schema meets OpenAI's strict rules; vLLM and
llama.cpp's server hold the reply to it with a grammar. Sent alongside tools, it shapes the
reply that answers, not the calls (OpenAI; some versions of Ollama's ``/v1`` ignore the tools
then).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ProtocolError
from ..messages import FinishReason, ImageBlock, Message, TextBlock, ToolCallBlock, ToolResultBlock
from ..model import (
    EventBatch,
    ModelRequest,
    ProviderEvent,
    ResponseEnd,
    ToolCallChunk,
    ToolSpec,
    UsageReport,
)
from ..usage import Usage
from ._http import ErrorContext, HTTPProvider, error_from_payload, parse_json, wire_int
from ._sse import SSEDecoder, SSEEvent
from ._think_tags import ThinkTagSplitter

__all__ = ["OpenAIDialect", "OpenAIProvider", "OpenAIStreamParser", "build_request"]

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


@dataclass(frozen=True)
class OpenAIDialect:
    """How one OpenAI-compatible server departs from OpenAI.

    - ``reasoning_field``: a delta field holding reasoning text, checked before ``reasoning`` and
      ``reasoning_content``.
    - ``think_tags``: split a leading ``<think>…</think>`` out of the content.
    - ``thinking_param``: how the thinking level is sent — OpenAI's ``reasoning_effort``,
      OpenRouter's ``reasoning`` object, or not at all (the model decides).
    - ``max_tokens_field``: OpenAI wants ``max_completion_tokens``; most others ``max_tokens``.
    - ``tool_choice_required``: the word for "call some tool" (Mistral's is ``"any"``).
    - ``stream_usage``: send ``stream_options: {"include_usage": true}`` (Mistral rejects it,
      and reports usage in its last chunk unasked).
    - ``prompt_cache_key``: send the request's ``cache_key`` as ``prompt_cache_key``, which OpenAI
      uses to route the requests of one conversation to the same prompt cache. Off by default:
      a server that does not know the field may reject the request.
    """

    reasoning_field: str | None = None
    think_tags: bool = True
    thinking_param: Literal["reasoning_effort", "openrouter", "none"] = "reasoning_effort"
    max_tokens_field: str = "max_tokens"
    tool_choice_required: str = "required"
    stream_usage: bool = True
    prompt_cache_key: bool = False


def build_request(
    request: ModelRequest, *, model: str, dialect: OpenAIDialect = OpenAIDialect()
) -> dict[str, Any]:
    """The JSON body of a streaming Chat Completions request.

    OpenAI caches a prompt's prefix by itself (1,024 tokens or more); what helps it is a prefix
    that is the same bytes every request, which this body is: system prompt, then the history in
    order, then the tools, each rendered the same way every time.
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": _messages(request.system, request.messages),
        "stream": True,
    }
    if dialect.stream_usage:
        body["stream_options"] = {"include_usage": True}
    tools, choice = _tool_choice(request, dialect.tool_choice_required)
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
            }
            for t in tools
        ]
        if choice is not None:
            body["tool_choice"] = choice
    output = request.output_schema
    if output is not None:
        json_schema: dict[str, Any] = {
            "name": output.name,
            "schema": output.json_schema,
            "strict": output.strict,
        }
        if output.description:
            json_schema["description"] = output.description
        body["response_format"] = {"type": "json_schema", "json_schema": json_schema}
    settings = request.settings
    if dialect.prompt_cache_key and request.cache_key and settings.prompt_cache != "off":
        body["prompt_cache_key"] = request.cache_key
    if settings.max_tokens is not None:
        body[dialect.max_tokens_field] = settings.max_tokens
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    level = settings.thinking
    if level is not None:
        if dialect.thinking_param == "reasoning_effort" and level != "none":
            # "none" is left out rather than sent: older reasoning models reject it, and
            # non-reasoning models do not think anyway.
            body["reasoning_effort"] = level
        elif dialect.thinking_param == "openrouter":
            body["reasoning"] = {"enabled": False} if level == "none" else {"effort": level}
    return body


def _tool_choice(request: ModelRequest, required: str = "required") -> tuple[Sequence[ToolSpec], Any]:
    """The tools to send and the ``tool_choice`` value (``None``: not sent); ``required`` is the
    server's word for "call some tool"."""
    choice = request.tool_choice
    if choice == "auto":
        return request.tools, None
    if choice == "required":
        return request.tools, required
    if isinstance(choice, str):
        return request.tools, choice
    if len(choice) == 1:
        return request.tools, {"type": "function", "function": {"name": choice[0]}}
    return [t for t in request.tools if t.name in choice], required


def _messages(system: str, messages: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        if message.role == "user":
            out.extend(_user(message))
        else:
            assistant = _assistant(message)
            if assistant is not None:
                out.append(assistant)
    return out


def _user(message: Message) -> list[dict[str, Any]]:
    # Tool results must directly follow the assistant message that made the calls, so they go
    # first, as "tool" messages, and any text or images of the same turn after them.
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": b.tool_call_id, "content": _result_text(b)}
        for b in message.content
        if isinstance(b, ToolResultBlock)
    ]
    # A tool message carries text only: a result's images follow in the user part, introduced.
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock) and block.images:
            parts.append({"type": "text", "text": block.images_caption})
            parts.extend(_image_part(image) for image in block.images)
        elif isinstance(block, TextBlock) and block.text:
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            parts.append(_image_part(block))
    if len(parts) == 1 and parts[0]["type"] == "text":
        out.append({"role": "user", "content": parts[0]["text"]})
    elif parts:
        out.append({"role": "user", "content": parts})
    return out


def _image_part(block: ImageBlock) -> dict[str, Any]:
    url = block.url or f"data:{block.media_type};base64,{block.data or ''}"
    return {"type": "image_url", "image_url": {"url": url}}


def _result_text(block: ToolResultBlock) -> str:
    # The wire has no error flag for tool results; say it in the content so the model knows.
    if block.is_error and not block.content.lower().startswith("error"):
        return f"Error: {block.content}"
    return block.content


def _assistant(message: Message) -> dict[str, Any] | None:
    # Reasoning is not sent back: OpenAI does not accept it and DeepSeek rejects requests with it.
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": b.raw_arguments or "{}"},
        }
        for b in message.content
        if isinstance(b, ToolCallBlock)
    ]
    if not text and not calls:
        return None  # e.g. a reply interrupted before any text: an empty message is rejected
    # "" rather than null for a message that only calls tools: llama.cpp's server rejects null.
    out: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        out["tool_calls"] = calls
    return out


def parse_usage(raw: dict[str, Any]) -> Usage:
    """Usage from a Chat Completions ``usage`` object.

    As everywhere in ipyagent, ``input_tokens + cache_read_tokens`` is the whole prompt: the
    wire's ``prompt_tokens`` includes the cached ones, so they are taken out of it."""
    prompt = raw.get("prompt_tokens_details")
    completion = raw.get("completion_tokens_details")
    cost = raw.get("cost")
    cached = wire_int(prompt.get("cached_tokens")) if isinstance(prompt, dict) else 0
    return Usage(
        input_tokens=max(0, wire_int(raw.get("prompt_tokens")) - cached),
        output_tokens=wire_int(raw.get("completion_tokens")),
        cache_read_tokens=cached,
        reasoning_tokens=wire_int(completion.get("reasoning_tokens")) if isinstance(completion, dict) else 0,
        cost=float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
        requests=1,
    )


class OpenAIStreamParser:
    """Sans-IO: feed :class:`SSEEvent` to :meth:`feed_many` (or :meth:`feed`), call
    :meth:`finish` at the end of the body. Raises :class:`ProtocolError` for a broken stream and
    the mapped provider error for an error the server reports inside the stream."""

    def __init__(
        self, ctx: ErrorContext, *, dialect: OpenAIDialect = OpenAIDialect(), context_limit: int | None = None
    ) -> None:
        self._ctx = ctx
        self._dialect = dialect
        self._context_limit = context_limit
        self._fields = tuple(
            dict.fromkeys(f for f in (dialect.reasoning_field, "reasoning", "reasoning_content") if f)
        )
        # A delta with no other keys than these is plain text (see _plain_text).
        self._plain_keys = frozenset({"role", "content"}).difference(self._fields)
        self._splitter = ThinkTagSplitter() if dialect.think_tags else None
        self._settled = self._splitter is None  # content is all text from here on
        self._batch = EventBatch()
        self._done = False
        self._finish: str | None = None
        self._refused = False
        self._usage: Usage | None = None
        self._response_id: str | None = None
        # wire index -> (our key, call id, has a name); see _tool_calls for why keys can differ
        self._calls: dict[int, tuple[int | str, str | None]] = {}
        self._named: dict[int | str, bool] = {}

    def feed_many(self, events: Iterable[SSEEvent]) -> list[ProviderEvent]:
        """The events of one network read in; their provider events, merged per block, out.

        A chunk that only adds text — nearly every chunk of a long reply — skips the general
        path: its text is collected and joined with its neighbours' into one chunk."""
        batch = self._batch
        texts: list[str] = []  # plain text since the last chunk that took the general path
        for event in events:
            payload = self._payload(event)
            if payload is None:
                continue
            text = self._plain_text(payload) if self._settled else None
            if text is not None:
                texts.append(text)
                continue
            if texts:
                batch.text("".join(texts))
                texts.clear()
            self._chunk(payload, batch)
        if texts:
            batch.text("".join(texts))
        return batch.take()

    def feed(self, event: SSEEvent) -> list[ProviderEvent]:
        """One event, always through the general path: the reference :meth:`feed_many` is tested
        against."""
        payload = self._payload(event)
        if payload is not None:
            self._chunk(payload, self._batch)
        return self._batch.take()

    def _payload(self, event: SSEEvent) -> dict[str, Any] | None:
        """The event's JSON object, checked, its id noted; None for ``[DONE]`` and after it."""
        if self._done:
            return None
        try:
            payload = parse_json(event.data)
        except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
            if event.data.strip() == "[DONE]":  # not JSON, so checked only when parsing fails
                self._done = True
                return None
            raise ProtocolError(
                f"{self._ctx.who} sent a chunk that is not JSON: {self._ctx.redact(event.data[:200])!r}",
                hint="The server does not speak the Chat Completions stream format — check the "
                "endpoint's base URL and kind.",
                code="invalid_json",
            ) from exc
        if not isinstance(payload, dict):
            raise ProtocolError(
                f"{self._ctx.who} sent a chunk that is not a JSON object.",
                hint="Check the endpoint's base URL and kind.",
                code="invalid_chunk",
            )
        if event.event == "error" or payload.get("error"):
            # OpenRouter: a chunk with a top-level "error"; Groq: "event: error".
            raise error_from_payload(payload.get("error") or payload, self._ctx)
        if isinstance(payload.get("id"), str):
            self._response_id = payload["id"]
        return payload

    def _plain_text(self, payload: dict[str, Any]) -> str | None:
        """The content of a chunk that carries nothing else for choice 0: no usage, no finish
        reason, no reasoning, refusal or tool calls. None sends the chunk down the general path,
        which is always right; this only has to be sure when it answers."""
        try:
            # Subscripts rather than isinstance checks: of JSON values only an object takes a
            # string key, so getting this far means choice and delta are dicts.
            (choice,) = payload["choices"]
            delta = choice["delta"]
            content = delta["content"]
        except (KeyError, TypeError, ValueError):
            return None
        if (
            not isinstance(content, str)
            or not content
            or not delta.keys() <= self._plain_keys
            or choice.get("index") != 0
            or choice.get("finish_reason")
            or isinstance(payload.get("usage"), dict)
        ):
            return None
        return content

    def _chunk(self, payload: dict[str, Any], batch: EventBatch) -> None:
        usage = payload.get("usage")
        if isinstance(usage, dict):
            self._usage = parse_usage(usage)  # running totals (vLLM) replace, never add
        choices = payload.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if isinstance(choice, dict) and wire_int(choice.get("index")) == 0:
                self._choice(choice, batch)

    def _choice(self, choice: dict[str, Any], batch: EventBatch) -> None:
        delta = choice.get("delta")
        if isinstance(delta, dict):
            for name in self._fields:
                reasoning = delta.get(name)
                if isinstance(reasoning, str) and reasoning:
                    batch.thinking(reasoning)
                    break  # some servers fill two fields with the same text
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._content(content, batch)
            refusal = delta.get("refusal")
            if isinstance(refusal, str) and refusal:
                self._refused = True
                batch.text(refusal)
            calls = delta.get("tool_calls")
            if isinstance(calls, list):
                self._tool_calls(calls, batch)
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            self._finish = reason

    def _content(self, content: str, batch: EventBatch) -> None:
        if self._splitter is None or self._settled:
            batch.text(content)
            return
        batch.pieces(self._splitter.feed(content))
        self._settled = self._splitter.settled

    def _tool_calls(self, calls: list[Any], batch: EventBatch) -> None:
        for position, call in enumerate(calls):
            if not isinstance(call, dict):
                continue
            index = call.get("index")
            index = index if isinstance(index, int) and not isinstance(index, bool) else position
            call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
            known = self._calls.get(index)
            if known is None or (call_id is not None and known[1] is not None and call_id != known[1]):
                # A new id on a known index is a new call: some servers number every call 0.
                key: int | str = index if known is None else f"{index}.{len(self._named)}"
                self._calls[index] = (key, call_id)
                self._named.setdefault(key, False)
            elif call_id is not None:
                self._calls[index] = (known[0], call_id)
            key = self._calls[index][0]
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            name = function.get("name") if isinstance(function.get("name"), str) else None
            arguments = function.get("arguments")
            if isinstance(arguments, dict):
                arguments = json.dumps(arguments)  # a few servers send the object itself
            arguments = arguments if isinstance(arguments, str) else ""
            if name:
                self._named[key] = True
            if call_id or name or arguments:
                batch.add(ToolCallChunk(key=key, id=call_id, name=name or None, arguments=arguments))

    def finish(self) -> list[ProviderEvent]:
        """End of the body: flush held text, check the stream was complete, report usage."""
        if self._splitter is not None:
            self._batch.pieces(self._splitter.flush())
        out = self._batch.take()
        if not self._done and self._finish is None:
            raise ProtocolError(
                f"The stream from {self._ctx.who} ended before its end marker (data: [DONE]).",
                hint="The connection was probably cut — retry.",
                code="incomplete_stream",
                retryable=True,
            )
        unnamed = [key for key, named in self._named.items() if not named]
        if unnamed:
            raise ProtocolError(
                f"{self._ctx.who} streamed a tool call without a tool name.",
                hint="The server's tool-call support is broken for this model — try another model or server.",
                code="tool_call_without_name",
            )
        if self._usage is not None:
            out.append(UsageReport(usage=self._usage, context_limit=self._context_limit))
        reason = _FINISH.get(self._finish or "stop", "stop")
        if reason == "stop" and self._named:
            reason = "tool_calls"  # several servers say "stop" after calling tools
        elif reason == "stop" and self._refused:
            reason = "refusal"
        out.append(ResponseEnd(finish_reason=reason, response_id=self._response_id))
        return out


class OpenAIProvider(HTTPProvider):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    >>> OpenAIProvider("gpt-4.1", base_url="https://api.openai.com/v1", api_key=..., endpoint="openai")
    """

    models_hint = "List the models this endpoint serves: GET {base_url}/models."

    def __init__(self, model: str, *, dialect: OpenAIDialect = OpenAIDialect(), **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.dialect = dialect

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        model = self._wire_model(request.model)
        body = build_request(request, model=model, dialect=self.dialect)
        headers = {"Accept": "text/event-stream"}
        if self._secret is not None:
            headers["Authorization"] = f"Bearer {self._secret.reveal()}"
        parser = OpenAIStreamParser(
            self._error_context(model), dialect=self.dialect, context_limit=self.context_limit
        )
        decoder = SSEDecoder()
        async for event in self._events("/chat/completions", body, headers, model, decoder, parser):
            yield event
