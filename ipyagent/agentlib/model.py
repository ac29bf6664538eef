"""The types every layer shares about models, owned by the core: the request a model is given
(:class:`ModelRequest`, :class:`ModelSettings`, :class:`ToolSpec`), the stream it answers with
(:data:`ProviderEvent`), and the one contract between the loop and every model, :class:`Provider`.
Providers (``ipyagent.agentlib.providers``) import these; the core imports a provider only where a
model id is resolved (``endpoints``, ``local_models``).

A provider turns a :class:`ModelRequest` into an async stream of :data:`ProviderEvent` — small
deltas in the order the model produced them. Adapters own their wire format and nothing else:
they do not assemble messages, assign tool-call ids, retry, or decide anything about tools. The
loop's :class:`~ipyagent.agentlib.parts.PartsAssembler` turns these deltas into a message and
into the public events.

Failures are raised as :class:`~ipyagent.agentlib.errors.ProviderError` or
:class:`~ipyagent.agentlib.errors.TransportError` (``retryable`` set where a retry may help).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from .errors import UserError
from .messages import FinishReason, Message
from .usage import Usage

__all__ = [
    "PROVIDER_EVENT_ADAPTER",
    "ModelRequest",
    "ModelSettings",
    "OutputSchema",
    "PromptCache",
    "Provider",
    "ProviderEvent",
    "ResponseEnd",
    "TextChunk",
    "ThinkingChunk",
    "ThinkingLevel",
    "ToolCallChunk",
    "ToolChoice",
    "ToolSpec",
    "UsageReport",
]

# Schemas are built on first use, not at import: `%load_ext ipyagent` stays fast.
_DEFERRED = ConfigDict(defer_build=True)

ThinkingLevel = Literal["none", "low", "medium", "high"]
#: Which tools a reply may call: ``"auto"`` (the model decides), ``"none"`` (it answers in text),
#: ``"required"`` (it calls one or more of the tools) or a tuple of tool names (it calls one or
#: more of those). The loop decides it (:mod:`ipyagent.agentlib.tool_choice`); adapters map it.
ToolChoice: TypeAlias = Literal["auto", "none", "required"] | tuple[str, ...]
PartKey: TypeAlias = int | str | None
#: Whether a request asks the provider to cache its prompt, and for how long: ``"5m"`` (the
#: default: a cache entry lives five minutes after its last use), ``"1h"`` (an hour, for pauses
#: between turns longer than five minutes; Anthropic charges 2x the input price to write it rather
#: than 1.25x) or ``"off"``. Anthropic caches only what a request marks, so the adapter marks the
#: stable prefix; OpenAI caches every long prefix by itself, and ``"off"`` there only stops the
#: routing hint (``prompt_cache_key``). See the "Prompt caching" section of docs/architecture.md.
PromptCache: TypeAlias = Literal["off", "5m", "1h"]


class ToolSpec(BaseModel):
    """What the model is told about a tool: its name, description and JSON schema."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str
    description: str
    parameters: dict[str, Any]


class ModelSettings(BaseModel):
    """How a model is asked: reasoning effort, reply length, temperature and prompt caching
    (:data:`PromptCache`). Set by the agent; adapters translate them to their wire."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    thinking: ThinkingLevel | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    prompt_cache: PromptCache = "5m"

    @field_validator("prompt_cache", mode="before")
    @classmethod
    def _check_prompt_cache(cls, value: object) -> object:
        if value not in ("off", "5m", "1h"):  # the user's option (Agent(prompt_cache=...)): say so
            raise UserError(
                f"prompt_cache must be 'off', '5m' or '1h', not {value!r}.",
                hint="Pass prompt_cache='5m' (the default), '1h' when turns are far apart, or 'off'.",
                code="invalid_option",
            )
        return value


class OutputSchema(BaseModel):
    """The shape a typed answer must have: one JSON object valid for ``json_schema``.

    The loop sets it on a request when the run wants a typed answer (``output_type``); it
    describes the reply that ends the run, not the tool calls before it. ``json_schema`` is
    always an object schema (a type that is not an object, like ``int`` or a list, is wrapped
    as ``{"result": ...}`` by the core). ``name`` is free among the request's tools (an API that
    carries answers as a tool call names that tool so); ``strict`` says the schema meets
    OpenAI's strict rules (every property required, no extra properties), so it may be sent as
    strict. Adapters map it to their API's structured output and say what they cannot enforce.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str = "final_result"
    description: str = ""
    json_schema: dict[str, Any]
    strict: bool = False


class ModelRequest(BaseModel):
    """One model call: ``model`` is the provider's own model name (no endpoint prefix).

    ``tool_choice`` says which of ``tools`` the reply may call (see :data:`ToolChoice`). Each
    adapter maps it to its API's field, or says in its docstring what it cannot enforce.

    ``expects_tool_call`` is the loop's hint, under ``tool_choice="auto"``, that the reply should
    probably call a tool: the user's message names one of ``tools`` ("is `get_weather` right for
    Oslo?"). It constrains nothing; a provider that can lean its sampling toward a call may (the
    local model does), the others ignore it. Decided by the loop like ``tool_choice``
    (:func:`ipyagent.agentlib.tool_choice.expects_tool_call`).

    ``cache_key`` names the conversation the request belongs to, the same on every request of it
    (the loop sets it from the conversation): an endpoint that routes requests by a cache key
    (OpenAI's ``prompt_cache_key``) sends the requests of one conversation to the same cache.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    model: str
    system: str = ""
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    settings: ModelSettings = ModelSettings()
    tool_choice: ToolChoice = "auto"
    expects_tool_call: bool = False
    output_schema: OutputSchema | None = None
    cache_key: str | None = None


class _Chunk(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)


class TextChunk(_Chunk):
    """Text to append. A chunk with a different ``key`` than the text before it starts a new
    block (Anthropic's block index); ``None`` continues the current one."""

    type: Literal["text"] = "text"
    text: str
    key: PartKey = None


class ThinkingChunk(_Chunk):
    type: Literal["thinking"] = "thinking"
    text: str = ""
    signature: str | None = None
    redacted: str | None = None
    key: PartKey = None


class ToolCallChunk(_Chunk):
    """A fragment of a tool call. Fragments with the same ``key`` belong to one call: ``id`` and
    ``name`` may come only on the first, ``arguments`` are concatenated."""

    type: Literal["tool_call"] = "tool_call"
    key: int | str
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class UsageReport(_Chunk):
    """Usage for this response so far. Reports replace each other, they never add up."""

    type: Literal["usage"] = "usage"
    usage: Usage
    context_limit: int | None = None


class ResponseEnd(_Chunk):
    type: Literal["end"] = "end"
    finish_reason: FinishReason = "stop"
    response_id: str | None = None


ProviderEvent: TypeAlias = Annotated[
    TextChunk | ThinkingChunk | ToolCallChunk | UsageReport | ResponseEnd,
    Field(discriminator="type"),
]
PROVIDER_EVENT_ADAPTER: TypeAdapter[ProviderEvent] = TypeAdapter(ProviderEvent, config=_DEFERRED)


def coalesce(events: list[ProviderEvent]) -> list[ProviderEvent]:
    """Merge adjacent fragments of the same block: what one network read brought in becomes one
    chunk per block. Every later stage (events, views, comm messages) then works per read, not
    per token, and the result is the same as feeding the fragments one by one."""
    if len(events) < 2:
        return events
    out: list[ProviderEvent] = [events[0]]
    for event in events[1:]:
        last = out[-1]
        if isinstance(event, TextChunk) and isinstance(last, TextChunk) and event.key == last.key:
            out[-1] = TextChunk(text=last.text + event.text, key=last.key)
        elif (
            isinstance(event, ThinkingChunk)
            and isinstance(last, ThinkingChunk)
            and event.key == last.key
            and last.redacted is None
            and event.redacted is None
        ):
            signature = (last.signature or "") + (event.signature or "") or None
            out[-1] = ThinkingChunk(text=last.text + event.text, signature=signature, key=last.key)
        elif (
            isinstance(event, ToolCallChunk)
            and isinstance(last, ToolCallChunk)
            and event.key == last.key
            and event.id is None
            and event.name is None
        ):
            out[-1] = ToolCallChunk(
                key=last.key, id=last.id, name=last.name, arguments=last.arguments + event.arguments
            )
        else:
            out.append(event)
    return out


class EventBatch:
    """Where a parser puts the events of one network read. Text and thinking deltas are merged
    as they arrive, so a long reply costs one string per token rather than one chunk object;
    :meth:`take` returns what :func:`coalesce` would make of the same events one by one."""

    __slots__ = ("_events", "_key", "_kind", "_parts")

    def __init__(self) -> None:
        self._events: list[ProviderEvent] = []
        self._parts: list[str] = []
        self._kind: Literal["text", "thinking"] | None = None
        self._key: PartKey = None

    def text(self, text: str, key: PartKey = None) -> None:
        if self._kind != "text" or self._key != key:
            self._close()
            self._kind, self._key = "text", key
        self._parts.append(text)

    def thinking(self, text: str, key: PartKey = None) -> None:
        if self._kind != "thinking" or self._key != key:
            self._close()
            self._kind, self._key = "thinking", key
        self._parts.append(text)

    def pieces(self, pieces: Iterable[tuple[Literal["text", "thinking"], str]]) -> None:
        """Text and thinking in order, as a :class:`.ThinkTagSplitter` hands them out."""
        for kind, text in pieces:
            if kind == "text":
                self.text(text)
            else:
                self.thinking(text)

    def add(self, event: ProviderEvent) -> None:
        self._close()
        self._events.append(event)

    def take(self) -> list[ProviderEvent]:
        """The batch so far, merged per block; the batch is empty afterwards."""
        self._close()
        events, self._events = self._events, []
        return coalesce(events)

    def _close(self) -> None:
        if self._kind is None:
            return
        text = "".join(self._parts)
        self._events.append(
            TextChunk(text=text, key=self._key)
            if self._kind == "text"
            else ThinkingChunk(text=text, key=self._key)
        )
        self._parts.clear()
        self._kind = None


@asynccontextmanager
async def open_stream(
    provider: Provider, request: ModelRequest
) -> AsyncIterator[AsyncIterator[ProviderEvent]]:
    """``provider.stream(request)``, closed on exit even when abandoned midway: a cancelled or
    failed turn must release its connection now, not when the garbage collector gets to it."""
    stream = provider.stream(request)
    try:
        yield stream
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


@runtime_checkable
class Provider(Protocol):
    """A model the agent can call.

    ``model_id`` is the qualified ``<endpoint>/<model>`` string; ``context_limit`` the model's
    window in tokens when known. A provider may also have a ``wait_before_retry(seconds)``
    coroutine method to decide how the wait before a retried request passes (see
    :func:`ipyagent.agentlib.retry.wait_before_retry`); without one the loop sleeps. It may have
    a ``close()`` method too, which an agent calls when it closes or changes model, for a provider
    it resolved from a model id (an HTTP provider lets go of its pooled connections there).
    """

    @property
    def model_id(self) -> str: ...

    @property
    def context_limit(self) -> int | None: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]: ...
