"""File tools confined to the workspace: list, read, search, write, edit.

A path is resolved (symlinks followed) and must land inside the workspace: ``..``, absolute
paths elsewhere and symlinks that point out are refused. Reads are capped; writes replace the
file atomically (a temporary file renamed over it), so a failure never leaves half a file.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tempfile
from pathlib import Path

from ...agentlib.tools import Tool, tool

__all__ = ["WorkspaceError", "atomic_write", "file_tools", "resolve_inside"]

MAX_READ_CHARS = 60_000
MAX_LIST = 500
MAX_MATCHES = 200
SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".ipynb_checkpoints"}


class WorkspaceError(Exception):
    """A path the tools may not touch, or an edit that does not apply; written for the model
    (the agent turns it into an error result)."""


def resolve_inside(root: Path, path: str) -> Path:
    root = root.resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise WorkspaceError(f"{path!r} is outside the workspace ({root}); use a path inside it.")
    return target


def _default_mode() -> int:
    umask = os.umask(0)  # reading the umask means setting it; put it straight back
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        # mkstemp makes 0600 files: keep an existing file's mode, give a new one the usual one.
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else _default_mode())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _inside(root: Path, path: Path) -> bool:
    """Whether ``path``, links followed, is in the workspace (a link may point out of it)."""
    try:
        resolve_inside(root, str(path))
    except WorkspaceError:
        return False
    return True


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        raise WorkspaceError(f"{path.name} is a binary file; it cannot be read as text.")
    return data.decode("utf-8", errors="replace")


def file_tools(workspace: Path) -> list[Tool]:
    root = workspace

    def rel(path: Path) -> str:
        return path.relative_to(root.resolve()).as_posix() or "."

    def list_files(path: str = ".", pattern: str = "*", recursive: bool = False) -> str:
        """List files and folders in the workspace.

        Args:
            path: Folder to list, relative to the workspace.
            pattern: Glob on the file name, e.g. "*.csv".
            recursive: Also list subfolders (version-control and virtualenv folders are skipped).
        """
        folder = resolve_inside(root, path)
        if not folder.is_dir():
            raise WorkspaceError(f"{path!r} is not a folder.")
        entries: list[str] = []
        walker = os.walk(folder) if recursive else [(str(folder), *_split(folder))]
        for current, dirs, files in walker:
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            base = Path(current)
            for name in dirs if not recursive else []:
                entries.append(f"{rel(base / name)}/")
            for name in sorted(files):
                if fnmatch.fnmatch(name, pattern):
                    inside = _inside(root, base / name)
                    size = (base / name).stat().st_size if inside and (base / name).exists() else 0
                    note = f"({size:,} bytes)" if inside else "(link to outside the workspace)"
                    entries.append(f"{rel(base / name)}  {note}")
            if len(entries) > MAX_LIST:
                break
        if not entries:
            return "(nothing matches)"
        more = f"\n… (listing stopped at {MAX_LIST} entries)" if len(entries) > MAX_LIST else ""
        return "\n".join(entries[:MAX_LIST]) + more

    def read_file(path: str, start_line: int = 1, end_line: int | None = None) -> str:
        """Read a text file, with line numbers.

        Args:
            path: File path, relative to the workspace.
            start_line: First line to show (1-based).
            end_line: Last line to show (default: as much as fits).
        """
        target = resolve_inside(root, path)
        lines = _read_text(target).splitlines()
        first = max(1, start_line)
        last = len(lines) if end_line is None else min(end_line, len(lines))
        out, size = [], 0
        for number in range(first, last + 1):
            line = f"{number:>6}  {lines[number - 1]}"
            size += len(line) + 1
            if size > MAX_READ_CHARS:
                out.append(f"… (stopped at line {number - 1} of {len(lines)}; ask for start_line={number})")
                break
            out.append(line)
        return "\n".join(out) if out else f"(no lines {first}-{last}; the file has {len(lines)} lines)"

    def search_files(pattern: str, path: str = ".", glob: str = "*") -> str:
        """Search file contents with a regular expression.

        Args:
            pattern: Python regular expression.
            path: Folder to search in, relative to the workspace.
            glob: Only files whose name matches, e.g. "*.py".
        """
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise WorkspaceError(f"invalid regular expression {pattern!r}: {exc}") from exc
        folder = resolve_inside(root, path)
        matches: list[str] = []
        for current, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for name in sorted(files):
                file = Path(current) / name
                if (
                    not fnmatch.fnmatch(name, glob)
                    or not _inside(root, file)
                    or file.stat().st_size > 5_000_000
                ):
                    continue
                try:
                    text = _read_text(file)
                except (WorkspaceError, OSError):
                    continue
                for number, line in enumerate(text.splitlines(), 1):
                    if regex.search(line):
                        matches.append(f"{rel(file)}:{number}: {line.strip()[:200]}")
                        if len(matches) >= MAX_MATCHES:
                            return "\n".join(matches) + f"\n… (stopped at {MAX_MATCHES} matches)"
        return "\n".join(matches) or "(no matches)"

    def write_file(path: str, content: str) -> str:
        """Create or overwrite a text file in the workspace.

        Args:
            path: File path, relative to the workspace.
            content: The whole new content.
        """
        target = resolve_inside(root, path)
        existed = target.exists()
        atomic_write(target, content)
        return f"{'Overwrote' if existed else 'Created'} {rel(target)} ({len(content):,} characters)."

    def edit_file(path: str, old: str, new: str, expected_count: int = 1) -> str:
        """Replace exact text in a file.

        Args:
            path: File path, relative to the workspace.
            old: The exact text to replace (include enough context to be unique).
            new: The replacement.
            expected_count: How many occurrences you expect; the edit is refused if it differs.
        """
        target = resolve_inside(root, path)
        text = _read_text(target)
        count = text.count(old) if old else 0
        if count != expected_count:
            raise WorkspaceError(
                f"found {count} occurrence(s) of the old text in {rel(target)}, expected {expected_count}; "
                "nothing was changed. Read the file again and quote the text exactly."
            )
        atomic_write(target, text.replace(old, new))
        return f"Replaced {count} occurrence(s) in {rel(target)}."

    return [
        tool(list_files, read_only=True),
        tool(read_file, read_only=True),
        tool(search_files, read_only=True),
        tool(write_file),
        tool(edit_file),
    ]


def _split(folder: Path) -> tuple[list[str], list[str]]:
    dirs: list[str] = []
    files: list[str] = []
    for entry in folder.iterdir():
        (dirs if entry.is_dir() else files).append(entry.name)
    return dirs, files
