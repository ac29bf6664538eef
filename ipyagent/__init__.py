"""ipyagent — an LLM agent that lives in your Jupyter kernel.

    %load_ext ipyagent            # in a notebook: the %%agent cell magic and %agent commands

    from ipyagent import Agent, tool   # in Python: the agent itself

Importing this package is cheap: its names load on first use, and neither importing it nor
``%load_ext ipyagent`` loads a widget library or an HTTP client; the agent core itself loads at
the first ``%%agent`` cell.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

from .__about__ import __version__

if _typing.TYPE_CHECKING:
    from .agentlib import (
        Agent,
        AgentError,
        AgentRunFailed,
        Block,
        BlockToolCall,
        Budget,
        Delegation,
        ErrorInfo,
        Hooks,
        MapResult,
        Memory,
        Message,
        OutputValidationError,
        Pass,
        Pipeline,
        PipelineRun,
        Plugin,
        RetryPolicy,
        RunContext,
        RunResult,
        Session,
        Summaries,
        Tool,
        ToolCallInfo,
        ToolOutput,
        Usage,
        UserError,
        agent_step,
        events,
        map_step,
        tool,
    )

__all__ = [
    "Agent",
    "AgentError",
    "AgentRunFailed",
    "Block",
    "BlockToolCall",
    "Budget",
    "Delegation",
    "ErrorInfo",
    "Hooks",
    "MapResult",
    "Memory",
    "Message",
    "OutputValidationError",
    "Pass",
    "Pipeline",
    "PipelineRun",
    "Plugin",
    "RetryPolicy",
    "RunContext",
    "RunResult",
    "Session",
    "Summaries",
    "Tool",
    "ToolCallInfo",
    "ToolOutput",
    "Usage",
    "UserError",
    "__version__",
    "agent_step",
    "events",
    "load_ipython_extension",
    "map_step",
    "tool",
    "unload_ipython_extension",
]

_LAZY = {name: ".agentlib" for name in __all__ if name[0] != "_" and "ipython_extension" not in name}


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ipyagent' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


def load_ipython_extension(ipython: _typing.Any) -> None:
    """Called by ``%load_ext ipyagent``: registers the ``%%agent`` and ``%agent`` magics."""
    from .kernel.extension import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: _typing.Any) -> None:
    from .kernel.extension import unload_ipython_extension as unload

    unload(ipython)
