"""Showing a run in the cell without widgets: streamed text for terminals, updating displays for
notebooks (nbclient, nbconvert, a front end without the widget extension).

Every output has a stable ``text/plain`` — the text itself, a tool call's name, arguments and
outcome, never a duration or a memory address — so nbval compares meaningful text. Timings and
token counts go only into the Markdown.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import assert_never

from ..agentlib import events as ev
from ..agentlib.events import AgentEvent
from ..agentlib.result import RunResult
from ..widgets.reducer import call_label

__all__ = ["DisplayRenderer", "QuietRenderer", "TerminalRenderer", "call_label"]

#: Seconds between updates of a streaming display: ~10 updates/s is smooth and cheap.
UPDATE_INTERVAL = 0.1


def _preview(text: str, lines: int = 8, chars: int = 600) -> str:
    clipped = "\n".join(text.splitlines()[:lines])[:chars]
    return clipped + ("\n…" if clipped != text else "")


class _Output:
    """An updatable output: ``text/plain`` for nbval and terminals, Markdown for people."""

    def __init__(self, plain: str = "", markdown: str = "") -> None:
        self.plain, self.markdown = plain, markdown

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.plain, "text/markdown": self.markdown or self.plain}


@dataclass
class _Segment:
    kind: str
    handle: Any
    output: _Output
    chunks: list[str] = field(default_factory=list)
    dirty: bool = False
    started: float = field(default_factory=time.monotonic)


class DisplayRenderer:
    """One display output per text block, thinking block and tool call, updated in place."""

    def __init__(self, *, show_thinking: bool = True) -> None:
        from IPython.display import display

        self._display: Callable[..., Any] = display
        self._show_thinking = show_thinking
        self._blocks: dict[int, _Segment] = {}  # this request's text/thinking by block index
        self._calls: dict[str, _Segment] = {}
        self._attempt: list[_Segment] = []  # what the current request showed, to drop on retry
        self._last_flush = 0.0

    def _new(self, kind: str, plain: str = "", markdown: str = "") -> _Segment:
        output = _Output(plain, markdown)
        segment = _Segment(kind, self._display(output, display_id=True), output)
        self._attempt.append(segment)
        return segment

    def handle(self, event: AgentEvent) -> None:
        if isinstance(event, ev.RequestStarted):
            self._blocks, self._attempt = {}, []
        elif isinstance(event, ev.TextStart):
            self._blocks[event.index] = self._new("text")
        elif isinstance(event, ev.ThinkingStart):
            if self._show_thinking:
                self._blocks[event.index] = self._new("thinking")
        elif isinstance(event, (ev.TextDelta, ev.ThinkingDelta)):
            segment = self._blocks.get(event.index)
            if segment is not None:
                segment.chunks.append(event.delta)
                segment.dirty = True
        elif isinstance(event, ev.TextEnd):
            self._set_text(event.index, event.text)
        elif isinstance(event, ev.ThinkingEnd):
            self._set_thinking(event.index, event.text, event.duration)
        elif isinstance(event, ev.ToolCallStart):
            segment = self._new("tool", f"→ {event.name}(…)", f"**→ `{event.name}`** …")
            self._calls[event.call_id] = segment
        elif isinstance(event, ev.ToolCallEnd):
            self._update(self._calls.get(event.call_id), f"→ {call_label(event.name, event.arguments)}")
        elif isinstance(event, ev.ToolResult):
            self._tool_result(event)
        elif isinstance(event, ev.RequestError):
            if event.will_retry:  # the failed attempt's output is discarded, as the agent does
                for segment in self._attempt:
                    segment.handle.update(_Output())
                self._blocks, self._attempt = {}, []
        elif isinstance(event, ev.Warning):
            print(f"ipyagent: {event.message}", file=sys.stderr)
        elif isinstance(
            event,
            (
                ev.RunStarted, ev.RunFinished, ev.RunFailed, ev.RunCancelled, ev.RequestDone,
                ev.ToolCallDelta, ev.ToolExecuting, ev.PermissionRequired, ev.PermissionResolved,
                ev.AskUserRequired, ev.AskUserAnswered, ev.UsageUpdated, ev.MessageCommitted,
                ev.CompactionStarted, ev.CompactionCompleted,
            ),
        ):  # fmt: skip
            pass
        else:
            assert_never(event)

    def _set_text(self, index: int, text: str) -> None:
        segment = self._blocks.get(index)
        if segment is not None:
            segment.output.plain = segment.output.markdown = text
            segment.handle.update(segment.output)
            segment.dirty = False

    def _set_thinking(self, index: int, text: str, duration: float) -> None:
        segment = self._blocks.get(index)
        if segment is not None:
            segment.output.plain = f"💭 {text}"
            quoted = "\n".join(f"> {line}" for line in text.splitlines())
            segment.output.markdown = f"*Thought for {duration:.1f} s*\n\n{quoted}"
            segment.handle.update(segment.output)
            segment.dirty = False

    def _update(self, segment: _Segment | None, label: str) -> None:
        if segment is not None:
            segment.chunks = [label]
            segment.output.plain = label
            segment.output.markdown = f"**{label}**"
            segment.handle.update(segment.output)

    def _tool_result(self, event: ev.ToolResult) -> None:
        segment = self._calls.get(event.call_id)
        if segment is None:
            return
        label = segment.chunks[0] if segment.chunks else f"→ {event.name}"
        mark = "✗" if event.is_error else "✓"
        preview = _preview(event.content)
        segment.output.plain = f"{label} {mark}\n{_indent(preview)}" if event.is_error else f"{label} {mark}"
        body = f"\n\n```\n{preview}\n```" if preview else ""
        segment.output.markdown = f"**`{label[2:]}`** {mark} *({event.duration:.1f} s)*{body}"
        segment.handle.update(segment.output)
        payloads = (
            event.display if isinstance(event.display, list) else [event.display] if event.display else []
        )
        for bundle in payloads:
            self._display(bundle, raw=True)

    def tick(self) -> None:
        now = time.monotonic()
        if now - self._last_flush < UPDATE_INTERVAL:
            return
        self._last_flush = now
        for segment in self._blocks.values():
            if segment.dirty:
                text = "".join(segment.chunks)
                if segment.kind == "thinking":
                    segment.output.plain = f"💭 {text}"
                    segment.output.markdown = "\n".join(f"> {line}" for line in text.splitlines())
                else:
                    segment.output.plain = segment.output.markdown = text + " ▍"
                segment.handle.update(segment.output)
                segment.dirty = False

    def finish(self, result: RunResult | None) -> None:
        if result is not None and result.status == "exhausted":
            self._display(_Output(f"⚠ {result.message}", f"⚠ *{result.message}*"))


class TerminalRenderer:
    """Terminal IPython: text is printed as it streams."""

    def __init__(self, *, show_thinking: bool = False) -> None:
        self._show_thinking = show_thinking
        self._labels: dict[str, str] = {}

    def handle(self, event: AgentEvent) -> None:
        out = sys.stdout
        if isinstance(event, ev.TextDelta):
            out.write(event.delta)
        elif isinstance(event, ev.TextEnd):
            out.write("\n")
        elif isinstance(event, ev.ThinkingDelta) and self._show_thinking:
            out.write(event.delta)
        elif isinstance(event, ev.ThinkingEnd) and self._show_thinking:
            out.write("\n")
        elif isinstance(event, ev.ToolCallEnd):
            self._labels[event.call_id] = call_label(event.name, event.arguments)
        elif isinstance(event, ev.ToolResult):
            mark = "✗" if event.is_error else "✓"
            out.write(f"→ {self._labels.get(event.call_id, event.name)} {mark}\n")
            if event.is_error:
                out.write(_indent(_preview(event.content)) + "\n")
        elif isinstance(event, ev.Warning):
            print(f"ipyagent: {event.message}", file=sys.stderr)
        out.flush()

    def tick(self) -> None:
        pass

    def finish(self, result: RunResult | None) -> None:
        if result is not None and result.status == "exhausted":
            print(f"⚠ {result.message}")


class QuietRenderer:
    """``--quiet``: nothing while running; the cell shows only what the run ends with."""

    def handle(self, event: AgentEvent) -> None:
        pass

    def tick(self) -> None:
        pass

    def finish(self, result: RunResult | None) -> None:
        pass


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
