"""Tools on the live kernel, the notebook document and the workspace's files.

Each module builds its tools for one shell and one workspace; :func:`kernel_tools` assembles the
groups a ``%%agent`` run asks for.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...agentlib.tools import Tool
    from ..history import History
    from ..runner import MainThread

GROUPS = ("python", "notebook", "files")

__all__ = ["GROUPS", "kernel_tools"]


def kernel_tools(
    groups: Sequence[str],
    *,
    shell: Any,
    main: MainThread,
    workspace: Path,
    notebook: Path | None,
    history: History | None = None,
) -> list[Tool]:
    from ...agentlib.errors import UserError

    unknown = sorted(set(groups) - set(GROUPS))
    if unknown:
        raise UserError(
            f"Unknown tool group(s): {', '.join(unknown)}.",
            hint=f"Choose from: {', '.join(GROUPS)} (comma-separated), e.g. --tools python,files.",
            code="unknown_tool_group",
        )
    tools: list[Tool] = []
    if "python" in groups:
        from .python import python_tools

        tools += python_tools(shell, main, history)
    if "notebook" in groups:
        from .notebook import notebook_tools

        tools += notebook_tools(shell, main, notebook)
    if "files" in groups:
        from .files import file_tools

        tools += file_tools(workspace)
    return tools
