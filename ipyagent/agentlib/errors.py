"""The error hierarchy of ipyagent, and the structured record every failure carries.

Every failure a user can meet is an :class:`AgentError` (or is described by an
:class:`ErrorInfo` on an event or a result). Each says what went wrong *and what to do next*::

    AgentError
    ├── UserError              the caller's mistake: a bad option, an unknown model, a wrong call
    ├── ProviderError          the model provider answered with an error
    │   ├── AuthenticationError    401/403: the key is missing, wrong or lacks access
    │   ├── ModelNotFoundError     the provider does not know the model
    │   ├── RateLimitError         429: slow down (retryable, may carry Retry-After)
    │   ├── ProviderUnavailable    5xx, overloaded (retryable)
    │   ├── ContextOverflowError   the request does not fit the model's context window
    │   └── ProtocolError          the stream broke the wire format
    ├── TransportError         connection refused/reset, timeouts (retryable)
    ├── HookError              a hook raised
    │   └── PolicyBlocked          a policy blocked a model request (or failed, so blocked)
    ├── RunError               a guard stopped the run (repeated failures, empty replies, ...)
    │   ├── OutputValidationError  the answers never validated into the run's output_type
    │   └── WorkersExhausted       every worker thread is stuck in a call that never returned
    │                              (defined in workers.py, which owns the threads)
    ├── AgentRunFailed         a finished run that did not complete, raised on request
    │                          (``result.raise_for_status()``, a failed ``%%agent`` cell); its
    │                          ``info`` is the run's own error
    └── PipelineFailed         a pipeline's run that did not complete, raised on request
                               (``run.raise_for_status()``): a step failed, or the budget ran out

This module owns the hierarchy and ``ErrorInfo``; translating a library's exceptions into it
happens once, at each boundary (the provider adapters, the tool executor).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from .deprecation import retired_names

if TYPE_CHECKING:
    from .policy import Blocked

__all__ = [
    "AgentError",
    "AgentRunFailed",
    "AuthenticationError",
    "ContextOverflowError",
    "ErrorInfo",
    "HookError",
    "Layer",
    "ModelNotFoundError",
    "OutputValidationError",
    "PipelineFailed",
    "PolicyBlocked",
    "ProtocolError",
    "ProviderError",
    "ProviderUnavailable",
    "RateLimitError",
    "RunError",
    "Severity",
    "TransportError",
    "UserError",
]

Layer = Literal["provider", "tool", "run", "hook", "permission", "transport", "user"]
Severity = Literal["warning", "error", "fatal"]


class ErrorInfo(BaseModel):
    """What a failure event or a failed result says about the failure."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    code: str
    layer: Layer
    severity: Severity = "error"
    retryable: bool = False
    message: str
    hint: str = ""
    status_code: int | None = None

    def __str__(self) -> str:
        return f"{self.message} — {self.hint}" if self.hint else self.message


class AgentError(Exception):
    """Base of every error ipyagent raises. ``info`` is its structured description."""

    layer: ClassVar[Layer] = "run"
    default_code: ClassVar[str] = "agent_error"
    default_retryable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        hint: str = "",
        code: str | None = None,
        retryable: bool | None = None,
        severity: Severity = "error",
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.info = ErrorInfo(
            code=code or self.default_code,
            layer=self.layer,
            severity=severity,
            retryable=self.default_retryable if retryable is None else retryable,
            message=message,
            hint=hint,
            status_code=status_code,
        )
        #: Seconds the provider asked us to wait before retrying, when it said.
        self.retry_after = retry_after

    @property
    def code(self) -> str:
        return self.info.code

    @property
    def hint(self) -> str:
        return self.info.hint

    @property
    def retryable(self) -> bool:
        return self.info.retryable

    def __str__(self) -> str:
        return str(self.info)

    def _render_traceback_(self) -> list[str]:
        # IPython calls this (duck-typed: nothing here imports IPython) to show a short error
        # with its hint instead of a traceback through ipyagent's internals.
        lines = [f"{type(self).__name__}: {self.info.message}"]
        if self.info.hint:
            lines.append(f"Hint: {self.info.hint}")
        return lines

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep errors picklable across processes (pytest-xdist, multiprocessing tools).
        return (_rebuild, (type(self), self.info, self.retry_after))


def _rebuild(cls: type[AgentError], info: ErrorInfo, retry_after: float | None) -> AgentError:
    err = cls.__new__(cls)
    Exception.__init__(err, info.message)
    err.info = info
    err.retry_after = retry_after
    return err


class UserError(AgentError):
    """The caller's mistake: the message says what to change."""

    layer = "user"
    default_code = "user_error"


class ProviderError(AgentError):
    layer = "provider"
    default_code = "provider_error"


class AuthenticationError(ProviderError):
    default_code = "authentication_failed"


class ModelNotFoundError(ProviderError):
    default_code = "model_not_found"


class RateLimitError(ProviderError):
    default_code = "rate_limited"
    default_retryable = True


class ProviderUnavailable(ProviderError):
    default_code = "provider_unavailable"
    default_retryable = True


class ContextOverflowError(ProviderError):
    default_code = "context_overflow"


class ProtocolError(ProviderError):
    default_code = "protocol_error"


class TransportError(AgentError):
    layer = "transport"
    default_code = "transport_error"
    default_retryable = True


class HookError(AgentError):
    layer = "hook"
    default_code = "hook_failed"


class PolicyBlocked(HookError):
    """A model policy blocked the request: nothing was sent. Made by :meth:`from_block`, whose
    message is safe to show (see :mod:`~ipyagent.agentlib.policy`); ``blocked`` then holds the
    policy's name and metadata."""

    default_code = "policy_blocked"
    blocked: Blocked | None = None

    @classmethod
    def from_block(cls, blocked: Blocked) -> PolicyBlocked:
        hint = blocked.hint or (
            "Nothing was sent to the model. The message stays in the conversation and would go "
            "with the next one: start over (agent.reset(), %agent reset or %%agent --new), or "
            "change the policy."
        )
        err = cls(f"The request to the model was blocked by policy: {blocked.message}", hint=hint)
        err.blocked = blocked
        return err


class RunError(AgentError):
    layer = "run"
    default_code = "run_failed"


class OutputValidationError(RunError):
    """The model's answers did not validate into the run's ``output_type``, as many times as
    ``output_retries`` allowed: the last problems are in the message, the answers in the
    transcript."""

    default_code = "invalid_output"


class AgentRunFailed(AgentError):
    layer = "run"
    default_code = "run_failed"

    @classmethod
    def from_info(cls, info: ErrorInfo) -> AgentRunFailed:
        """The exception for a run that ended with ``info``."""
        err = _rebuild(cls, info, None)
        assert isinstance(err, AgentRunFailed)
        return err

    @property
    def error(self) -> ErrorInfo:
        """The run's error (``info``; the name the kernel's exception had)."""
        return self.info

    def _render_traceback_(self) -> list[str]:
        lines = [f"AgentRunFailed [{self.info.code}]: {self.info.message}"]
        if self.info.hint:
            lines.append(f"Hint: {self.info.hint}")
        return lines


class PipelineFailed(AgentError):
    """A pipeline's run stopped before its last step: its message says where and why, its hint
    how to go on (the run's file keeps every finished step)."""

    layer = "run"
    default_code = "pipeline_step_failed"


class _ToolError(AgentError):
    layer = "tool"
    default_code = "tool_error"


# A failing tool is an error result the model reads, never an exception, so nothing raised this.
retired_errors: dict[str, tuple[object, str]] = {
    "ToolError": (_ToolError, "a failing tool becomes an error result; catch AgentError instead"),
}
__getattr__ = retired_names(__name__, retired_errors)
