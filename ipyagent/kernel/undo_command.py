"""``%agent undo [RUN]``: undo a run's changes — the cells, in the page that shows the notebook,
and the variables, in this kernel (:mod:`.variable_checkpoint`).

Which run: ``RUN`` when given; else the page's latest run with changes left to the cells (a later
run that changed only variables is named in the report), and where no page can undo cells
(headless, a classic front end, a page of another release) or the page has none left, the latest
run whose variables are left to undo. Where the cells cannot be undone the
variables still are, and the report says why the cells were not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .live_document import UndoRunAnswer
    from .state import KernelState

__all__ = ["undo_command"]


def undo_command(state: KernelState, run: str | None) -> str:
    """Undo ``run`` (None: the latest) and say what was done; raises a
    :class:`~ipyagent.agentlib.errors.UserError` when nothing could be undone at all."""
    from ..agentlib.errors import UserError
    from .live_document import LiveNotebookError
    from .live_notebook import Mismatched, NoPage
    from .undo_report import undo_run_report, variables_report

    live = state.live
    live.settle()
    page = live.state()
    answer: UndoRunAnswer | None = None
    why_not = ""  # why the cells were not undone
    hint = "See %agent help."
    if isinstance(page, NoPage):
        why_not = (
            "%agent undo puts back cells in the notebook open in JupyterLab or Notebook 7, and no page "
            "shows this kernel's notebook"
        )
        hint = (
            "Open the notebook in JupyterLab (or Notebook 7) with ipyagent's extension; edits to the "
            "saved file are undone with your editor or version control."
        )
    elif isinstance(page, Mismatched):
        why_not, hint = page.message, "Then run %agent undo again."
    else:
        try:
            answer = live.undo_run(run)
        except LiveNotebookError as exc:
            why_not, hint = str(exc).rstrip("."), exc.hint or hint
    target = answer.run if answer is not None else run or state.variables.latest()
    variables = state.variables.undo(target) if target else None
    if answer is not None:
        report = undo_run_report(answer, variables)
        later = state.variables.newer(answer.run) if run is None else ()
        if later:  # a run that changed only variables is not among the page's runs
            runs = ", ".join(later)
            report += f"\nA later run changed variables too ({runs}): %agent undo {later[-1]} puts them back."
        return report
    if variables is None or not variables.anything:
        raise UserError(f"Nothing was undone: {why_not}.", hint=hint, code="user_error")
    lines = [f"Undid run {variables.run}'s variables in this kernel."]
    lines += variables_report(variables)
    lines.append(f"The cells were not undone: {why_not}.")
    return "\n".join(lines)
