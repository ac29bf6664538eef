"""Project context: ``AGENTS.md`` and skills found in the agent's workspace.

- ``AGENTS.md`` at the top of the workspace: project conventions, included in the system prompt
  as lower-priority material.
- Skills: folders holding a ``SKILL.md`` under ``.agents/skills/``, ``.claude/skills/`` or
  ``skills/``. A ``SKILL.md`` opens with a frontmatter block::

      ---
      name: plotting
      description: House style for matplotlib figures. Use when making any plot.
      ---
      (the instructions: the skill's body)

  The system prompt lists each skill's name and description; the model reads a body on demand
  with the read-only ``load_skill`` tool (:meth:`ProjectContext.load_skill_tool`).

Files are read safely: nothing outside the workspace (a symlink pointing out is refused), only
regular files, at most ``max_file_bytes`` of each and ``max_total_bytes`` in all, and a cut is
always stated. This module reads; :mod:`~ipyagent.agentlib.system_prompt` writes the prompt.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .control_files import SKILL_FOLDERS
from .tools import Tool, ToolOutput, tool

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_TOTAL_BYTES",
    "SKILL_FOLDERS",
    "ProjectContext",
    "Skill",
    "load_project_context",
    "parse_frontmatter",
    "read_text_safely",
]

MAX_FILE_BYTES = 32_000
MAX_TOTAL_BYTES = 96_000
MAX_SKILLS = 200
MAX_DESCRIPTION = 1_024
MAX_SKILL_DEPTH = 8  # folders of a skill listed this deep


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    #: The skill's ``SKILL.md``.
    path: Path


@dataclass(frozen=True)
class ProjectContext:
    """What the workspace tells the agent. ``notes`` say what was skipped or cut, and why."""

    workspace: Path
    agents_md: str | None = None
    skills: tuple[Skill, ...] = ()
    notes: tuple[str, ...] = ()
    max_file_bytes: int = MAX_FILE_BYTES

    def skill(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)

    def load_skill(self, name: str) -> ToolOutput:
        """A skill's instructions (its ``SKILL.md`` without the frontmatter) and its other files."""
        found = self.skill(name)
        if found is None:
            names = ", ".join(s.name for s in self.skills) or "(none)"
            return ToolOutput(text=f"No skill named {name!r}. Available skills: {names}.", is_error=True)
        read = read_text_safely(found.path, self.workspace, self.max_file_bytes)
        if read is None:
            return ToolOutput(text=f"The skill {name!r} can no longer be read.", is_error=True)
        _, body = parse_frontmatter(read)
        text = f"# Skill: {found.name}\n\n{body.strip()}"
        others = _skill_files(found.path.parent, self.workspace)
        if others:
            text += "\n\nOther files in this skill (read them with a file tool when needed):\n" + "\n".join(
                f"- {p}" for p in others
            )
        return ToolOutput(text=text)

    def load_skill_tool(self) -> Tool | None:
        """The read-only ``load_skill`` tool, or ``None`` when there are no skills."""
        if not self.skills:
            return None
        context = self

        def load_skill(name: str) -> ToolOutput:
            """Load a skill's full instructions. Call it when a task matches a skill listed in
            the system prompt, before starting the task.

            Args:
                name: The skill's name, as listed.
            """
            return context.load_skill(name)

        return tool(read_only=True)(load_skill)


def load_project_context(
    workspace: str | os.PathLike[str],
    *,
    max_file_bytes: int = MAX_FILE_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> ProjectContext:
    """Read ``AGENTS.md`` and the skill catalog of ``workspace``, within the size caps."""
    root = Path(os.path.realpath(workspace))
    notes: list[str] = []
    budget = max_total_bytes
    agents_md = None
    if (root / "AGENTS.md").exists():
        read = read_text_safely(root / "AGENTS.md", root, min(max_file_bytes, budget))
        if read is None:
            notes.append("AGENTS.md was not read: it is not a regular file inside the workspace.")
        else:
            agents_md = read
            budget -= len(read.encode())
    skills: list[Skill] = []
    seen: set[str] = set()
    left_out = 0
    for folder in SKILL_FOLDERS:
        base = root / folder
        if not base.is_dir() or not _inside(base, root):
            continue
        for entry in sorted(base.iterdir(), key=lambda p: p.name):
            skill_md = entry / "SKILL.md"
            if not skill_md.is_file():
                continue
            if len(skills) >= MAX_SKILLS or budget <= 0:
                left_out += 1
                continue
            read = read_text_safely(skill_md, root, max_file_bytes)
            if read is None:
                notes.append(f"{_rel(skill_md, root)} was not read: it points outside the workspace.")
                continue
            meta, _ = parse_frontmatter(read)
            name = meta.get("name") or entry.name
            description = " ".join(meta.get("description", "").split())
            if not description:
                notes.append(f"{_rel(skill_md, root)} has no description in its frontmatter; skipped.")
                continue
            if name in seen:
                notes.append(f"{_rel(skill_md, root)}: a skill named {name!r} came first; skipped.")
                continue
            if len(description) > MAX_DESCRIPTION:
                description = description[: MAX_DESCRIPTION - 1] + "…"
            seen.add(name)
            skills.append(Skill(name=name, description=description, path=skill_md))
            budget -= len(name) + len(description) + 8
    if left_out:
        notes.append(f"{left_out} more skill(s) not listed: the project context is capped.")
    return ProjectContext(
        workspace=root,
        agents_md=agents_md,
        skills=tuple(skills),
        notes=tuple(notes),
        max_file_bytes=max_file_bytes,
    )


def read_text_safely(path: Path, workspace: Path, limit: int) -> str | None:
    """The text of ``path`` (at most ``limit`` bytes, the cut stated), or ``None`` when it is
    not a regular file inside ``workspace`` once symlinks are resolved."""
    real = Path(os.path.realpath(path))
    if not _inside(real, Path(os.path.realpath(workspace))) or not real.is_file():
        return None
    # Checked again on what is opened: a file swapped for a named pipe (or a link) after the
    # check above must not block the open or be followed.
    flags = (
        os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    )
    try:
        with open(os.open(real, flags), "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                return None
            data = f.read(max(0, limit) + 1)
            size = info.st_size
    except OSError:
        return None
    if len(data) <= limit:
        return data.decode("utf-8", errors="replace")
    text = data[:limit].decode("utf-8", errors="ignore")
    return f"{text}\n\n[truncated: the first {limit:,} of {size:,} bytes of {path.name} are shown]"


def parse_frontmatter(text: str) -> tuple[dict[str, str], str]:
    """Split a ``---``-fenced block of ``key: value`` lines from the body that follows.

    Enough YAML for skill headers: quoted values, indented continuation lines, and ``>``/``|``
    block markers; anything else is read as plain text. Without a fence: ``({}, text)``.
    """
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    meta: dict[str, str] = {}
    key: str | None = None
    for number, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return meta, "\n".join(lines[number + 1 :])
        if key is not None and line[:1] in (" ", "\t") and line.strip():
            meta[key] = f"{meta[key]} {line.strip()}".strip()
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip() or name[:1] in (" ", "\t", "#"):
            continue
        key = name.strip()
        value = value.strip()
        if value in (">", "|", ">-", "|-"):
            value = ""
        elif len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        meta[key] = value
    return {}, text  # no closing fence: not frontmatter after all


def _inside(path: Path, root: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real == root or root in real.parents


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _skill_files(folder: Path, workspace: Path, limit: int = 50) -> Sequence[str]:
    root = Path(os.path.realpath(workspace))
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        # os.walk recurses (before Python 3.12): a very deep folder would raise RecursionError.
        deep = len(Path(dirpath).relative_to(folder).parts) >= MAX_SKILL_DEPTH
        dirnames[:] = [] if deep else sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name == "SKILL.md" and path.parent == folder:
                continue
            if _inside(path, root):
                found.append(_rel(path, root) if path.is_relative_to(root) else str(path))
            if len(found) >= limit:
                return [*found, "…"]
    return found
