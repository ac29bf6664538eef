"""Ollama's native chat API: ``POST {host}/api/chat``, streamed as NDJSON.

This module owns :func:`build_request` (our messages to Ollama's, with base64 images, tool
results as ``role: tool`` messages and the ``think`` parameter), :class:`OllamaStreamParser`
(decoded lines to provider events, sans-IO: thinking, whole tool calls with object arguments,
token counts from the final ``done`` line, ``{"error": ...}`` lines after HTTP 200) and
:class:`OllamaProvider`. Ollama's OpenAI-compatible ``/v1`` is served by the openai adapter.

``/api/chat`` has no ``tool_choice``. The request's is carried out as far as the tools sent can
do it: ``"none"`` sends no tools, tool names send only those tools. ``"required"`` cannot be
enforced: the tools are sent and the model may still answer in text.

The request's ``output_schema`` (a typed answer) becomes ``format: <schema>``, which holds the
whole reply to the schema — tool calls included, so a request that sends tools gets no
``format`` (with both, Ollama returns no tool calls: ollama/ollama#8095); the system prompt
still gives the schema, and the loop checks the answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from ..errors import ProtocolError
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
    ProviderEvent,
    ResponseEnd,
    ToolCallChunk,
    ToolSpec,
    UsageReport,
)
from ..usage import Usage
from ._http import ErrorContext, HTTPProvider, error_from_payload, parse_json, wire_int
from ._sse import NDJSONDecoder
from ._think_tags import ThinkTagSplitter

__all__ = ["OllamaProvider", "OllamaStreamParser", "build_request"]

_DONE: dict[str, FinishReason] = {"stop": "stop", "length": "length"}


def build_request(request: ModelRequest, *, model: str, endpoint: str = "ollama") -> dict[str, Any]:
    """The JSON body of a streaming ``/api/chat`` request."""
    body: dict[str, Any] = {"model": model, "messages": _messages(request, endpoint), "stream": True}
    choice = request.tool_choice
    if choice == "none":
        tools: Sequence[ToolSpec] = ()
    elif isinstance(choice, tuple):
        tools = [t for t in request.tools if t.name in choice]
    else:  # "auto", and "required", which /api/chat cannot enforce
        tools = request.tools
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
            }
            for t in tools
        ]
    elif request.output_schema is not None:
        body["format"] = request.output_schema.json_schema
    level = request.settings.thinking
    if level is not None:
        # gpt-oss takes a level and cannot switch thinking off; the others take a boolean.
        if model.startswith("gpt-oss"):
            body["think"] = "low" if level == "none" else level
        else:
            body["think"] = level != "none"
    options: dict[str, Any] = {}
    if request.settings.max_tokens is not None:
        options["num_predict"] = request.settings.max_tokens
    if request.settings.temperature is not None:
        options["temperature"] = request.settings.temperature
    if options:
        body["options"] = options
    return body


def _messages(request: ModelRequest, endpoint: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": request.system}] if request.system else []
    for message in request.messages:
        if message.role == "user":
            out.extend(_user(message))
        else:
            assistant = _assistant(message, endpoint)
            if assistant is not None:
                out.append(assistant)
    return out


def _user(message: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "role": "tool",
            "tool_name": b.name,
            "content": f"Error: {b.content}"
            if b.is_error and not b.content.lower().startswith("error")
            else b.content,
        }
        for b in message.content
        if isinstance(b, ToolResultBlock)
    ]
    texts: list[str] = []
    images: list[str] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock) and block.images:
            # A tool message carries no images here: they follow in the user part, introduced.
            texts.append(block.images_caption)
            images.extend(i.data for i in block.images if i.data)
        elif isinstance(block, TextBlock) and block.text:
            texts.append(block.text)
        elif isinstance(block, ImageBlock):
            if block.data:
                images.append(block.data)  # Ollama takes bare base64, no data: URL
            elif block.url:
                # Ollama cannot fetch URLs; tell the model an image was there rather than drop it.
                texts.append(f"[image: {block.url}]")
    if texts or images:
        user: dict[str, Any] = {"role": "user", "content": "\n\n".join(texts)}
        if images:
            user["images"] = images
        out.append(user)
    return out


def _assistant(message: Message, endpoint: str) -> dict[str, Any] | None:
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    own = message.model is None or message.model.split("/", 1)[0] == endpoint
    thinking = "".join(b.text for b in message.content if isinstance(b, ThinkingBlock)) if own else ""
    calls = [
        {"function": {"name": b.name, "arguments": b.arguments or {}}}
        for b in message.content
        if isinstance(b, ToolCallBlock)
    ]
    if not text and not calls:
        return None
    out: dict[str, Any] = {"role": "assistant", "content": text}
    if thinking:
        out["thinking"] = thinking
    if calls:
        out["tool_calls"] = calls
    return out


class OllamaStreamParser:
    """Sans-IO: feed NDJSON lines to :meth:`feed_many` (or :meth:`feed`), call :meth:`finish` at
    the end of the body.

    Raises :class:`ProtocolError` for a broken stream and the mapped provider error for an
    ``{"error": ...}`` line."""

    def __init__(
        self, ctx: ErrorContext, *, context_limit: int | None = None, think_tags: bool = True
    ) -> None:
        self._ctx = ctx
        self._context_limit = context_limit
        self._splitter = ThinkTagSplitter() if think_tags else None
        self._done = False
        self._done_reason: str | None = None
        self._calls = 0
        self._usage: Usage | None = None
        self._batch = EventBatch()

    def feed_many(self, lines: Iterable[str]) -> list[ProviderEvent]:
        """The lines of one network read in; their provider events, merged per block, out."""
        for line in lines:
            self._line(line, self._batch)
        return self._batch.take()

    def feed(self, line: str) -> list[ProviderEvent]:
        return self.feed_many((line,))

    def _line(self, line: str, out: EventBatch) -> None:
        if self._done:
            return
        try:
            payload = parse_json(line)
        except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
            raise ProtocolError(
                f"{self._ctx.who} sent a line that is not JSON: {self._ctx.redact(line[:200])!r}",
                hint="The server does not speak Ollama's /api/chat stream — check the endpoint's base URL "
                "(OLLAMA_HOST) and kind.",
                code="invalid_json",
            ) from exc
        if not isinstance(payload, dict):
            raise ProtocolError(
                f"{self._ctx.who} sent a line that is not a JSON object.",
                hint="Check the endpoint's base URL (OLLAMA_HOST) and kind.",
                code="invalid_chunk",
            )
        if payload.get("error"):
            raise error_from_payload(payload["error"], self._ctx)
        message = payload.get("message")
        if isinstance(message, dict):
            thinking = message.get("thinking")
            if isinstance(thinking, str) and thinking:
                out.thinking(thinking)
            content = message.get("content")
            if isinstance(content, str) and content:
                self._content(content, out)
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                self._tool_calls(calls, out)
        if payload.get("done") is True:
            self._done = True
            reason = payload.get("done_reason")
            self._done_reason = reason if isinstance(reason, str) else None
            self._usage = Usage(
                input_tokens=wire_int(payload.get("prompt_eval_count")),
                output_tokens=wire_int(payload.get("eval_count")),
                requests=1,
            )

    def _content(self, content: str, out: EventBatch) -> None:
        # Models whose thinking Ollama does not parse put it inline in <think> tags.
        if self._splitter is None or self._splitter.settled:
            out.text(content)
            return
        out.pieces(self._splitter.feed(content))

    def _tool_calls(self, calls: list[Any], out: EventBatch) -> None:
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                raise self._bad_call("a tool call without a function")
            name = function.get("name")
            if not isinstance(name, str) or not name:
                raise self._bad_call("a tool call without a name")
            arguments = function.get("arguments")
            raw = (
                arguments
                if isinstance(arguments, str)
                else json.dumps({} if arguments is None else arguments)
            )
            call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
            # Each call arrives whole; its "index" restarts at 0 on every line, so keys count calls.
            out.add(ToolCallChunk(key=self._calls, id=call_id, name=name, arguments=raw))
            self._calls += 1

    def _bad_call(self, what: str) -> ProtocolError:
        return ProtocolError(
            f"{self._ctx.who} sent {what}.",
            hint="The model's tool-call template may be broken — try another model or update Ollama.",
            code="invalid_tool_call",
        )

    def finish(self) -> list[ProviderEvent]:
        """End of the body: check the ``done`` line came, report usage and the stop reason."""
        if self._splitter is not None:
            self._batch.pieces(self._splitter.flush())
        out = self._batch.take()
        if not self._done:
            raise ProtocolError(
                f"The stream from {self._ctx.who} ended before its final line (done: true).",
                hint="The connection was cut or the model runner crashed — retry; if it persists, check "
                "the Ollama server's log.",
                code="incomplete_stream",
                retryable=True,
            )
        if self._usage is not None:
            out.append(UsageReport(usage=self._usage, context_limit=self._context_limit))
        # Ollama says "stop" after tool calls too.
        reason: FinishReason = "tool_calls" if self._calls else _DONE.get(self._done_reason or "stop", "stop")
        out.append(ResponseEnd(finish_reason=reason))
        return out


class OllamaProvider(HTTPProvider):
    """A model served by Ollama's native API (``base_url`` is the host, e.g.
    ``http://localhost:11434``). A key is optional: only hosted Ollama needs one."""

    models_hint = "Pull the model with `ollama pull <model>`, or list the local ones with `ollama list`."
    connect_hint = "Is Ollama running? Start it with `ollama serve`, or point OLLAMA_HOST at the server."

    def __init__(self, model: str, *, think_tags: bool = True, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.think_tags = think_tags

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        model = self._wire_model(request.model)
        body = build_request(request, model=model, endpoint=self.endpoint)
        headers = {"Accept": "application/x-ndjson"}
        if self._secret is not None:
            headers["Authorization"] = f"Bearer {self._secret.reveal()}"
        parser = OllamaStreamParser(
            self._error_context(model), context_limit=self.context_limit, think_tags=self.think_tags
        )
        decoder = NDJSONDecoder()
        async for event in self._events("/api/chat", body, headers, model, decoder, parser):
            yield event
