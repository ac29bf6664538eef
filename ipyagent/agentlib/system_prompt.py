"""The default system prompt: who the agent is, today's date, and how to use its tools.

Built deterministically from its inputs, so that the same conversation sends the same prompt
(and provider-side prompt caches hit).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from .providers.base import ToolSpec

__all__ = ["default_system_prompt"]

IDENTITY = (
    "You are ipyagent, an assistant working inside the user's Python environment. "
    "Be concise and accurate. When a tool can answer a question about the user's data or code, "
    "use it instead of guessing; when you are done, answer in plain text."
)


def default_system_prompt(tools: Sequence[ToolSpec], *, today: dt.date | None = None) -> str:
    parts = [IDENTITY, f"Today's date is {(today or dt.date.today()).isoformat()}."]
    if tools:
        names = ", ".join(sorted(t.name for t in tools))
        parts.append(
            f"Tools available: {names}. Call a tool with arguments that match its schema; "
            "if a call fails, read the error and fix the call rather than repeating it."
        )
    return "\n\n".join(parts)
