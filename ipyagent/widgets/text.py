"""View state → text: the stable plain text and Markdown of a view's blocks.

What nbval compares and a terminal or a static viewer (nbconvert, GitHub) shows when no widget
does: what the run said and did, never a duration, a token count or an id. The kernel's
renderers (``ipyagent/kernel/render.py``, ``widget_renderer.py``) write these as cell outputs.
"""

from __future__ import annotations

import json
from typing import Any

from typing_extensions import assert_never

from .view_state import Block, ToolBlock, ViewState

__all__ = ["block_markdown", "block_plain", "call_label", "plain_text"]


def plain_text(state: ViewState) -> str:
    """A stable plain-text rendering of a view: what nbval compares, what a terminal shows.
    No durations, token counts or ids — only what the run said and did."""
    return "\n".join(filter(None, (block_plain(b) for b in state["blocks"])))


def block_plain(block: Block) -> str:
    if block["kind"] == "user":
        return f"» {block['text']}"
    if block["kind"] == "text":
        return block["text"]
    if block["kind"] == "thinking":
        return f"💭 {block['text']}"
    if block["kind"] == "tool":
        line = f"→ {_label(block)} {_MARKS.get(block['status'], '…')}"
        if block["status"] in ("failed", "denied") and block["result"]:
            line += "".join(f"\n  {detail}" for detail in block["result"].splitlines()[:6])
        return line
    if block["kind"] == "question":
        return f"? {block['question']} → {block['answer']}"
    if block["kind"] == "warning":
        return f"⚠ {block['text']}"
    if block["kind"] == "error":
        hint = f"\n  Hint: {block['hint']}" if block["hint"] else ""
        return f"✗ {block['message']}{hint}"
    if block["kind"] == "attachment":
        return ""  # what the model was sent, not what the run said: nbval compares no token counts
    assert_never(block)


def block_markdown(block: Block) -> str:
    if block["kind"] == "text":
        return block["text"]
    if block["kind"] == "thinking":
        return "\n".join(f"> {line}" for line in f"💭 {block['text']}".splitlines())
    if block["kind"] == "tool":
        line = f"**→ `{_label(block)}`** {_MARKS.get(block['status'], '…')}"
        if block["status"] in ("failed", "denied") and block["result"]:
            line += "\n\n```\n" + "\n".join(block["result"].splitlines()[:6]) + "\n```"
        return line
    if block["kind"] == "error":
        hint = f"\n\n*Hint:* {block['hint']}" if block["hint"] else ""
        return f"**✗ {block['message']}**{hint}"
    # The plain text of these reads well as Markdown.
    if block["kind"] == "user" or block["kind"] == "question" or block["kind"] == "warning":
        return block_plain(block)
    if block["kind"] == "attachment":
        return ""
    assert_never(block)


_MARKS = {"done": "✓", "failed": "✗", "denied": "⊘"}


def _label(block: ToolBlock) -> str:
    try:
        arguments = json.loads(block["args"]) if block["args"] else {}
    except ValueError:
        return f"{block['name']}({block['args'][:80]})"
    return call_label(block["name"], arguments if isinstance(arguments, dict) else None)


def call_label(name: str, arguments: dict[str, Any] | None, limit: int = 80) -> str:
    """``name(key="value", n=3)``, each value clipped so that one call fits on a line."""
    if not arguments:
        return f"{name}()"
    parts = []
    for key, value in arguments.items():
        text = json.dumps(value, ensure_ascii=False, default=str)
        parts.append(f"{key}={text if len(text) <= limit else text[: limit - 1] + '…'}")
    return f"{name}({', '.join(parts)})"
