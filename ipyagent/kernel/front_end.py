"""Whether a front end can be showing the running cell, told from the request that runs it.

The only direct sign of a live front end is the view's JavaScript saying hello when it renders,
which can take a moment; waiting for it costs every headless cell that moment. Some requests say
at once that nobody will render anything while the cell runs:

- ``$IPYAGENT_HEADLESS``, set by our own runners (``python -m ipyagent run``, pytest's nbval);
- an ``execute_request`` that allows no input and names no cell: nbclient (so nbconvert
  ``--execute`` and papermill) and nbval send exactly that. Notebook front ends (JupyterLab,
  Notebook 7, VS Code) allow input and put the cell's id in the request's metadata; consoles
  allow input too.

Voilà runs notebooks through nbclient yet shows their widgets in a page, so a kernel it started
(``$SERVER_SOFTWARE`` = ``voila/…``) is never taken as headless. Anything else is undecided, and
the caller waits for the hello as before.

The same request says which cell runs (:func:`running_cell_id`): JupyterLab and Notebook 7 put
the cell's id in its metadata, the id the live document's cells have.
"""

from __future__ import annotations

import os
from typing import Any

from .notebook_path import runs_headless

__all__ = ["no_front_end", "running_cell_id"]


def no_front_end(shell: Any) -> str | None:
    """Why no front end shows the cell ``shell`` is running, or None when one may."""
    if runs_headless():
        return "$IPYAGENT_HEADLESS is set"
    if os.environ.get("SERVER_SOFTWARE", "").lower().startswith("voila"):
        return None
    parent = _execute_request(shell)
    if parent is None:
        return None
    content = parent.get("content") or {}
    metadata = parent.get("metadata") or {}
    if content.get("allow_stdin") is False and not metadata.get("cellId"):
        return "the request allows no input and names no cell (nbclient, nbconvert, papermill, nbval)"
    return None


def running_cell_id(shell: Any) -> str | None:
    """The id of the notebook cell ``shell`` is running, when its request names one (JupyterLab,
    Notebook 7 and VS Code do; a console or nbclient does not). Call on the main thread."""
    parent = _execute_request(shell)
    cell_id = ((parent or {}).get("metadata") or {}).get("cellId")
    return cell_id if isinstance(cell_id, str) and cell_id else None


def _execute_request(shell: Any) -> dict[str, Any] | None:
    """The execute_request the main shell is running, or None."""
    get_parent = getattr(getattr(shell, "kernel", None), "get_parent", None)
    if get_parent is None:
        return None
    try:
        parent = get_parent("shell")  # ipykernel 6 and 7: the request the main shell is running
    except Exception:  # an unfamiliar kernel: stay undecided
        return None
    if not isinstance(parent, dict) or (parent.get("header") or {}).get("msg_type") != "execute_request":
        return None
    return parent
