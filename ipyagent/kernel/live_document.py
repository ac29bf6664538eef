"""The live document: the open notebook as the user sees it, read from the page, and the page's
answers to the kernel's edits of it.

:class:`LiveDocument` is what the page answers to ``read_notebook`` (``labext/src/snapshot.js``
builds it from the notebook model, so unsaved edits are in it), validated here at the boundary:
all the cells, or a range of them, with what the agent must know of the whole document (how
many cells, which are active, selected, running, failed last, and where they are). Loaded on
the first read, not at ``%load_ext`` (it needs pydantic). The channel that fetches it is
:mod:`.live_notebook`; the tools show it with :mod:`.tools._live_cells`.

Errors of the channel::

    AgentError
    └── LiveNotebookError         the live document could not be read
        ├── LiveNotebookMismatch  page and kernel speak different protocols: reload / restart
        ├── PageTimeout           the page did not answer in time
        └── PageError             the page answered with an error, or with something malformed
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..agentlib.errors import AgentError

__all__ = [
    "CellProvenance",
    "Conflict",
    "EditAnswer",
    "EditedCell",
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
    "UndoAnswer",
    "UndoRunAnswer",
    "UndoneCell",
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


class CellProvenance(_Frozen):
    """Who changed a cell: ``metadata.ipyagent``, stamped by the kernel's edits."""

    session: str | None = None
    run: str | None = None
    call: str | None = None


class LiveCell(_Frozen):
    id: str
    cell_type: Literal["code", "markdown", "raw"]
    source: str
    execution_count: int | None = None
    #: The cell was sent to the kernel and has not finished: JupyterLab marks every cell of a
    #: Run All at once, so queued cells count too.
    running: bool = False
    outputs: tuple[LiveOutput, ...] = ()
    #: Set when one of ipyagent's edits changed or inserted the cell.
    provenance: CellProvenance | None = None

    @property
    def error(self) -> ErrorOutput | None:
        return next((o for o in self.outputs if isinstance(o, ErrorOutput)), None)


class LiveDocument(_Frozen):
    """The open notebook, unsaved edits included, as one page showed it when asked: every cell,
    or the range read (``cells`` from index ``start``, of ``total``)."""

    #: The notebook's path, relative to the server's root.
    path: str
    #: The document has changes not yet saved to the file.
    dirty: bool
    cells: tuple[LiveCell, ...]
    #: Index of ``cells[0]`` in the document.
    start: int = 0
    #: Cells in the document (more than ``cells`` when a range was read).
    total: int
    active_cell_id: str | None = None
    selected_cell_ids: tuple[str, ...] = ()
    #: The cells sent to the kernel and not finished, in the whole document.
    running_cell_ids: tuple[str, ...] = ()
    #: The cell with an error output and the highest execution count, in the whole document.
    last_failed_cell_id: str | None = None
    #: Where the cells named above are, read or not.
    index_of: dict[str, int] = Field(default_factory=dict)
    #: The page that answered, e.g. "JupyterLab 4.6.6" (from its hello).
    client: str = ""

    @model_validator(mode="before")
    @classmethod
    def _whole_document(cls, data: Any) -> Any:
        """A snapshot without the document-wide fields is the whole document: they are found
        in its cells."""
        if not isinstance(data, dict) or "total" in data:
            return data
        cells = [c for c in data.get("cells") or () if isinstance(c, dict)]
        failed = [
            (c.get("execution_count") or 0, c.get("id"))
            for c in cells
            if c.get("execution_count") is not None
            and any(isinstance(o, dict) and o.get("type") == "error" for o in c.get("outputs") or ())
        ]
        return {
            "total": len(cells),
            "running_cell_ids": [c.get("id") for c in cells if c.get("running")],
            "last_failed_cell_id": max(failed)[1] if failed else None,
            "index_of": {c.get("id"): i for i, c in enumerate(cells)},
            **data,
        }

    def cell(self, cell_id: str) -> LiveCell | None:
        """The cell ``cell_id``, if it is among the cells read."""
        return next((c for c in self.cells if c.id == cell_id), None)

    def index(self, cell_id: str) -> int | None:
        """Where ``cell_id`` is in the document, if it was read or is one of the cells named."""
        for offset, cell in enumerate(self.cells):
            if cell.id == cell_id:
                return self.start + offset
        return self.index_of.get(cell_id)

    @property
    def active_cell(self) -> LiveCell | None:
        """The cell the user is on (if read)."""
        return None if self.active_cell_id is None else self.cell(self.active_cell_id)

    @property
    def selected_cells(self) -> tuple[LiveCell, ...]:
        chosen = set(self.selected_cell_ids)
        return tuple(c for c in self.cells if c.id in chosen)

    @property
    def running_cells(self) -> tuple[LiveCell, ...]:
        """Cells sent to the kernel and not finished (if read): during a ``%%agent`` run, the
        agent's own cell among them."""
        running = set(self.running_cell_ids)
        return tuple(c for c in self.cells if c.id in running)

    @property
    def last_failed_cell(self) -> LiveCell | None:
        """The cell that failed last (if read): the one with an error and the highest
        execution count."""
        return None if self.last_failed_cell_id is None else self.cell(self.last_failed_cell_id)


class EditedCell(_Frozen):
    """A cell an op touched, and where it is after the edit (None: deleted)."""

    cell_id: str
    index: int | None = None


class Conflict(_Frozen):
    """A cell whose source is not what the edit expected: its source now, or "gone"."""

    cell_id: str
    index: int | None = None
    source: str


class EditAnswer(_Frozen):
    """The page's answer to ``edit``: applied (every op), or not at all, with the conflicts."""

    applied: bool
    #: One per op, in order (applied).
    cells: tuple[EditedCell, ...] = ()
    conflicts: tuple[Conflict, ...] = ()


class UndoneCell(_Frozen):
    cell_id: str
    index: int | None = None
    #: Why it was left alone (kept cells).
    why: str = ""
    #: Its source now (a cell changed since the edit).
    source: str | None = None


class UndoAnswer(_Frozen):
    """The page's answer to ``undo_edit``: the cells put back, and those left alone because the
    user changed them since (or they are gone)."""

    undone: tuple[UndoneCell, ...] = ()
    kept: tuple[UndoneCell, ...] = ()


class UndoRunAnswer(UndoAnswer):
    """The page's answer to ``undo_run``: which run, the cells put back (kept ones too), and
    those left alone (changed since, or gone: ``why`` says which)."""

    run: str


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
