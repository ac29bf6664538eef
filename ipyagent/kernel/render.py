"""Showing a run in the cell without widgets: streamed text for terminals, one output per
finished block for notebooks (nbclient, nbconvert, a front end without the widget).

Every output has a stable ``text/plain`` and Markdown — the text itself, a tool call's name,
arguments and outcome, never a duration, a token count or a memory address — so nbval compares
meaningful text (it compares both).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from typing_extensions import assert_never

from ..agentlib import events as ev
from ..agentlib.events import AgentEvent
from ..agentlib.result import RunResult
from ..widgets.claim_marks import untraced_note, untraced_text
from ..widgets.reducer import ViewReducer
from ..widgets.text import block_markdown, block_plain, call_label, nested_blocks
from ..widgets.view_state import Block, MimeBundle

__all__ = [
    "DisplayRenderer",
    "Output",
    "QuietRenderer",
    "TerminalRenderer",
    "call_label",
    "displayed",
    "is_output",
]


def _preview(text: str, lines: int = 8, chars: int = 600) -> str:
    clipped = "\n".join(text.splitlines()[:lines])[:chars]
    return clipped + ("\n…" if clipped != text else "")


class Output:
    """An output with ``text/plain`` for nbval and terminals and Markdown for people."""

    def __init__(self, plain: str = "", markdown: str = "") -> None:
        self.plain, self.markdown = plain, markdown

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.plain, "text/markdown": self.markdown or self.plain}


class DisplayRenderer:
    """Notebooks without the widget: each block is shown once, when it is complete.

    Outputs are never updated in place: nbval compares the first version of an output with the
    saved (last) one, so an updated output would never match. Errors are left to the exception
    the cell raises.
    """

    def __init__(self, *, show_thinking: bool = True) -> None:
        from IPython.display import display

        self._display: Callable[..., Any] = display
        self._show_thinking = show_thinking
        self._reducer = ViewReducer()
        self._shown: set[str] = set()
        self._traced: set[str] = set()  # text blocks whose claims (set as the run ends) were shown

    def handle(self, event: AgentEvent) -> None:
        self._reducer.feed(event)
        self._reducer.take()  # the patches are for widgets; only the state matters here
        if event.type in _BOUNDARIES:
            self._show_complete()

    def _show_complete(self) -> None:
        blocks = self._reducer.state["blocks"]
        for block in blocks:
            if block["kind"] == "text" and "claims" in block and block["id"] not in self._traced:
                self._traced.add(block["id"])
                # A text shown when it ended learns its claims only as the run ends: outputs
                # are never updated (see above), so what is untraced is an output of its own.
                if block["id"] in self._shown and (note := untraced_note(block)):
                    self._display(Output(note, note))
            if block["id"] in self._shown or not _complete(block):
                continue
            self._shown.add(block["id"])
            hidden = block["kind"] == "thinking" and not self._show_thinking
            if hidden or not is_output(block):
                continue
            self._display(Output(block_plain(block, blocks), block_markdown(block, blocks)))
            for bundle in displayed(block, blocks):
                self._display(bundle, raw=True)

    def tick(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def finish(self, result: RunResult | None) -> None:
        self._show_complete()


#: Events after which a block may have become complete.
_BOUNDARIES = frozenset(
    {
        "text_end",
        "thinking_end",
        "tool_result",
        "run_warning",
        "ask_user_answered",
        "run_finished",
        "run_failed",
    }
)


def _complete(block: Block) -> bool:
    if block["kind"] == "text" or block["kind"] == "thinking":
        return not block["streaming"]
    if block["kind"] == "tool":
        return block["status"] in ("done", "failed", "denied")
    if block["kind"] == "question":
        return block["answer"] is not None
    if (
        block["kind"] == "user"
        or block["kind"] == "warning"
        or block["kind"] == "error"
        or block["kind"] == "attachment"
    ):
        return True
    assert_never(block)


def is_output(block: Block) -> bool:
    """Whether a block becomes an output of the cell when no widget shows the run. Not the
    user's prompt (it is the cell's source), nor an error (the cell raises it), nor what was
    sent with the prompt (its token counts would differ between a recording and a replay), nor
    a sub-agent's block (its delegate card's output sums it up)."""
    if block.get("parent"):
        return False
    if block["kind"] == "user" or block["kind"] == "error" or block["kind"] == "attachment":
        return False
    if (
        block["kind"] == "text"
        or block["kind"] == "thinking"
        or block["kind"] == "tool"
        or block["kind"] == "question"
        or block["kind"] == "warning"
    ):
        return True
    assert_never(block)


def displayed(block: Block, blocks: Sequence[Block] = ()) -> list[MimeBundle]:
    """What a tool showed the user (figures, tables): MIME bundles to display as they are; a
    delegate card's include what its sub-agent's tools showed (``blocks``: the view's)."""
    own = (block["display"] or []) if block["kind"] == "tool" else []
    return own + [bundle for child in nested_blocks(block, blocks) for bundle in displayed(child, blocks)]


class TerminalRenderer:
    """Terminal IPython: text is printed as it streams."""

    def __init__(self, *, show_thinking: bool = False) -> None:
        self._show_thinking = show_thinking
        self._labels: dict[str, str] = {}

    def handle(self, event: AgentEvent) -> None:
        out = sys.stdout
        if event.via:  # a sub-agent's: its calls, indented under the delegate call (its text is the result)
            self._nested(event)
        elif isinstance(event, ev.TextDelta):
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
        elif isinstance(event, ev.SubagentStarted):  # its calls follow, indented, before its result
            out.write(f"→ {self._labels.get(event.call_id, 'delegate')} …\n")
        elif isinstance(event, ev.RunWarning):
            print(f"ipyagent: {event.message}", file=sys.stderr)
        out.flush()

    def _nested(self, event: AgentEvent) -> None:
        indent = "  " * len(event.via)
        if isinstance(event, ev.ToolCallEnd):
            self._labels[event.call_id] = call_label(event.name, event.arguments)
        elif isinstance(event, ev.ToolResult):
            mark = "✗" if event.is_error else "✓"
            sys.stdout.write(f"{indent}→ {self._labels.get(event.call_id, event.name)} {mark}\n")
        elif isinstance(event, ev.SubagentStarted):
            sys.stdout.write(f"{indent}→ {self._labels.get(event.call_id, 'delegate')} …\n")
        elif isinstance(event, ev.RunWarning):
            print(f"ipyagent: (sub-agent) {event.message}", file=sys.stderr)

    def tick(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def finish(self, result: RunResult | None) -> None:
        if result is not None and result.status == "exhausted":
            print(f"⚠ {result.reason}")
        if result is not None and (note := untraced_text([c.text for c in result.claims if not c.traced])):
            print(note)


class QuietRenderer:
    """``--quiet``: nothing while running; the cell shows only what the run ends with."""

    def handle(self, event: AgentEvent) -> None:
        pass

    def tick(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def finish(self, result: RunResult | None) -> None:
        pass


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
