"""Where this kernel's notebook is, and where its conversations are kept beside it.

``analysis.ipynb`` keeps its default conversation in ``analysis.agent.jsonl`` in the same folder;
``--session NAME`` uses ``analysis.NAME.agent.jsonl``, and ``--session FILE.agent.jsonl`` that
file of the folder (a conversation saved under the notebook's former name, say). Renaming a
notebook leaves its conversations under the old name: :func:`former_sessions` finds them by the
notebook their header names, so the kernel can say how to continue one. The notebook's path comes from Jupyter
Server (``JPY_SESSION_NAME``, also exposed by ipykernel as ``__session__``); a kernel started
another way (nbclient, a console) falls back to the working directory.

A notebook run by a headless runner (``python -m ipyagent run``, pytest's nbval) is executed from
a copy in memory: no front end shows it, and its file is the run's input. The runner says so
with ``$IPYAGENT_HEADLESS`` (:func:`runs_headless`), and the notebook tools then leave that file
alone.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

__all__ = ["HEADLESS_ENV", "find_notebook", "former_sessions", "runs_headless", "session_file"]

HEADLESS_ENV = "IPYAGENT_HEADLESS"

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def find_notebook(shell: Any = None) -> Path | None:
    """The .ipynb this kernel belongs to, when Jupyter Server said so."""
    name = os.environ.get("JPY_SESSION_NAME") or (shell.user_ns.get("__session__") if shell else None)
    if not name or not str(name).endswith(".ipynb"):
        return None
    path = Path(name)
    if path.is_absolute():
        return path
    # Older servers give the path relative to their root; the kernel runs in the notebook's folder.
    for candidate in (Path.cwd() / path, Path.cwd() / path.name):
        if candidate.exists():
            return candidate.resolve()
    return (Path.cwd() / path.name).resolve()


def runs_headless() -> bool:
    """Whether a headless runner executes this kernel's notebook (see the module docstring)."""
    return os.environ.get(HEADLESS_ENV, "").strip().lower() in ("1", "true", "yes")


def session_file(
    notebook: Path | None, name: str | None = None, *, session_dir: str | Path | None = None
) -> Path:
    """The conversation file for ``notebook`` (or the working directory) and session ``name``."""
    if name is not None and not _SAFE_NAME.fullmatch(name):
        from ..agentlib.errors import UserError

        raise UserError(
            f"Session name {name!r} is not allowed.",
            hint="Use letters, digits, '_', '-' or '.', starting with a letter or digit (--session eda).",
            code="invalid_session_name",
        )
    stem = notebook.stem if notebook is not None else "ipyagent"
    folder = Path(session_dir) if session_dir else (notebook.parent if notebook is not None else Path.cwd())
    if name is not None and name.endswith(SUFFIX):  # a file of the folder, by its name
        return folder / name
    middle = f".{name}" if name else ""
    return folder / f"{stem}{middle}{SUFFIX}"


SUFFIX = ".agent.jsonl"
#: Session files looked at for a renamed notebook's conversations (a folder of thousands is
#: not read through at every new conversation).
_MAX_LOOKED_AT = 200


def former_sessions(notebook: Path, folder: Path) -> list[tuple[Path, str]]:
    """Session files in ``folder`` whose header names a notebook that no longer exists (and is
    not ``notebook``): ``(file, that notebook's name)``, oldest first. Only headers are read."""
    found: list[tuple[float, Path, str]] = []
    try:
        files = sorted(folder.glob(f"*{SUFFIX}"))[:_MAX_LOOKED_AT]
    except OSError:
        return []
    for file in files:
        try:
            with open(file, "rb") as f:
                header = json.loads(f.readline(65_536))
            modified = file.stat().st_mtime
        except (OSError, ValueError):
            continue
        named = header.get("notebook") if isinstance(header, dict) else None
        if not isinstance(named, str) or not named.endswith(".ipynb"):
            continue
        former = Path(named) if Path(named).is_absolute() else folder / named
        if former.name != notebook.name and not former.exists():
            found.append((modified, file, former.name))
    return [(file, name) for _, file, name in sorted(found)]
