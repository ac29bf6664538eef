"""View state → text: the stable plain text and Markdown of a view's blocks.

What nbval compares and a terminal or a static viewer (nbconvert, GitHub) shows when no widget
does: what the run said and did, never a duration, a token count or an id. The kernel's
renderers (``ipyagent/kernel/render.py``, ``widget_renderer.py``) write these as cell outputs.

A sub-agent's work (the blocks whose ``parent`` is a delegate card) is summed up under its card,
indented: its tool calls, questions and warnings; its text is the card's result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from typing_extensions import assert_never

from .claim_marks import untraced_note
from .view_state import Block, ToolBlock, ViewState

__all__ = ["block_markdown", "block_plain", "call_label", "nested_blocks", "plain_text", "top_blocks"]


def plain_text(state: ViewState) -> str:
    """A stable plain-text rendering of a view: what nbval compares, what a terminal shows.
    No durations, token counts or ids — only what the run said and did."""
    blocks = state["blocks"]
    return "\n".join(filter(None, (block_plain(b, blocks) for b in top_blocks(blocks))))


def top_blocks(blocks: Sequence[Block]) -> list[Block]:
    """The blocks of the view's own run (a sub-agent's are shown inside their delegate card)."""
    return [b for b in blocks if not b.get("parent")]


def nested_blocks(block: Block, blocks: Sequence[Block]) -> list[Block]:
    """The blocks of the sub-agent whose delegate card is ``block`` (none for other blocks)."""
    if block["kind"] != "tool":
        return []
    return [b for b in blocks if b.get("parent") == block["id"]]


#: What of a sub-agent's work the text shows under its card (its text is the card's result).
_SUMMED_UP = ("tool", "question", "warning")


def _summary(block: Block, blocks: Sequence[Block], render: Any) -> list[str]:
    return [
        text
        for child in nested_blocks(block, blocks)
        if child["kind"] in _SUMMED_UP and (text := render(child, blocks))
    ]


def block_plain(block: Block, blocks: Sequence[Block] = ()) -> str:
    """One block as plain text; ``blocks`` (the view's) holds a delegate card's sub-agent work."""
    text = _block_plain(block)
    nested = _summary(block, blocks, block_plain)
    if nested:
        text += "".join(f"\n  {line}" for item in nested for line in item.splitlines())
    return text


def _block_plain(block: Block) -> str:
    if block["kind"] == "user":
        return f"» {block['text']}"
    if block["kind"] == "text":
        note = untraced_note(block)
        return f"{block['text']}\n{note}" if note else block["text"]
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
        hint = f"\n  Hint: {block['hint']}" if block.get("hint") else ""
        return f"⚠ {block['text']}{hint}"
    if block["kind"] == "error":
        hint = f"\n  Hint: {block['hint']}" if block["hint"] else ""
        return f"✗ {block['message']}{hint}"
    if block["kind"] == "attachment":
        return ""  # what the model was sent, not what the run said: nbval compares no token counts
    assert_never(block)


def block_markdown(block: Block, blocks: Sequence[Block] = ()) -> str:
    """One block as Markdown; ``blocks`` (the view's) holds a delegate card's sub-agent work."""
    text = _block_markdown(block)
    nested = _summary(block, blocks, block_markdown)
    if nested:
        text += "\n\n" + "\n>\n".join("\n".join(f"> {line}" for line in item.splitlines()) for item in nested)
    return text


def _block_markdown(block: Block) -> str:
    if block["kind"] == "text":
        note = untraced_note(block)
        return f"{block['text']}\n\n{note}" if note else block["text"]
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
        return _block_plain(block)
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
