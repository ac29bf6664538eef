"""The sandbox's errors (re-exported by :mod:`ipyagent.agentlib.sandbox`)."""

from __future__ import annotations

from ..errors import AgentError

__all__ = ["SandboxError", "SandboxTimeout", "SandboxUnavailable"]


class SandboxError(AgentError):
    """The sandbox could not run the call."""

    layer = "tool"
    default_code = "sandbox_error"


class SandboxUnavailable(SandboxError):
    """This machine cannot confine a child process, so the sandboxed tool was not run."""

    default_code = "sandbox_unavailable"


class SandboxTimeout(SandboxError):
    """A sandboxed call ran past its time limit and was killed."""

    default_code = "sandbox_timeout"
