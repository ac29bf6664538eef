"""The tools of a ``%agent fix`` run: read the notebook and the kernel, and propose one edit, to
the cell that failed.

A fix needs to read (the notebook's cells, the user's variables, the cells run before) and to
change one cell; it never runs code on its own. So its tools are ``read_cells``,
``list_variables``, ``describe_variable``, ``read_history`` and ``fix_cell(new_source)``, which
replaces the failing cell's source. The fix knows the cell and the source it read: the model
names neither (an edit that had to quote the old source back exactly, and the cell's id, failed
most often with small models), and a fixed source wrapped in a Markdown code fence is taken
without the fence.

What ``fix_cell`` does depends on where the notebook is shown, as for the notebook tools:

- a compatible page shows it live: the edit goes to the open document (:mod:`._live_edits`),
  guarded by the source the fix read (a cell the user changed since is refused), stamped like
  any edit, and marked ``fix`` in its provenance: the
  page shows the diff on the cell with Keep / Undo, and its Keep runs the cell;
- elsewhere (nbclient, VS Code, a page without the extension): nothing is changed; the
  proposal is recorded (:class:`FixProposal`) and ``%agent fix`` shows it as a diff and proposes
  the fixed source as a new cell below (``set_next_input``). The saved file is not written: a
  page with it open would then report it changed on disk, and a headless run's file is its input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...agentlib.tools import RunContext, Tool, tool
from ..live_protocol import Provenance, ReplaceOp
from ._live_edits import LIVE, apply_live, edit_mode
from .files import WorkspaceError

if TYPE_CHECKING:
    from ..history import History
    from ..live_notebook import LiveNotebook
    from ..runner import MainThread

__all__ = ["FixProposal", "fix_tools"]

#: The tools a fix reads with, of the python and notebook groups.
READ_TOOLS = ("read_cells", "list_variables", "describe_variable", "read_history")
#: A whole source in one Markdown code fence (```python ... ```), as models often write code.
_FENCED = re.compile(r"\A\s*```[\w+-]*[ \t]*\n(.*?)\n?```\s*\Z", re.DOTALL)


def unfenced(source: str) -> str:
    """``source`` without a Markdown code fence around all of it."""
    match = _FENCED.match(source)
    return match.group(1) if match else source


@dataclass(frozen=True)
class FixProposal:
    """The edit a fix proposed: the failing cell's source before and after."""

    cell_id: str
    old_source: str
    new_source: str
    #: It went to the open document (reviewed there); else it is only proposed.
    live: bool
    #: Where the cell is in the open document (live proposals).
    index: int | None = None


def fix_tools(
    shell: Any,
    main: MainThread,
    notebook: Path | None,
    *,
    cell_id: str,
    name: str,
    source: str,
    live: LiveNotebook | None,
    history: History | None,
    own_cell_id: str | None,
    session: str | None,
    proposals: list[FixProposal],
) -> list[Tool]:
    """The tools of a fix of cell ``cell_id`` (told the model as ``name``), whose source is
    ``source`` now. ``live``: the
    channel to the page (None, or no page connected: proposals only); ``own_cell_id``: the cell
    ``%agent fix`` runs in; each edit the model makes is appended to ``proposals``."""
    from ..notebook_path import runs_headless
    from .notebook import OUTSIDE_A_RUN, notebook_tools
    from .python import python_tools

    headless = runs_headless()
    readers = [
        t
        for t in (
            *python_tools(shell, main, history),
            *notebook_tools(shell, main, notebook, headless=headless, live=live, cell_id=own_cell_id),
        )
        if t.name in READ_TOOLS
    ]
    current = {"source": source}

    def fix_cell(new_source: str, run: RunContext = OUTSIDE_A_RUN) -> str:
        """Replace the whole source of the cell that failed with its fixed source.

        Args:
            new_source: The cell's complete fixed source (code only).

        Notes:
            Where a page shows the notebook live, the edit lands in the open document as a
            reviewed change marked as a fix (its Keep runs the cell); elsewhere it is only
            recorded, for ``%agent fix`` to show as a diff and propose below.
        """
        fixed, old_source = unfenced(new_source), current["source"]
        if fixed == old_source:
            raise WorkspaceError(
                "That is the cell's source as it is: nothing was proposed. Give the corrected source, "
                "or, if the cause is in another cell, say so in your answer instead."
            )
        is_live = live is not None and not headless and edit_mode(live)[0]
        if is_live:
            assert live is not None
            op = ReplaceOp(op="replace", cell_id=cell_id, expect=old_source, source=fixed)
            provenance = Provenance(session=session, run=run.run_id, call=run.call_id, fix=True)
            [cell] = apply_live(live, [op], provenance).cells
            proposals.append(FixProposal(cell_id, old_source, fixed, live=True, index=cell.index))
            current["source"] = fixed
            return (
                f"Proposed the fix on cell {cell_id} (at index {cell.index}) in {LIVE}: the user sees "
                "the diff on the cell; Keep runs it, Undo puts the old source back."
            )
        proposals.append(FixProposal(cell_id, old_source, fixed, live=False))
        current["source"] = fixed
        return (
            f"Proposed the fix for {name}: it is shown to the user as a diff, with the fixed "
            "cell proposed below (no page shows the notebook live, so the cell itself is not changed)."
        )

    # Sync: the agent runs it in a worker thread, where waiting for the page's answer is fine.
    return [*readers, tool(fix_cell)]
