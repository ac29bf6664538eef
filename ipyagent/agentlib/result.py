"""What a run returns."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from .errors import AgentError, ErrorInfo
from .events import RunStatus
from .messages import Message
from .usage import Usage

__all__ = ["RunResult"]


class RunResult(BaseModel):
    """The outcome of ``agent.run``.

    ``status`` is ``completed`` (the model answered), ``exhausted`` (``max_turns`` ran out),
    ``failed`` (see ``error``) or ``cancelled``. ``messages`` are the ones this run added.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    run_id: str
    status: RunStatus
    text: str
    messages: list[Message]
    usage: Usage
    error: ErrorInfo | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    def raise_for_status(self) -> RunResult:
        """Raise an :class:`AgentError` unless the run completed; return self otherwise."""
        if self.status == "completed":
            return self
        info = self.error or ErrorInfo(
            code=f"run_{self.status}", layer="run", message=self.message or self.status
        )
        err = AgentError(info.message)
        err.info = info
        raise err

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        detail = f"error={self.error.code!r}" if self.error else f"text={_clip(self.text)!r}"
        return f"RunResult(status={self.status!r}, {detail}, usage={str(self.usage)!r})"


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
