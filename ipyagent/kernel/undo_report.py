"""What ``%agent undo`` prints: the cells a run's undo put back and those it left alone and why,
then the variables it put back, removed or left alone (nothing about variables for a run that
changed none)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .live_document import UndoneCell, UndoRunAnswer
    from .variable_checkpoint import VariablesUndone

__all__ = ["undo_run_report", "variables_report"]


def _where(cell: UndoneCell) -> str:
    return f"cell {cell.cell_id} (gone)" if cell.index is None else f"cell [{cell.index}] ({cell.cell_id})"


def variables_report(variables: VariablesUndone) -> list[str]:
    """The lines on variables: put back, removed (the run created them), left as they are and
    why, or why none were touched; none when the run changed no variable."""
    lines = []
    if variables.refused:
        lines.append(f"The kernel's variables were not put back: {variables.refused}.")
    done = []
    if variables.restored:
        done.append(f"put back {', '.join(variables.restored)}")
    if variables.removed:
        done.append(f"removed {', '.join(variables.removed)} (the run created them)")
    if done:
        lines.append(f"Variables: {'; '.join(done)}.")
    if variables.kept:
        lines.append("Variables left as they are:")
        lines.extend(f"  {kept.name}: {kept.why}" for kept in variables.kept)
    return lines


def undo_run_report(answer: UndoRunAnswer, variables: VariablesUndone | None = None) -> str:
    """One line for the cells undone, one per cell left alone, then the variables' lines."""
    count = len(answer.undone)
    cells = f"{count} cell{'' if count == 1 else 's'}"
    lines = [f"Undid run {answer.run} in the live notebook: put back {cells}."]
    if answer.kept:
        lines.append("Left as they are:")
        lines.extend(f"  {_where(cell)}: {cell.why}" for cell in answer.kept)
    if variables is not None:
        lines.extend(variables_report(variables))
    return "\n".join(lines)
