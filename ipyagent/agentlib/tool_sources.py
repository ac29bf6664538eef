"""Tools that come from somewhere else at the start of each run (MCP servers).

A :class:`ToolSource` is asked once per run, after the run starts and before its first request,
for the tools it offers now. It may ask the user first (enabling an MCP server is such a
question), and it may have something to tell the model (a server that could not start) and the
user (how to fix it). The run adds the tools to its own for that run only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .errors import ErrorInfo
from .events import AgentEvent, RunWarning
from .messages import TextBlock
from .tools import Tool

__all__ = ["SourceContext", "SourcedTools", "ToolSource", "gather_tools"]


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


async def gather_tools(
    sources: Sequence[ToolSource],
    context: SourceContext,
    *,
    known: Collection[str],
    emit: Callable[[AgentEvent], None],
) -> tuple[list[Tool], tuple[TextBlock, ...]]:
    """The sources' tools not named like one in ``known``, and what the model is told with the
    prompt about what they could not offer; their problems are emitted as warnings."""
    added: list[Tool] = []
    notes: list[str] = []
    for source in sources:
        found = await source.tools_for_run(context)
        added.extend(t for t in found.tools if t.name not in known)
        notes.extend(found.notes)
        for problem in found.problems:
            emit(RunWarning(code=problem.code, message=problem.message, hint=problem.hint))
    return added, (TextBlock(text="\n".join(notes), attached="MCP servers"),) if notes else ()
