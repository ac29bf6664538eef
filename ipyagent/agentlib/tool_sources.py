"""Tools that come from somewhere else at the start of each run (MCP servers).

A :class:`ToolSource` is asked once per run, after the run starts and before its first request,
for the tools it offers now. It may ask the user first (enabling an MCP server is such a
question), and it may have something to tell the model (a server that could not start) and the
user (how to fix it). The run adds the tools to its own for that run only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from .errors import ErrorInfo
from .tools import Tool

__all__ = ["SourceContext", "SourcedTools", "ToolSource"]


@dataclass(frozen=True)
class SourceContext:
    """What a run lends a tool source."""

    #: Ask the user (``question``, ``choices``); ``None`` when nobody can answer (headless).
    ask: Callable[[str, list[str]], Awaitable[str | None]]
    #: The run may change things without asking (``auto_approve``, ``%%agent -y``).
    auto_approve: bool = False


@dataclass(frozen=True)
class SourcedTools:
    tools: list[Tool] = field(default_factory=list)
    #: Told to the model with the user's message (what is unavailable, and why).
    notes: list[str] = field(default_factory=list)
    #: Shown to the user as warnings, each with the hint that fixes it.
    problems: list[ErrorInfo] = field(default_factory=list)


class ToolSource(Protocol):
    async def tools_for_run(self, context: SourceContext) -> SourcedTools: ...
