"""Test your own agents and notebooks without a real model.

:class:`ScriptedModel` plays scripted replies — text, thinking, tool calls whose arguments
stream in fragments, usage, and errors — so a test decides exactly what the "model" does::

    from ipyagent import Agent
    from ipyagent.testing import ScriptedModel, tool_call

    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "3"])
    result = await Agent(model=model, tools=[add]).run("1 + 2?")
    assert result.text == "3"
"""

from .agentlib.providers.replay import ReplayModel
from .agentlib.providers.scripted import (
    Fail,
    Pause,
    ReportUsage,
    ScriptedModel,
    Text,
    Thinking,
    ToolCall,
    Turn,
    error,
    pause,
    text,
    thinking,
    tool_call,
    usage,
)

__all__ = [
    "Fail",
    "Pause",
    "ReplayModel",
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
