"""The kernel layer's :class:`~ipyagent.agentlib.errors.UserError`, made without loading the agent
core when the extension loads (``%load_ext ipyagent``): the error type is imported when the first
error is made. The magics and line commands raise their users' mistakes through it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..agentlib.errors import UserError

__all__ = ["user_error"]


def user_error(message: str, hint: str, code: str = "user_error") -> UserError:
    """A ``UserError`` saying ``message``, with ``hint`` (what to do next) and ``code``."""
    from ..agentlib.errors import UserError

    return UserError(message, hint=hint, code=code)
