"""What a run returns."""

from __future__ import annotations

import warnings
from typing import Any

from pydantic import BaseModel, ConfigDict

from .claims import Claim
from .clip import clip
from .errors import AgentRunFailed, ErrorInfo
from .events import RunStatus
from .messages import Message
from .usage import Usage

__all__ = ["RunResult"]


class RunResult(BaseModel):
    """The outcome of ``agent.run``.

    ``status`` is ``completed`` (the model answered), ``exhausted`` (``max_turns`` ran out),
    ``failed`` (see ``error``) or ``cancelled``. ``messages`` are the ones this run added.
    ``output`` is the typed answer of a run given an ``output_type`` (validated into that type;
    ``None`` unless the run completed); without one it is the text.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    run_id: str
    status: RunStatus
    text: str
    messages: list[Message]
    usage: Usage
    error: ErrorInfo | None = None
    #: Why the run ended as it did, in words ("Cancelled by the user.", the guard that stopped
    #: it, the error); empty when it completed.
    reason: str = ""
    output: Any = None
    #: The numbers and named values of a completed run's answer, each with the tool output it
    #: was found in, or none (see :mod:`~ipyagent.agentlib.claims`).
    claims: tuple[Claim, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    @property
    def message(self) -> str:
        """Deprecated: :attr:`reason` (``message`` read too much like ``messages``)."""
        warnings.warn(
            "RunResult.message is now RunResult.reason; the old name goes away in the next release.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.reason

    def raise_for_status(self) -> RunResult:
        """Raise :class:`AgentRunFailed` unless the run completed; return self otherwise."""
        if self.status == "completed":
            return self
        info = self.error or ErrorInfo(
            code=f"run_{self.status}", layer="run", message=self.reason or self.status
        )
        raise AgentRunFailed.from_info(info)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        if self.error:
            detail = f"error={self.error.code!r}"
        elif self.output is not None and not isinstance(self.output, str):
            detail = f"output={clip(repr(self.output), 60)}"
        else:
            detail = f"text={clip(self.text, 60)!r}"
        return f"RunResult(status={self.status!r}, {detail}, usage={str(self.usage)!r})"
