"""Control files: the files of a workspace that tell the agent what to do or which programs to start.

- ``.mcp.json``: the MCP servers the agent starts (programs, with the user's keys in reach);
- ``AGENTS.md``: the project's instructions, put into the system prompt;
- a skill's ``SKILL.md`` (under ``skills/``, ``.agents/skills/`` or ``.claude/skills/``): more
  instructions the agent loads;
- anything under ``.ipyagent/``: the agent's own settings for the folder.

A folder the user downloaded may hold any of these, and the agent's own tools could write one
that the next run trusts. So a write to a control file is a person's decision: the loop asks
about it even under auto-approve, and refuses it when nobody can answer (see
:meth:`~ipyagent.agentlib.run.AgentRun`); the sandbox mounts them read-only for a ``shell``
command (:mod:`~ipyagent.agentlib.sandbox`). This module owns the one answer to "is this path a
control file of this workspace" (:func:`control_kind`) and the names the sandbox guards
(:data:`SANDBOX_GUARDED`); it reads no file's content.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CONTROL_HINT",
    "SANDBOX_GUARDED",
    "SKILL_FOLDERS",
    "Subject",
    "control_changes",
    "control_denied",
    "control_kind",
    "control_refusal",
    "control_warning",
    "describe_subject",
]

#: Where skills live (each a folder holding a ``SKILL.md``); :mod:`.project_context` reads them.
SKILL_FOLDERS = (".agents/skills", ".claude/skills", "skills")
MCP_FILE = ".mcp.json"
AGENTS_FILE = "AGENTS.md"
SKILL_FILE = "SKILL.md"
SETTINGS_FOLDER = ".ipyagent"

_STARTS = "it says which programs the agent will start"
_TOLD = "it changes what the agent will be told"

#: What each workspace-level path is, for the question a person is asked.
_KINDS = {
    MCP_FILE: f"the MCP server list (.mcp.json): {_STARTS}",
    AGENTS_FILE: f"the project's instructions (AGENTS.md): {_TOLD}",
}
_SKILL = f"a skill's instructions (SKILL.md): {_TOLD}"
_SETTINGS = "the agent's settings for this folder (.ipyagent/): it changes the agent's settings"

#: The workspace entries a sandboxed command may not change, and whether each is a folder (what
#: the sandbox puts in place of one that does not exist yet). Each is a top-level entry, guarded
#: whole: a skill folder's top (``.agents``, not ``.agents/skills``), since a folder that only
#: holds a guarded one could be renamed away and made again.
SANDBOX_GUARDED: tuple[tuple[str, bool], ...] = (
    (MCP_FILE, False),
    (AGENTS_FILE, False),
    (SETTINGS_FOLDER, True),
    *dict.fromkeys((folder.split("/")[0], True) for folder in SKILL_FOLDERS),
)


@dataclass(frozen=True)
class Subject:
    """A file a tool call would change (``path``), and the workspace whose control files count."""

    path: Path
    workspace: Path


def control_kind(path: str | os.PathLike[str], workspace: str | os.PathLike[str]) -> str | None:
    """What ``path`` is when it is a control file of ``workspace`` (for the question a person is
    asked: "the MCP server list (.mcp.json): it says which programs the agent will start"), else
    ``None``. Links are followed (a symbolic link to ``AGENTS.md`` is ``AGENTS.md``); names match
    case-insensitively where the workspace's file system does."""
    root = os.path.realpath(workspace)
    real = os.path.realpath(path)
    if real == root or not real.startswith(root.rstrip(os.sep) + os.sep):
        return None
    parts = Path(os.path.relpath(real, root)).parts
    fold = _case_insensitive(root)
    # A folder inside the workspace is a workspace too (a notebook in a subfolder): its control
    # files count, so the rule is tried from each folder on the way down.
    for start in range(len(parts)):
        kind = _kind(parts[start:], fold)
        if kind is not None:
            return kind
    return None


def _kind(parts: Sequence[str], fold: bool) -> str | None:
    """What ``parts`` (relative to a workspace) is, if a control file of it."""

    def same(name: str, want: str) -> bool:
        return name.casefold() == want.casefold() if fold else name == want

    if same(parts[0], SETTINGS_FOLDER):
        return _SETTINGS
    if len(parts) == 1:
        return next((kind for name, kind in _KINDS.items() if same(parts[0], name)), None)
    for folder in SKILL_FOLDERS:
        steps = folder.split("/")
        inside = len(parts) > len(steps) + 1 and all(same(a, b) for a, b in zip(parts, steps, strict=False))
        if inside and same(parts[-1], SKILL_FILE):
            return _SKILL
    return None


def describe_subject(subject: Subject) -> str | None:
    """:func:`control_kind` of a tool call's subject, with its workspace-relative path first:
    "AGENTS.md, the project's instructions (AGENTS.md): it changes what the agent will be told"."""
    kind = control_kind(subject.path, subject.workspace)
    if kind is None:
        return None
    try:
        shown = os.path.relpath(os.path.realpath(subject.path), os.path.realpath(subject.workspace))
    except ValueError:
        shown = str(subject.path)
    return f"{Path(shown).as_posix()}, {kind}"


@functools.lru_cache(maxsize=64)
def _case_insensitive(folder: str) -> bool:
    """Whether names in ``folder``'s file system match regardless of case (macOS and Windows by
    default): the folder is found again under its own name with the case swapped."""
    head, name = os.path.split(folder)
    swapped = name.swapcase()
    if swapped == name:
        return os.path.normcase("A") == os.path.normcase("a")
    try:
        return os.path.samefile(folder, os.path.join(head, swapped))
    except OSError:
        return False


def control_changes(
    subjects: Callable[[dict[str, Any]], Sequence[Subject]] | None, arguments: dict[str, Any]
) -> list[str]:
    """The control files a tool call would change, described (see :func:`describe_subject`),
    from the tool's ``subjects`` and the call's validated ``arguments``. A ``subjects`` that fails
    is taken to name a control file: what cannot be told is asked about."""
    if subjects is None:
        return []
    try:
        found = [describe_subject(subject) for subject in subjects(arguments)]
    except Exception:
        return ["a file the tool could not name (its check failed), which may be a control file"]
    return [kind for kind in found if kind is not None]


def control_warning(tool: str, changes: Sequence[str]) -> str:
    """What a person is told when asked about a call that changes control files."""
    return (
        f"`{tool}` would change a control file: {'; '.join(changes)}. A control file is asked about "
        "even under auto-approve (-y): allow it only if you meant this change."
    )


def control_refusal(tool: str, changes: Sequence[str]) -> str:
    """What the model reads when such a call is refused because nobody can answer."""
    return (
        f"Refused: `{tool}` would change a control file: {'; '.join(changes)}. Changing one needs a "
        "person's approval, even under auto-approve, and nobody can answer in this run. Do not try "
        "another way (a shell command cannot write control files either); tell the user what should "
        "change and why."
    )


def control_denied(tool: str, changes: Sequence[str], reason: str = "") -> str:
    """What the model reads when the person (or a front end on their behalf) said no."""
    why = reason or "the user declined"
    return (
        f"Denied: `{tool}` would change a control file: {'; '.join(changes)}; {why}. Do not try "
        "another way (a shell command cannot write control files either); go on without it, or tell "
        "the user what should change and why."
    )


#: What the user can do about a refused change to a control file.
CONTROL_HINT = (
    "Make the change yourself, or run the agent where someone can answer its questions (a notebook "
    "with the widget) and allow it there; auto-approve (-y) never covers control files."
)
