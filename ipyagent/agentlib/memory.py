"""The ``memory`` plugin: durable notes the agent files and recalls with tools, kept per project
folder, offered to each run as an index and read on demand.

    from ipyagent import Agent, Memory

    memory = Memory()                      # ./.ipyagent/memory/
    agent = Agent(model=..., plugins=[memory])
    memory.notes()                         # what it keeps; memory.forget("title") deletes one

The model gets three tools: ``remember(title, text)`` files a note (a note of the same title is
replaced), ``recall(title)`` reads one, ``forget(title)`` deletes one. ``remember`` and ``forget``
change something, so they ask before they run unless the run may change things without asking;
``recall`` is read-only. Each run's system prompt carries the index: every title with the first
line of its note, within ``index_chars``. Notes pass through the redaction of secrets before they
are written, so a key the model read is never stored. Each note is a Markdown file
(``<slug>.md``: the title on its first line, then the text) that a person can read and delete.

This module owns the notes' folder and format and the three tools.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from .atomic import atomic_write
from .errors import UserError
from .plugins import Plugin, PluginRun
from .redact import redact_text
from .tools import Tool, tool

__all__ = ["MAX_NOTE_CHARS", "Memory", "Note"]

#: What one note may hold; the model is told when it wrote more.
MAX_NOTE_CHARS = 8_000
MAX_TITLE_CHARS = 80


@dataclass(frozen=True)
class Note:
    """One note: its ``title``, its ``text`` and the file it is kept in."""

    title: str
    text: str
    path: Path

    @property
    def line(self) -> str:
        """The note's first line, as the index shows it."""
        first = next((ln.strip() for ln in self.text.splitlines() if ln.strip()), "")
        return first if len(first) <= 100 else first[:99] + "…"


class Memory(Plugin):
    """Notes the agent files and recalls with the tools ``remember``, ``recall`` and ``forget``.

    Args:
        project: The project folder; notes go to its ``.ipyagent/memory/`` (default: the current
            directory when the plugin is made).
        folder: The notes' folder itself, instead.
        index_chars: How much of the system prompt the index of notes may take.
    """

    name = "memory"

    def __init__(
        self,
        project: str | os.PathLike[str] | None = None,
        *,
        folder: str | os.PathLike[str] | None = None,
        index_chars: int = 2_000,
    ) -> None:
        root = Path(os.path.abspath(project if project is not None else os.getcwd()))
        self.folder = Path(folder) if folder is not None else root / ".ipyagent" / "memory"
        self.index_chars = index_chars

    # -- what the user (and the tools) read and change ------------------------------------------

    def notes(self) -> list[Note]:
        """Every note kept, by title."""
        if not self.folder.is_dir():
            return []
        found = [_read(path) for path in sorted(self.folder.glob("*.md"))]
        return sorted((n for n in found if n is not None), key=lambda n: n.title.lower())

    def find(self, title: str) -> Note | None:
        """The note called ``title`` (case and spacing aside), or None."""
        wanted = _key(title)
        return next((n for n in self.notes() if _key(n.title) == wanted), None)

    def remember(self, title: str, text: str) -> Note:
        """File a note (a note of the same title is replaced); secrets in it are masked."""
        title, text = redact_text(" ".join(title.split())), redact_text(text.strip())
        if not title or not text:
            raise UserError(
                "A note needs a title and a text.", hint="remember('title', 'text')", code="invalid_note"
            )
        if len(title) > MAX_TITLE_CHARS or len(text) > MAX_NOTE_CHARS:
            raise UserError(
                f"A note's title may have {MAX_TITLE_CHARS} characters and its text {MAX_NOTE_CHARS:,}.",
                hint="Shorten it, or split it into notes of their own.",
                code="invalid_note",
            )
        existing = self.find(title)
        path = existing.path if existing is not None else self._free_path(title)
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write(path, f"# {title}\n\n{text}\n")
        return Note(title, text, path)

    def forget(self, title: str) -> bool:
        """Delete the note called ``title``; False when there is none."""
        note = self.find(title)
        if note is None:
            return False
        note.path.unlink(missing_ok=True)
        return True

    def index(self) -> str:
        """The titles and first lines, as each run's system prompt shows them."""
        lines: list[str] = []
        used = 0
        notes = self.notes()
        for count, note in enumerate(notes):
            line = f"- {note.title}: {note.line}"
            if used + len(line) > self.index_chars:
                lines.append(f"- … and {len(notes) - count} more (recall them by title)")
                break
            lines.append(line)
            used += len(line) + 1
        return "\n".join(lines)

    # -- the plugin -----------------------------------------------------------------------------

    def context(self, run: PluginRun) -> str:
        index = self.index() or "(no notes yet)"
        return (
            "You have a memory for this project that lasts across conversations. File what is worth "
            "knowing next time (the user's preferences, facts about the data, decisions) with "
            "`remember(title, text)`, read a note with `recall(title)`, and delete one that is wrong "
            "with `forget(title)`. Never file secrets. Your notes:\n" + index
        )

    def tools(self) -> list[Tool]:
        memory = self

        @tool(name="remember")
        def remember(title: str, text: str) -> str:
            """File a note in your memory of this project, kept across conversations; a note of
            the same title is replaced. Keep it short and factual; never include secrets."""
            try:
                note = memory.remember(title, text)
            except UserError as exc:
                return f"Not filed: {exc.info.message} {exc.info.hint}"
            return f"Filed the note {note.title!r}."

        @tool(name="recall", read_only=True)
        def recall(title: str) -> str:
            """Read a note of your memory of this project by its title (the index lists them)."""
            note = memory.find(title)
            if note is None:
                titles = ", ".join(repr(n.title) for n in memory.notes()) or "none"
                return f"There is no note {title!r}. The notes are: {titles}."
            return f"# {note.title}\n\n{note.text}"

        @tool(name="forget")
        def forget(title: str) -> str:
            """Delete a note of your memory of this project (one that is wrong or out of date)."""
            return f"Deleted the note {title!r}." if memory.forget(title) else f"There is no note {title!r}."

        return [remember, recall, forget]

    def _free_path(self, title: str) -> Path:
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60] or "note"
        path, n = self.folder / f"{slug}.md", 2
        while path.exists():
            path, n = self.folder / f"{slug}-{n}.md", n + 1
        return path

    def __repr__(self) -> str:
        return f"Memory(folder={str(self.folder)!r}, notes={len(self.notes())})"


def _key(title: str) -> str:
    return " ".join(title.split()).casefold()


def _read(path: Path) -> Note | None:
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    head, _, body = raw.partition("\n")
    title = head.removeprefix("#").strip() or path.stem
    return Note(title, body.strip(), path)
