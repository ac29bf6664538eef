"""A model that plays a script: for tests, demos, and testing your own notebooks offline.

    from ipyagent.testing import ScriptedModel, text, thinking, tool_call

    model = ScriptedModel([
        [thinking("The user wants the weather."), tool_call("get_weather", {"city": "Paris"})],
        "It is sunny in Paris.",                      # a plain string is one text reply
        lambda request: f"You said {request.messages[-1].text!r}",   # computed from the request
    ])
    agent = Agent(model=model, tools=[get_weather])

Each turn answers one model request, in order; ``model.requests`` keeps what was asked (unless
``record_requests=False``, for very long runs). Text and arguments stream in small chunks
(``chunk_size`` characters, ``delay`` seconds apart), so views and cancellation see a real stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from typing_extensions import assert_never

from ..errors import AgentError, UserError
from ..messages import FinishReason
from ..model import (
    ModelRequest,
    ProviderEvent,
    ResponseEnd,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageReport,
)
from ..usage import CHARS_PER_TOKEN, Usage, estimate_tokens

__all__ = [
    "Fail",
    "Pause",
    "ReportUsage",
    "ScriptedModel",
    "Text",
    "Thinking",
    "ToolCall",
    "Turn",
    "error",
    "pause",
    "text",
    "thinking",
    "tool_call",
    "usage",
]


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Thinking:
    text: str
    signature: str | None = None


@dataclass(frozen=True)
class ToolCall:
    """A tool call. ``arguments`` may be a dict, or a string to script malformed JSON."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Fail:
    """Raise ``error`` at this point of the stream (after what came before it was streamed)."""

    error: AgentError


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass(frozen=True)
class ReportUsage:
    usage: Usage


Step: TypeAlias = Text | Thinking | ToolCall | Fail | Pause | ReportUsage
Turn: TypeAlias = str | Step | Sequence[Step] | Callable[[ModelRequest], Any]


def text(value: str) -> Text:
    return Text(value)


def thinking(value: str, *, signature: str | None = None) -> Thinking:
    return Thinking(value, signature)


def tool_call(name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None) -> ToolCall:
    return ToolCall(name, {} if arguments is None else arguments, id)


def error(err: AgentError) -> Fail:
    return Fail(err)


def pause(seconds: float) -> Pause:
    return Pause(seconds)


def usage(*, input_tokens: int = 0, output_tokens: int = 0, **more: Any) -> ReportUsage:
    return ReportUsage(Usage(input_tokens=input_tokens, output_tokens=output_tokens, **more))


class ScriptedModel:
    """A :class:`~ipyagent.agentlib.providers.Provider` that answers from a script."""

    def __init__(
        self,
        turns: Iterable[Turn],
        *,
        model_id: str = "scripted/script",
        chunk_size: int = 4,
        delay: float = 0.0,
        context_limit: int | None = None,
        record_requests: bool = True,
    ) -> None:
        self.turns: list[Turn] = list(turns)
        self.requests: list[ModelRequest] = []
        self.chunk_size = max(1, chunk_size)
        self.delay = delay
        self._model_id = model_id
        self._context_limit = context_limit
        self._record = record_requests
        self._served = 0

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def context_limit(self) -> int | None:
        return self._context_limit

    def add(self, *turns: Turn) -> None:
        """Append turns to the script."""
        self.turns.extend(turns)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        index = self._served
        self._served += 1
        if self._record:
            self.requests.append(request)
        if index >= len(self.turns):
            raise UserError(
                f"ScriptedModel was asked for reply {index + 1}, but its script has {len(self.turns)}.",
                hint="Add more turns to the script (model.add(...)).",
                code="script_exhausted",
            )
        steps = _steps(self.turns[index], request)
        reported: Usage | None = None
        output_chars = 0
        calls = 0
        for step in steps:
            if isinstance(step, Text):
                output_chars += len(step.text)
                for piece in self._pieces(step.text):
                    yield TextChunk(text=piece)
                    await self._tick()
            elif isinstance(step, Thinking):
                output_chars += len(step.text)
                for piece in self._pieces(step.text):
                    yield ThinkingChunk(text=piece)
                    await self._tick()
                if step.signature:
                    yield ThinkingChunk(signature=step.signature)
            elif isinstance(step, ToolCall):
                raw = step.arguments if isinstance(step.arguments, str) else json.dumps(step.arguments)
                output_chars += len(raw) + len(step.name)
                yield ToolCallChunk(key=calls, id=step.id, name=step.name)
                for piece in self._pieces(raw):
                    yield ToolCallChunk(key=calls, arguments=piece)
                    await self._tick()
                calls += 1
            elif isinstance(step, Fail):
                raise step.error
            elif isinstance(step, Pause):
                await asyncio.sleep(step.seconds)
            elif isinstance(step, ReportUsage):
                reported = step.usage
            else:
                assert_never(step)
        if reported is None:  # estimate, as a provider would count
            reported = Usage(
                input_tokens=estimate_tokens(request.system, request.messages),
                output_tokens=output_chars // CHARS_PER_TOKEN + 1,
            )
        yield UsageReport(usage=reported, context_limit=self._context_limit)
        finish: FinishReason = "tool_calls" if calls else "stop"
        yield ResponseEnd(finish_reason=finish)

    def _pieces(self, value: str) -> Iterable[str]:
        size = self.chunk_size
        return (value[i : i + size] for i in range(0, len(value), size))

    async def _tick(self) -> None:
        # Yield to the loop even with no delay, so a cancellation can land mid-stream.
        await asyncio.sleep(self.delay)

    def __repr__(self) -> str:
        return f"ScriptedModel({self._model_id!r}, turns={len(self.turns)}, used={self._served})"


def _steps(turn: Turn, request: ModelRequest) -> list[Step]:
    if callable(turn) and not isinstance(turn, (Text, Thinking, ToolCall, Fail, Pause, ReportUsage)):
        turn = turn(request)
    if isinstance(turn, str):
        return [Text(turn)]
    if isinstance(turn, (Text, Thinking, ToolCall, Fail, Pause, ReportUsage)):
        return [turn]
    return list(turn)  # type: ignore[arg-type]  # a callable was resolved above
