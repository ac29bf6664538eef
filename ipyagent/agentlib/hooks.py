"""Hooks: code that runs before and after each model call and each tool call.

Before-hooks guard, so they fail closed: a before-model hook that raises fails the run, a
before-tool hook that raises blocks that call (raise :class:`BlockToolCall` to give the model a
reason). After-hooks observe, so they fail open: an exception is logged and ignored. Hooks may be
sync or async.

    agent.hooks.before_tool_call(lambda call: ...)     # or use it as a decorator
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .messages import Message
from .model import ModelRequest

__all__ = ["BlockToolCall", "Hooks", "ToolCallInfo"]

H = TypeVar("H", bound=Callable[..., Any])


class BlockToolCall(Exception):
    """Raise in a before-tool hook to stop the call; the message is what the model reads."""


@dataclass(frozen=True)
class ToolCallInfo:
    """A tool call as hooks see it. A before-tool hook may return a new ``arguments`` dict."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    read_only: bool


@dataclass
class Hooks:
    before_model: list[Callable[[ModelRequest], Any]] = field(default_factory=list)
    after_model: list[Callable[[Message], Any]] = field(default_factory=list)
    before_tool: list[Callable[[ToolCallInfo], Any]] = field(default_factory=list)
    after_tool: list[Callable[[ToolCallInfo, Any], Any]] = field(default_factory=list)

    def before_model_call(self, fn: H) -> H:
        """``fn(request)``; return a new :class:`ModelRequest` to replace it, raise to fail the run."""
        self.before_model.append(fn)
        return fn

    def after_model_call(self, fn: H) -> H:
        """``fn(message)`` with the committed assistant message."""
        self.after_model.append(fn)
        return fn

    def before_tool_call(self, fn: H) -> H:
        """``fn(call: ToolCallInfo)``; return a dict to rewrite the arguments, raise to block."""
        self.before_tool.append(fn)
        return fn

    def after_tool_call(self, fn: H) -> H:
        """``fn(call: ToolCallInfo, result: ToolResult event)``."""
        self.after_tool.append(fn)
        return fn

    def remove(self, fn: Callable[..., Any]) -> None:
        for hooks in (self.before_model, self.after_model, self.before_tool, self.after_tool):
            while fn in hooks:
                hooks.remove(fn)


async def call_hook(fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def hook_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)
