"""What IPython does not keep about the cells run in a kernel: which ones failed, and how."""

from __future__ import annotations

import linecache
import os
import sys
import traceback
from dataclasses import dataclass
from typing import Any

__all__ = ["Failure", "History", "last_exception", "runs_an_agent"]

#: Characters of a traceback kept (its end: the frames nearest the error).
TRACEBACK_CHARS = 4_000
# Frames of IPython's own machinery (run_code's exec) say nothing about the user's error.
_IPYTHON_CORE = f"{os.sep}IPython{os.sep}core{os.sep}"


@dataclass(frozen=True)
class Failure:
    """A cell that raised: what ``%agent fix`` works from."""

    execution_count: int
    #: The notebook cell's id, when the request named one (JupyterLab, Notebook 7, VS Code).
    cell_id: str | None
    #: The source that ran.
    source: str
    ename: str
    evalue: str
    #: The traceback as text, without colour codes (its end, when long).
    traceback: str


class History:
    """Registered as a ``post_run_cell`` hook by the extension."""

    def __init__(self) -> None:
        self.errors: dict[int, str] = {}
        #: The last cell that raised, agent cells left out (``%agent fix`` must not fix itself).
        self.last_failure: Failure | None = None
        #: The last failure of each cell, by cell id.
        self.failures: dict[str, Failure] = {}

    def post_run_cell(self, result: Any) -> None:
        error = result.error_in_exec or result.error_before_exec
        count = result.execution_count
        if error is not None and count is not None:
            self.errors[count] = f"{type(error).__name__}: {error}"
        info = getattr(result, "info", None)
        source = str(getattr(info, "raw_cell", "") or "")
        if error is None or count is None or runs_an_agent(source):
            return
        cell_id = getattr(info, "cell_id", None)
        failure = Failure(
            execution_count=count,
            cell_id=cell_id if isinstance(cell_id, str) and cell_id else None,
            source=source,
            ename=type(error).__name__,
            evalue=str(error),
            traceback=_traceback_text(error),
        )
        self.last_failure = failure
        if failure.cell_id is not None:
            self.failures[failure.cell_id] = failure


def last_exception() -> Failure | None:
    """The last error IPython showed (``sys.last_value``), as a failure, when it came from a
    cell's code: a cell that failed before ``%load_ext ipyagent``, which the hook did not see. Its
    source is the cell's, as IPython keeps it for tracebacks; its cell id is not known."""
    error = getattr(sys, "last_value", None)
    if not isinstance(error, BaseException) or type(error).__module__.startswith("ipyagent."):
        return None  # none, or ipyagent's own (a failed %agent fix): not the user's code failing
    frames = [f for f in traceback.extract_tb(error.__traceback__) if _IPYTHON_CORE not in f.filename]
    if not frames:
        return None
    source = "".join(linecache.getlines(frames[0].filename))
    if not source or runs_an_agent(source):
        return None
    return Failure(
        execution_count=0,
        cell_id=None,
        source=source.rstrip("\n"),
        ename=type(error).__name__,
        evalue=str(error),
        traceback=_traceback_text(error),
    )


def runs_an_agent(source: str) -> bool:
    """Whether a cell's source runs an agent (``%%agent``, ``%agent``)."""
    return any(line.lstrip().startswith(("%%agent", "%agent")) for line in source.splitlines())


def _traceback_text(error: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if _IPYTHON_CORE not in f.filename]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
    lines += traceback.format_exception_only(type(error), error)
    text = "".join(lines).rstrip()
    return text if len(text) <= TRACEBACK_CHARS else "…" + text[-TRACEBACK_CHARS:]
