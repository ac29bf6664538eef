"""What ``%agent undo`` prints: the cells a run's undo put back, those it left alone and why, and
that the kernel's variables were not rolled back (nothing can do that)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .live_document import UndoneCell, UndoRunAnswer

__all__ = ["undo_run_report"]

#: Said after every undo of a run: the cells go back, the namespace does not.
NAMESPACE_NOTE = (
    "The kernel's variables are not rolled back: re-run the cells (or restart the kernel and run "
    "them) to recompute them."
)


def _where(cell: UndoneCell) -> str:
    return f"cell {cell.cell_id} (gone)" if cell.index is None else f"cell [{cell.index}] ({cell.cell_id})"


def undo_run_report(answer: UndoRunAnswer) -> str:
    """One line for what was undone, one per cell left alone, and the note on variables."""
    count = len(answer.undone)
    cells = f"{count} cell{'' if count == 1 else 's'}"
    lines = [f"Undid run {answer.run} in the live notebook: put back {cells}."]
    if answer.kept:
        lines.append("Left as they are:")
        lines.extend(f"  {_where(cell)}: {cell.why}" for cell in answer.kept)
    lines.append(NAMESPACE_NOTE)
    return "\n".join(lines)
