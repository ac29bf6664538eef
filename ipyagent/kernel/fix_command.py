"""``%agent fix``: explain the last error and propose the fix as an edit of the failing cell.

Which error: the cell named (``%agent fix CELL_ID``, what the page's Fix button sends), else the
last cell that raised in this kernel (:class:`~.history.History`, which records each failure's
cell id, source, error and traceback), else, where a page shows the notebook live, the cell the
page shows failed last (an error output and the highest execution count: a kernel restarted
since still sees it), else the last error IPython showed (``sys.last_value``: a cell that failed
before ``%load_ext ipyagent``). Where a page shows the notebook, the cell's source is read from the open
document (the user may have changed it since it failed) and its error from its output.

The run is a conversation of its own (not saved, no MCP servers, the kernel's hooks and
policies applied), with the kernel's model and a prompt carrying the error
(name, message, traceback) and the cell's id and source, and only the tools a fix needs
(:mod:`.tools.fix`: read tools and an ``edit_cell`` of that cell). Its edit is itself a proposal
(a reviewed change in the page, or a diff shown here), so the run does not ask before making it.
This module finds the failure, writes the prompt and says what came of the run; the magics run it.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..agentlib.result import RunResult
    from .live_document import LiveDocument
    from .state import KernelState
    from .tools.fix import FixProposal

__all__ = ["FailedCell", "explanation", "find_failed_cell", "fix_prompt", "fix_report", "used_variables"]

#: Variables of the user's a fix prompt describes, at most: the first ones the cell names.
MAX_VARIABLES = 4
#: Characters of an output read from the page (a traceback's end is what matters).
_OUTPUT_CHARS = 4_000
#: Why nothing could be fixed, and what to do.
NOTHING_TO_FIX = (
    "Nothing to fix: no cell has raised an error in this kernel since `%load_ext ipyagent`",
    "Run the failing cell, then %agent fix; or %agent fix CELL_ID for a cell that shows an error.",
)


@dataclass(frozen=True)
class FailedCell:
    """The cell a fix is for, and its error."""

    #: The cell's id; None where the request that ran it named no cell (nbclient, a console).
    cell_id: str | None
    #: Where it is in the open document (when a page shows it).
    index: int | None
    #: Its source now (the open document's, or what ran).
    source: str
    ename: str
    evalue: str
    traceback: str
    #: Read from the open document: the fix can be an edit there.
    live: bool

    @property
    def name(self) -> str:
        """How the user and the model are told which cell."""
        where = f"cell [{self.index}] " if self.index is not None else "cell "
        return f"{where}{self.cell_id}" if self.cell_id else "the cell that failed"

    @property
    def edit_id(self) -> str:
        """The id the fix's ``edit_cell`` is told to use (a cell without one gets a stand-in)."""
        return self.cell_id or "failed-cell"


def _no_error(message: str, hint: str) -> Exception:
    from ..agentlib.errors import UserError

    return UserError(message, hint=hint, code="nothing_to_fix")


def find_failed_cell(state: KernelState, cell_id: str | None) -> FailedCell:
    """The cell to fix: ``cell_id``, else the one that failed last. Raises a ``UserError`` saying
    what to do when there is none, or the cell shows no error."""
    from .live_notebook import Connected

    live = state.live
    live.settle()
    if isinstance(live.state(), Connected):
        from .live_document import LiveNotebookError

        try:
            doc = live.read(max_output_chars=_OUTPUT_CHARS)
        except LiveNotebookError:
            doc = None  # the page did not answer: the kernel's own record will do
        if doc is not None:
            return _from_document(state, doc, cell_id)
    return _from_history(state, cell_id)


def _from_document(state: KernelState, doc: LiveDocument, cell_id: str | None) -> FailedCell:
    from .history import runs_an_agent

    history = state.history
    last = history.last_failure
    wanted = cell_id or (last.cell_id if last is not None else None) or doc.last_failed_cell_id
    if wanted is None:
        raise _no_error(
            f"{NOTHING_TO_FIX[0]}, and no cell of the open notebook shows one.", NOTHING_TO_FIX[1]
        )
    cell = doc.cell(wanted)
    if cell is None:
        what = (
            f"No cell {wanted} in the open notebook"
            if cell_id
            else f"The cell that failed last ({wanted}) is no longer in the notebook"
        )
        raise _no_error(f"{what}; nothing to fix.", "Run the failing cell again, then %agent fix.")
    if runs_an_agent(cell.source):
        raise _no_error(
            f"Cell [{doc.index(wanted)}] {wanted} runs an agent: %agent fix fixes the code of a cell "
            "that failed, not an agent's run.",
            "Read the run's error and hint in that cell; %agent fix CELL_ID fixes another cell.",
        )
    error = cell.error
    if error is None:
        raise _no_error(
            f"Cell [{doc.index(wanted)}] {wanted} shows no error (it ran without one since, or its "
            "outputs were cleared); nothing to fix.",
            "Run it again to see its error, then %agent fix.",
        )
    recorded = history.failures.get(wanted)
    # The kernel's own traceback is whole and has no colour codes; the page's is its tail.
    traceback = (
        recorded.traceback if recorded is not None and recorded.ename == error.ename else error.traceback
    )
    return FailedCell(
        cell_id=wanted,
        index=doc.index(wanted),
        source=cell.source,
        ename=error.ename,
        evalue=error.evalue,
        traceback=traceback,
        live=True,
    )


def _from_history(state: KernelState, cell_id: str | None) -> FailedCell:
    from .history import last_exception

    history = state.history
    failure = history.failures.get(cell_id) if cell_id else history.last_failure or last_exception()
    if failure is None:
        if cell_id:
            raise _no_error(
                f"Cell {cell_id} has not raised an error in this kernel; nothing to fix.", NOTHING_TO_FIX[1]
            )
        raise _no_error(f"{NOTHING_TO_FIX[0]}.", NOTHING_TO_FIX[1])
    return FailedCell(
        cell_id=failure.cell_id,
        index=None,
        source=failure.source,
        ename=failure.ename,
        evalue=failure.evalue,
        traceback=failure.traceback,
        live=False,
    )


def used_variables(source: str, namespace: Mapping[str, Any]) -> list[str]:
    """What ``describe_variable`` tells of each of the user's variables that ``source`` names (the
    first :data:`MAX_VARIABLES`; modules and private names left out): most errors are about the
    data a cell works on, a column or a key that is not there, and a model that is shown it need
    not think of asking."""
    from .tools.python import cap, describe

    names = [n for n in dict.fromkeys(re.findall(r"[A-Za-z_]\w*", source)) if n in namespace]
    names = [n for n in names if not n.startswith("_") and not isinstance(namespace[n], types.ModuleType)]
    return [cap(describe(namespace[name], name), 2_000) for name in names[:MAX_VARIABLES]]


def fix_prompt(failed: FailedCell, variables: Sequence[str] = ()) -> str:
    """What the model is asked: the error, the cell and the ``variables`` it uses (summaries),
    and to explain briefly and fix that cell."""
    shown = "".join(f"{summary}\n\n" for summary in variables)
    return (
        "A notebook cell failed." + (f" Cell id: {failed.cell_id}." if failed.cell_id else "") + "\n\n"
        f"It raised {failed.ename}: {failed.evalue}\n\n"
        f"Traceback:\n{failed.traceback}\n\n"
        f"The cell's source now:\n```python\n{failed.source}\n```\n\n"
        + (f"The variables it uses, as they are now:\n{shown}" if shown else "")
        + "Explain in two or three sentences what went wrong. Then fix it: call fix_cell once, with "
        "the whole corrected source of the cell as new_source. Change only what the fix needs and keep "
        "the rest of the user's code as it is. Read other cells or variables first if the error depends "
        "on them. Do not run code. If the cell is right and the cause is elsewhere, say where and make "
        "no edit."
    )


def explanation(result: RunResult) -> str:
    """What the model said in the run, all of it: a fix's explanation usually comes before its
    edit, not in the run's last message."""
    said = [m.text.strip() for m in result.messages if m.role == "assistant" and m.text.strip()]
    return "\n\n".join(said)


def _diff(before: str, after: str) -> str:
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), "before", "after", lineterm="", n=2)
    return "\n".join(lines)


def fix_report(failed: FailedCell, proposals: list[FixProposal], *, headless: bool) -> tuple[str, str | None]:
    """What ``%agent fix`` prints after its run, and the fixed source to propose below the cell
    (None: nothing to propose there: no edit, the edit is on the cell in the open document, or
    ``headless``: no front end shows the run, nbclient, nbval)."""
    if not proposals:
        return (
            f"The agent proposed no change to {failed.name}: its answer above says why.",
            None,
        )
    last = proposals[-1]
    if last.live:
        where = f"cell [{last.index}] {last.cell_id}" if last.index is not None else f"cell {last.cell_id}"
        return (
            f"The fix is shown on {where} as a diff: Keep runs the cell with the fix, Undo puts its "
            "old source back. The kernel's variables are as the failed run left them.",
            None,
        )
    first = proposals[0]
    diff = _diff(first.old_source, last.new_source)
    if headless:
        return (
            f"Proposed fix for {failed.name}:\n{diff}\n(No front end shows this run: the notebook "
            "file is not changed, and nothing is proposed below. Keeping a fix on its cell and "
            "running it needs JupyterLab or Notebook 7 with ipyagent's extension.)",
            None,
        )
    where = (
        "The fixed cell is proposed below: run it to try the fix. Keeping the fix on the cell "
        "itself and running it needs JupyterLab (or Notebook 7) with ipyagent's extension."
    )
    return f"Proposed fix for {failed.name}:\n{diff}\n{where}", last.new_source
