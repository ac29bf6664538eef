"""Assembling one streamed model response: provider chunks in, public events and a message out.

Pure and synchronous, so that every provider shares one implementation of the fiddly rules and
tests can feed it chunks directly:

- text and thinking chunks extend the current block of their kind (same ``key``), otherwise
  start a new block, ending the one before;
- tool-call fragments are grouped by ``key`` and may interleave; a call is announced once its
  name is known, and ends with the response;
- tool-call ids belong to the agent: a missing id is generated, an id already used in the
  conversation (or twice in this response) is replaced.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from typing import TypeVar

from typing_extensions import assert_never

from .errors import ProtocolError
from .events import (
    AgentEvent,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from .messages import ContentBlock, FinishReason, Message, TextBlock, ThinkingBlock, ToolCallBlock, new_id
from .model import (
    PartKey,
    ProviderEvent,
    ResponseEnd,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageReport,
)
from .usage import Usage

__all__ = ["PartsAssembler"]


@dataclass
class _Text:
    key: PartKey
    chunks: list[str] = field(default_factory=list)


@dataclass
class _Thinking:
    key: PartKey
    started: float
    chunks: list[str] = field(default_factory=list)
    signature: str = ""
    redacted: str | None = None


@dataclass
class _Call:
    key: int | str
    id: str | None = None
    name: str | None = None
    chunks: list[str] = field(default_factory=list)
    announced: bool = False


_Part = _Text | _Thinking | _Call
_P = TypeVar("_P", _Text, _Thinking)


class PartsAssembler:
    """Feed :meth:`feed` the provider's chunks in order; call :meth:`finish` at the end."""

    def __init__(self, *, taken_ids: Container[str] = (), make_id: Callable[[], str] | None = None) -> None:
        self._taken = taken_ids  # the conversation's ids: read, never copied (it grows with the chat)
        self._mine: set[str] = set()
        self._make_id = make_id or (lambda: new_id("call"))
        self._parts: list[_Part] = []
        self._calls: dict[int | str, int] = {}  # tool-call key -> index in _parts
        self._open: int | None = None  # index of the open text/thinking part
        self.usage: Usage | None = None
        self.context_limit: int | None = None
        self.finish_reason: FinishReason | None = None

    @property
    def has_output(self) -> bool:
        """Whether anything the user could have seen was streamed."""
        return bool(self._parts)

    def feed(self, event: ProviderEvent) -> list[AgentEvent]:
        if isinstance(event, TextChunk):
            return self._feed_text(event)
        if isinstance(event, ThinkingChunk):
            return self._feed_thinking(event)
        if isinstance(event, ToolCallChunk):
            return self._feed_call(event)
        if isinstance(event, UsageReport):
            self.usage = event.usage
            self.context_limit = event.context_limit or self.context_limit
            return []
        if isinstance(event, ResponseEnd):
            self.finish_reason = event.finish_reason
            return []
        assert_never(event)

    def _feed_text(self, chunk: TextChunk) -> list[AgentEvent]:
        if not chunk.text:
            return []
        out: list[AgentEvent] = []
        part = self._current(_Text, chunk.key)
        if part is None:
            out += self._close_open()
            part = _Text(key=chunk.key)
            self._open = self._append(part)
            out.append(TextStart(index=self._open))
        part.chunks.append(chunk.text)
        out.append(
            TextDelta(index=len(self._parts) - 1 if self._open is None else self._open, delta=chunk.text)
        )
        return out

    def _feed_thinking(self, chunk: ThinkingChunk) -> list[AgentEvent]:
        if not (chunk.text or chunk.signature or chunk.redacted):
            return []
        out: list[AgentEvent] = []
        part = self._current(_Thinking, chunk.key)
        if part is None or chunk.redacted is not None:
            out += self._close_open()
            part = _Thinking(key=chunk.key, started=time.monotonic(), redacted=chunk.redacted)
            self._open = self._append(part)
            out.append(ThinkingStart(index=self._open))
        if chunk.text:
            part.chunks.append(chunk.text)
            assert self._open is not None
            out.append(ThinkingDelta(index=self._open, delta=chunk.text))
        if chunk.signature:
            part.signature += chunk.signature
        return out

    def _feed_call(self, chunk: ToolCallChunk) -> list[AgentEvent]:
        out: list[AgentEvent] = []
        index = self._calls.get(chunk.key)
        if index is None:
            out += self._close_open()
            index = self._calls[chunk.key] = self._append(_Call(key=chunk.key))
        call = self._parts[index]
        assert isinstance(call, _Call)
        if chunk.id and call.id is None and not call.announced:
            call.id = chunk.id
        if chunk.name and not call.name:
            call.name = chunk.name
        if chunk.arguments:
            call.chunks.append(chunk.arguments)
        if not call.announced and call.name:
            call.announced = True
            call.id = self._own_id(call.id)
            out.append(ToolCallStart(index=index, call_id=call.id, name=call.name))
            if call.chunks:
                out.append(ToolCallDelta(call_id=call.id, delta="".join(call.chunks)))
        elif call.announced and chunk.arguments:
            assert call.id is not None
            out.append(ToolCallDelta(call_id=call.id, delta=chunk.arguments))
        return out

    def finish(self) -> list[AgentEvent]:
        """End every open block. Raises :class:`ProtocolError` for a call that never got a name."""
        out = self._close_open()
        for part in self._parts:
            if isinstance(part, _Call):
                if not part.announced:
                    raise ProtocolError(
                        "The model streamed a tool call without a name.",
                        hint="This is a provider bug or a truncated stream; retrying usually helps.",
                    )
                assert part.id is not None and part.name is not None
                block = ToolCallBlock.from_raw(id=part.id, name=part.name, raw_arguments="".join(part.chunks))
                out.append(
                    ToolCallEnd(
                        call_id=block.id,
                        name=block.name,
                        arguments=block.arguments,
                        raw_arguments=block.raw_arguments,
                    )
                )
        return out

    def message(self, *, model: str, interrupted: bool = False) -> Message:
        """The assembled assistant message. With ``interrupted``, unfinished tool calls are left
        out (they never completed, so no result could answer them), and the text on either side
        of one is joined into one block."""
        content: list[ContentBlock] = []
        for part in self._parts:
            if isinstance(part, _Text):
                text = "".join(part.chunks)
                if interrupted and content and isinstance(content[-1], TextBlock):
                    content[-1] = TextBlock(text=content[-1].text + text)
                else:
                    content.append(TextBlock(text=text))
            elif isinstance(part, _Thinking):
                content.append(
                    ThinkingBlock(
                        text="".join(part.chunks), signature=part.signature or None, redacted=part.redacted
                    )
                )
            elif isinstance(part, _Call):
                if interrupted or not part.announced:
                    continue
                assert part.id is not None and part.name is not None
                content.append(
                    ToolCallBlock.from_raw(id=part.id, name=part.name, raw_arguments="".join(part.chunks))
                )
            else:
                assert_never(part)
        calls = any(isinstance(b, ToolCallBlock) for b in content)
        finish: FinishReason = (
            "cancelled" if interrupted else (self.finish_reason or ("tool_calls" if calls else "stop"))
        )
        return Message(
            role="assistant",
            content=tuple(content),
            model=model,
            finish_reason=finish,
            interrupted=interrupted,
        )

    # -- helpers ---------------------------------------------------------------------------------

    def _current(self, kind: type[_P], key: PartKey) -> _P | None:
        if self._open is None:
            return None
        part = self._parts[self._open]
        if isinstance(part, kind) and (key is None or part.key == key):
            return part
        return None

    def _append(self, part: _Part) -> int:
        self._parts.append(part)
        return len(self._parts) - 1

    def _close_open(self) -> list[AgentEvent]:
        if self._open is None:
            return []
        index, self._open = self._open, None
        part = self._parts[index]
        if isinstance(part, _Text):
            return [TextEnd(index=index, text="".join(part.chunks))]
        if isinstance(part, _Thinking):
            return [
                ThinkingEnd(index=index, text="".join(part.chunks), duration=time.monotonic() - part.started)
            ]
        return []

    def _own_id(self, proposed: str | None) -> str:
        call_id = proposed if proposed and not self._is_taken(proposed) else self._make_id()
        while self._is_taken(call_id):
            call_id = self._make_id()
        self._mine.add(call_id)
        return call_id

    def _is_taken(self, call_id: str) -> bool:
        return call_id in self._taken or call_id in self._mine
