"""The notebook tools' edits of the live document: the open notebook the user sees, changed at once.

Where a compatible page shows this kernel's notebook, ``edit_cell``, ``insert_cell``,
``delete_cell`` and ``move_cell`` send it an ``edit`` (:meth:`~..live_notebook.LiveNotebook.edit`)
instead of writing the saved file: cells are named by id, every op on an existing cell carries the
source the agent expects there, and the page applies all of a call's ops or none. This module
decides the mode and says it in the tool's result; :mod:`.notebook` builds the ops.

Which mode applies, said in every result:

- a compatible page is connected: the live notebook ("… in the live notebook …");
- a page speaks another protocol: the saved file, under a first line saying to reload or restart;
- no page (nbclient, nbval, VS Code, Colab): the saved file, as before the live notebook existed.

A page that does not answer in time may still have applied the edit: the result says so and asks
for a re-read instead of retrying blind (a repeat with the same ``edit_id`` would not apply twice,
but the agent's next call is a new edit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .files import WorkspaceError

if TYPE_CHECKING:
    from ..live_document import EditAnswer
    from ..live_notebook import LiveNotebook
    from ..live_protocol import EditOp, Provenance

__all__ = ["LIVE", "apply_live", "edit_mode"]

#: How a result names the live mode.
LIVE = "the live notebook (the open document the user sees, changed at once; not saved yet)"


def edit_mode(live: LiveNotebook | None) -> tuple[bool, str]:
    """``(True, "")`` when a page can take the edit; else ``(False, note)``: the caller edits the
    saved file and opens its result with ``note`` ("" when no page is connected at all)."""
    if live is None:
        return False, ""
    from ..live_notebook import Mismatched, NoPage

    live.settle()
    state = live.state()
    if isinstance(state, NoPage):
        return False, ""
    if isinstance(state, Mismatched):
        return False, f"(saved file, not the live notebook: {state.message})"
    return True, ""


def apply_live(live: LiveNotebook, ops: list[EditOp], provenance: Provenance) -> EditAnswer:
    """Send one edit; its answer when applied. A conflict, a page that did not answer and a page
    error become a :class:`WorkspaceError` the model reads, saying what to do next."""
    from ..live_document import LiveNotebookError, PageTimeout

    try:
        answer = live.edit(ops, provenance=provenance)
    except PageTimeout as exc:
        raise WorkspaceError(
            f"{exc} It is not known whether the edit was applied: call read_cells to see the cells "
            "as they are now before editing again."
        ) from exc
    except LiveNotebookError as exc:
        raise WorkspaceError(
            f"Nothing was changed in the live notebook: {exc} {exc.hint or ''}".rstrip()
        ) from exc
    if not answer.applied:
        raise WorkspaceError(conflict_text(answer))
    return answer


def conflict_text(answer: EditAnswer) -> str:
    """What the model reads when a guard failed: nothing changed, what is there now, re-read."""
    parts = ["Nothing was changed in the live notebook: the user changed it since you read it."]
    for conflict in answer.conflicts:
        if conflict.source == "gone" and conflict.index is None:
            parts.append(f"Cell {conflict.cell_id} is no longer in the notebook.")
        else:
            parts.append(f"Cell {conflict.cell_id} (now [{conflict.index}]) holds:\n{conflict.source}")
    parts.append("Call read_cells again and base the edit on the cells as they are now.")
    return "\n".join(parts)
