"""Tools on the live kernel, the notebook document and the workspace's files.

Each module builds its tools for one shell and one workspace; :func:`kernel_tools` assembles the
groups a ``%%agent`` run asks for, and the user's own tools named beside them
(``--tools python,lookup_price``: a ``@tool`` or a plain function from the namespace).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...agentlib.tools import Tool
    from ..history import History
    from ..live_notebook import LiveNotebook
    from ..runner import MainThread
    from ..variable_checkpoint import VariableCheckpoints
    from ._cell_runs import CellRunner

GROUPS = ("python", "notebook", "files")
#: Groups offered only when named: ``shell`` runs commands (in the OS sandbox, or not at all);
#: ``delegate`` hands tasks to sub-agents (the agent's ``delegate`` setting, not a tool built here).
OPTIONAL_GROUPS = ("shell", "delegate")

__all__ = ["GROUPS", "OPTIONAL_GROUPS", "kernel_tools"]


def kernel_tools(
    groups: Sequence[str],
    *,
    shell: Any,
    main: MainThread,
    workspace: Path,
    notebook: Path | None,
    history: History | None = None,
    namespace: Mapping[str, Any] | None = None,
    protected: Mapping[Path, str] | None = None,
    live: LiveNotebook | None = None,
    cell_id: str | None = None,
    session: str | None = None,
    cells: CellRunner | None = None,
    code_in_cells: bool = False,
    variables: VariableCheckpoints | None = None,
) -> list[Tool]:
    """The tools of ``groups``. ``protected`` maps files no tool may write (the conversation's
    session file, the cassette, a headless run's notebook) to what they are; ``live`` is the
    channel to the pages showing the notebook, ``cell_id`` the cell the run is in, ``session``
    the name of the conversation's session file (the cells the run changes say so), ``cells``
    what runs the notebook's cells (``run_cell``, offered with the notebook tools);
    ``code_in_cells``: the agent's code runs as new cells of the notebook (``run_new_cell``)
    instead of hidden in the run (``run_python``), so the notebook shows how each result was made;
    ``variables`` the kernel's checkpoints of what the agent's code changes (for an undo of a run)."""
    own = _namespace_tools([g for g in groups if g not in (*GROUPS, *OPTIONAL_GROUPS)], namespace or {})
    tools: list[Tool] = []
    code_in_cells = code_in_cells and cells is not None and "python" in groups
    if "python" in groups:
        from .python import python_tools

        python_group = python_tools(shell, main, history, variables)
        tools += [t for t in python_group if not (code_in_cells and t.name == "run_python")]
    if "notebook" in groups or code_in_cells:
        from ..notebook_path import runs_headless
        from .notebook import notebook_tools

        notebook_group = notebook_tools(
            shell,
            main,
            notebook,
            headless=runs_headless(),
            live=live,
            cell_id=cell_id,
            session=session,
            cells=cells,
            code_in_cells=code_in_cells,
        )
        tools += [t for t in notebook_group if "notebook" in groups or t.name == "run_new_cell"]
    if "files" in groups:
        from .files import file_tools

        tools += file_tools(workspace, protected=protected)
    if "shell" in groups:
        from .shell import shell_tools

        tools += shell_tools(workspace)
    return tools + own


def _namespace_tools(names: Sequence[str], namespace: Mapping[str, Any]) -> list[Tool]:
    from ...agentlib.errors import UserError
    from ...agentlib.tools import Tool, as_tool

    groups = ", ".join((*GROUPS, *OPTIONAL_GROUPS))
    unknown = [name for name in names if not isinstance(namespace.get(name), Tool | Callable)]
    if unknown:
        raise UserError(
            f"Unknown tool group or tool: {', '.join(unknown)}.",
            hint=f"Name tool groups ({groups}) or functions defined in this notebook, "
            "comma-separated, e.g. --tools python,lookup_price. Decorate a function with "
            "@tool(read_only=True) when it changes nothing, so it runs without asking.",
            code="unknown_tool_group",
        )
    return [as_tool(namespace[name]) for name in names]
