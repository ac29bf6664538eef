"""ipyagent — an LLM agent that lives in your Jupyter kernel.

    %load_ext ipyagent            # in a notebook: the %%agent cell magic and %agent commands

    from ipyagent import Agent, tool   # in Python: the agent itself

Importing this package is cheap: it loads no IPython, widget library or HTTP client; the
kernel layer is imported only when IPython loads the extension.
"""

from __future__ import annotations

import typing as _typing

from .__about__ import __version__
from .agentlib import (
    Agent,
    AgentError,
    BlockToolCall,
    ErrorInfo,
    Hooks,
    Message,
    RetryPolicy,
    RunContext,
    RunResult,
    Session,
    Tool,
    ToolCallInfo,
    ToolOutput,
    Usage,
    UserError,
    events,
    tool,
)

__all__ = [
    "Agent",
    "AgentError",
    "BlockToolCall",
    "ErrorInfo",
    "Hooks",
    "Message",
    "RetryPolicy",
    "RunContext",
    "RunResult",
    "Session",
    "Tool",
    "ToolCallInfo",
    "ToolOutput",
    "Usage",
    "UserError",
    "__version__",
    "events",
    "load_ipython_extension",
    "tool",
    "unload_ipython_extension",
]


def load_ipython_extension(ipython: _typing.Any) -> None:
    """Called by ``%load_ext ipyagent``: registers the ``%%agent`` and ``%agent`` magics."""
    from .kernel.extension import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: _typing.Any) -> None:
    from .kernel.extension import unload_ipython_extension as unload

    unload(ipython)
