"""The live document: the open notebook as the user sees it, read from the page.

:class:`LiveDocument` is what the page answers to ``read_notebook`` (``labext/src/snapshot.js``
builds it from the notebook model, so unsaved edits are in it), validated here at the boundary.
Loaded on the first read, not at ``%load_ext`` (it needs pydantic). The channel that fetches it
is :mod:`.live_notebook`.

Errors of the channel::

    AgentError
    └── LiveNotebookError         the live document could not be read
        ├── LiveNotebookMismatch  page and kernel speak different protocols: reload / restart
        ├── PageTimeout           the page did not answer in time
        └── PageError             the page answered with an error, or with something malformed
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..agentlib.errors import AgentError

__all__ = [
    "ErrorOutput",
    "LiveCell",
    "LiveDocument",
    "LiveNotebookError",
    "LiveNotebookMismatch",
    "LiveOutput",
    "PageError",
    "PageTimeout",
    "ResultOutput",
    "StreamOutput",
    "UnknownOutput",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class StreamOutput(_Frozen):
    type: Literal["stream"]
    name: Literal["stdout", "stderr"]
    #: The tail of the stream; ``omitted`` characters before it were left out.
    text: str
    omitted: int = 0


class ResultOutput(_Frozen):
    """An execute result or a display: its text/plain, and which MIME types it showed."""

    type: Literal["result", "display"]
    text: str
    omitted: int = 0
    mime_types: tuple[str, ...] = ()

    @property
    def shows_image(self) -> bool:
        return any(m.startswith("image/") for m in self.mime_types)


class ErrorOutput(_Frozen):
    type: Literal["error"]
    ename: str
    evalue: str
    #: The tail of the traceback, without colour codes.
    traceback: str
    omitted: int = 0


class UnknownOutput(_Frozen):
    type: Literal["unknown"]
    output_type: str


LiveOutput = Annotated[StreamOutput | ResultOutput | ErrorOutput | UnknownOutput, Field(discriminator="type")]


class LiveCell(_Frozen):
    id: str
    cell_type: Literal["code", "markdown", "raw"]
    source: str
    execution_count: int | None = None
    #: The cell is executing now (queued cells are not).
    running: bool = False
    outputs: tuple[LiveOutput, ...] = ()

    @property
    def error(self) -> ErrorOutput | None:
        return next((o for o in self.outputs if isinstance(o, ErrorOutput)), None)


class LiveDocument(_Frozen):
    """The open notebook, unsaved edits included, as one page showed it when asked."""

    #: The notebook's path, relative to the server's root.
    path: str
    #: The document has changes not yet saved to the file.
    dirty: bool
    cells: tuple[LiveCell, ...]
    active_cell_id: str | None = None
    selected_cell_ids: tuple[str, ...] = ()
    #: The page that answered, e.g. "JupyterLab 4.6.6" (from its hello).
    client: str = ""

    def cell(self, cell_id: str) -> LiveCell | None:
        return next((c for c in self.cells if c.id == cell_id), None)

    @property
    def active_cell(self) -> LiveCell | None:
        """The cell the user is on."""
        return None if self.active_cell_id is None else self.cell(self.active_cell_id)

    @property
    def selected_cells(self) -> tuple[LiveCell, ...]:
        chosen = set(self.selected_cell_ids)
        return tuple(c for c in self.cells if c.id in chosen)

    @property
    def running_cells(self) -> tuple[LiveCell, ...]:
        """Cells executing now: during a ``%%agent`` run, the agent's own cell among them."""
        return tuple(c for c in self.cells if c.running)

    @property
    def last_failed_cell(self) -> LiveCell | None:
        """The cell that failed last: the one with an error and the highest execution count."""
        failed = [c for c in self.cells if c.error is not None and c.execution_count is not None]
        return max(failed, key=lambda c: c.execution_count or 0, default=None)


class LiveNotebookError(AgentError):
    """The live document could not be read; the agent falls back to the saved file."""

    layer = "transport"
    default_code = "live_notebook"


class LiveNotebookMismatch(LiveNotebookError):
    """The page's extension and the kernel's ipyagent speak different protocols."""

    default_code = "live_notebook_mismatch"


class PageTimeout(LiveNotebookError):
    default_code = "live_notebook_timeout"
    default_retryable = True


class PageError(LiveNotebookError):
    default_code = "live_notebook_page_error"
