"""File tools confined to the workspace: list, read, search, write, edit.

A path is resolved (symlinks followed) and must land inside the workspace: ``..``, absolute
paths elsewhere and symlinks that point out are refused. The resolved path is then opened folder
by folder from the workspace without following links (:mod:`._safe_io`), so nothing swapped in
after the check is followed. Only regular files are read, in bounded memory; writes replace the
file atomically (a temporary file renamed over it), so a failure never leaves half a file.

Some files are not the model's to touch. ``protected`` files (the conversation's session file,
the cassette in use, a headless run's notebook; the kernel layer names them) are never written.
Files that hold secrets by convention (:func:`._safe_io.is_secret`: ``.env``, private keys,
credentials), and hard links to them (the same file under another name), are read only when the
user says yes to a question, and searches skip them. A search runs in a process of its own
(:mod:`._search`), killed at its time limit, and says which files it did not search (too large,
binary), so "no matches" is never mistaken for a definite answer.

A write or an edit first takes the file's lock (:mod:`.file_lock`), waiting at most
``lock_seconds`` for another call or process that holds it; the protected files are refused
before that, by path and by inode (a hard link to one is that file), since a conversation's
session file stays locked while it is open.

Writes (``write_file``, ``edit_file``) run in a child process the OS confines to the workspace
(:mod:`ipyagent.agentlib.sandbox`): should a path ever slip past the checks above, the kernel
itself refuses a write outside. Where this machine cannot confine a child, they are refused
rather than run unconfined.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import os
import stat
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...agentlib import sandbox
from ...agentlib.control_files import Subject
from ...agentlib.tools import RunContext, Tool, tool
from ...agentlib.workers import tool_workers
from . import _safe_io as io
from . import _search as _search_worker
from ._safe_io import WorkspaceError
from .file_lock import LOCK_SECONDS, locked

__all__ = ["WorkspaceError", "file_tools", "resolve_inside"]

# Below the agent's default max_result_chars (30,000), so the "ask for start_line" hint is kept.
MAX_READ_CHARS = 25_000
MAX_LIST = 500
MAX_MATCHES = 200
MAX_EDIT_BYTES = 10_000_000
#: read_file counts the lines after what it shows (for "line N of M") up to this many bytes.
MAX_COUNT_BYTES = 256 * 1024 * 1024
SEARCH_SECONDS = 30.0
#: What one confined write may use; it holds at most MAX_EDIT_BYTES of text twice. It runs only
#: the tools' own code, which starts no process: no process limit, so writes also work as root
#: on kernels that cannot limit root's processes (before Linux 6.14).
WRITE_LIMITS = sandbox.Limits(timeout=60.0, memory=1 << 30, max_procs=None)
SKIP_DIRS = {".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".ipynb_checkpoints"}
_WORKER = str(Path(__file__).with_name("_search.py"))


def resolve_inside(root: Path, path: str) -> Path:
    try:
        root = root.resolve()
        target = (root / path).resolve()
    except (RecursionError, OSError, ValueError) as exc:
        raise WorkspaceError(
            f"Cannot resolve {path[:200]!r}: the path is too deep or too long, or it loops "
            f"({type(exc).__name__}). Use a shorter path."
        ) from exc
    if target != root and root not in target.parents:
        raise WorkspaceError(f"{path!r} is outside the workspace ({root}); use a path inside it.")
    return target


def _inside(root: Path, path: Path) -> bool:
    """Whether ``path``, links followed, is in the workspace (a link may point out of it)."""
    try:
        resolve_inside(root, str(path))
    except WorkspaceError:
        return False
    return True


def file_tools(
    workspace: Path,
    *,
    protected: Mapping[Path, str] | None = None,
    search_seconds: float | None = None,
    lock_seconds: float | None = None,
) -> list[Tool]:
    """The file tools for ``workspace``. ``protected`` maps files the tools must never write to
    what they are (said to the model when it tries); ``search_seconds`` bounds one search
    (default: :data:`SEARCH_SECONDS`); ``lock_seconds`` how long an edit waits for a file
    another call or process holds (default: :data:`~.file_lock.LOCK_SECONDS`)."""
    root = workspace
    # Read live, not copied: the kernel's mapping grows as sub-agents' session files appear.
    guarded: Mapping[Path, str] = protected if protected is not None else {}

    def real_root() -> str:
        return str(root.resolve())

    def parts_of(target: Path) -> list[str]:
        return list(target.relative_to(root.resolve()).parts)

    def rel(path: Path) -> str:
        return path.relative_to(root.resolve()).as_posix() or "."

    def refused_inodes() -> dict[tuple[int, int], str]:
        out: dict[tuple[int, int], str] = {}
        for path, why in guarded.items():
            with contextlib.suppress(OSError):
                info = path.stat()
                out[(info.st_dev, info.st_ino)] = why
        return out

    def check_writable(target: Path, path: str, refused: Mapping[tuple[int, int], str]) -> list[str]:
        """The path's parts, or why it may not be written. Checked before any lock is taken: a
        conversation's session file stays locked while it is open, so a lock would wait for it."""
        for protected_path, why in guarded.items():
            with contextlib.suppress(OSError, RuntimeError):
                if protected_path.resolve() == target:
                    raise WorkspaceError(io.off_limits(rel(target), why))
        with contextlib.suppress(OSError):
            info = target.stat()  # a hard link to a protected file is that file
            if (linked := refused.get((info.st_dev, info.st_ino))) is not None:
                raise WorkspaceError(io.off_limits(rel(target), linked))
            if info.st_nlink > 1:  # the sandbox keeps such a file read-only (docs/sandbox.md)
                raise WorkspaceError(
                    f"{rel(target)} has {info.st_nlink} names (hard links): the same file may be "
                    "outside the workspace too, so it is not changed through this one. Tell the user; "
                    "to change it here only, they can replace it with a copy of itself "
                    f"(cp {rel(target)} copy && mv copy {rel(target)})."
                )
        parts = parts_of(target)
        if not parts:
            raise WorkspaceError(f"{path!r} is the workspace folder itself, not a file.")
        return parts

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
        base = real_root()
        entries: list[str] = []
        deep = False
        for current, dirs, others in io.walk(base, parts_of(folder), skip=frozenset(SKIP_DIRS)):
            if others == ["…"] and not dirs:
                deep = True
                continue
            if not recursive:
                entries += [f"{'/'.join([*current, name])}/" for name in dirs]
                dirs.clear()
            for name in others:
                if fnmatch.fnmatch(name, pattern):
                    entries.append(
                        f"{'/'.join([*current, name])}  {_describe(root, Path(base, *current, name))}"
                    )
            if len(entries) > MAX_LIST:
                break
            if not recursive:
                break
        if not entries:
            return "(nothing matches)"
        more = f"\n… (listing stopped at {MAX_LIST} entries)" if len(entries) > MAX_LIST else ""
        if deep:
            more += f"\n… (folders more than {io.MAX_DEPTH} levels down are not listed)"
        return "\n".join(entries[:MAX_LIST]) + more

    async def read_file(
        path: str, start_line: int = 1, end_line: int | None = None, *, ctx: RunContext
    ) -> str:
        """Read a text file, with line numbers.

        Args:
            path: File path, relative to the workspace.
            start_line: First line to show (1-based).
            end_line: Last line to show (default: as much as fits).
        """
        target = resolve_inside(root, path)
        parts = parts_of(target)
        base = real_root()
        secret = io.is_secret(list(Path(path).parts)) or io.is_secret(parts)
        if secret:
            await _consent(ctx, rel(target))
        else:  # a hard link to a secrets file is that file under another name
            linked = await tool_workers().run(_linked_secret_at, (base, target), label="read_file")
            if linked is not None:
                await _consent(ctx, rel(target), linked=linked)
                secret = True
        # Never blocks: only a regular file is opened (O_NONBLOCK, then fstat), and at most
        # MAX_READ_CHARS plus MAX_COUNT_BYTES are read, so the thread always ends soon.
        return await tool_workers().run(
            _read_range, (base, parts, start_line, end_line), {"consented": secret}, label="read_file"
        )

    async def search_files(pattern: str, path: str = ".", glob: str = "*") -> str:
        """Search file contents with a regular expression.

        Args:
            pattern: Python regular expression.
            path: Folder to search in, relative to the workspace.
            glob: Only files whose name matches, e.g. "*.py".
        """
        folder = resolve_inside(root, path)
        if not folder.is_dir():
            raise WorkspaceError(f"{path!r} is not a folder; search a folder and narrow it with glob.")
        request = {
            "root": real_root(),
            "parts": parts_of(folder),
            "pattern": pattern,
            "glob": glob,
            "max_matches": MAX_MATCHES,
            "skip": sorted(SKIP_DIRS),
        }
        return await _search(request, search_seconds if search_seconds is not None else SEARCH_SECONDS)

    def write_file(path: str, content: str) -> str:
        """Create or overwrite a text file in the workspace.

        Args:
            path: File path, relative to the workspace.
            content: The whole new content.
        """
        target = resolve_inside(root, path)
        refused = refused_inodes()
        parts = check_writable(target, path, refused)
        data = content.encode("utf-8")
        # Not over a file that another call or process holds locked (another kernel's open
        # conversation file would go on being written to the replaced, unlinked inode).
        with locked(target, timeout=lock_seconds if lock_seconds is not None else LOCK_SECONDS):
            existed = _confined(root, _write, real_root(), parts, data, refused)
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
        refused = refused_inodes()
        parts = check_writable(target, path, refused)
        # A concurrent edit of the same file is applied after this one; a file another process
        # keeps locked past the deadline is an error result that names it (see file_lock).
        with locked(target, timeout=lock_seconds if lock_seconds is not None else LOCK_SECONDS):
            count: int = _confined(
                root, _replace, real_root(), parts, old, new, expected_count, rel(target), refused
            )
        return f"Replaced {count} occurrence(s) in {rel(target)}."

    def subjects(arguments: dict[str, Any]) -> list[Subject]:
        """The file a write would change, for the loop's control-file rule (which resolves it;
        a path outside the workspace is no control file of it, and the tool refuses it)."""
        return [Subject(root / str(arguments["path"]), root)]

    return [
        tool(list_files, read_only=True),
        tool(read_file, read_only=True),
        tool(search_files, read_only=True),
        replace(tool(write_file), subjects=subjects),
        replace(tool(edit_file), subjects=subjects),
    ]


def _confined(root: Path, function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` in a child the OS confines to the workspace (see the module docstring).
    A workspace that is the home folder is allowed here, unlike for ``shell``: the child runs only
    the tools' own write, whose checks already keep it to the workspace and off protected files.
    Control files are not guarded here: the loop asked a person before a write to one ran."""
    return sandbox.call(
        function, args, cwd=root.resolve(), limits=WRITE_LIMITS, allow_home=True, guard_control=False
    )


def _write(root: str, parts: list[str], data: bytes, refuse: Mapping[tuple[int, int], str]) -> bool:
    """write_file's write, run confined; returns whether the file existed."""
    return io.write_regular(root, parts, data, refuse=refuse)


def _replace(
    root: str,
    parts: list[str],
    old: str,
    new: str,
    expected_count: int,
    shown: str,
    refuse: Mapping[tuple[int, int], str],
) -> int:
    """edit_file's read, check and write, run confined; returns how many it replaced."""
    text = _read_whole(root, parts)
    count = text.count(old) if old else 0
    if count != expected_count:
        raise WorkspaceError(
            f"found {count} occurrence(s) of the old text in {shown}, expected "
            f"{expected_count}; nothing was changed. Read the file again and quote the text exactly."
        )
    data = text.replace(old, new).encode("utf-8", errors="surrogateescape")
    io.write_regular(root, parts, data, refuse=refuse)
    return count


def _describe(root: Path, path: Path) -> str:
    """What list_files says about a non-folder entry: its size, or what kind of thing it is."""
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            if not _inside(root, path):
                return "(link to outside the workspace)"
            info = path.stat()
    except (OSError, RuntimeError):
        return "(broken link)"
    if stat.S_ISDIR(info.st_mode):
        return "(link to a folder)"
    if not stat.S_ISREG(info.st_mode):
        return f"({io.file_kind(info.st_mode)}; not readable by the file tools)"
    return f"({info.st_size:,} bytes)"


async def _consent(ctx: RunContext, shown: str, *, linked: str | None = None) -> None:
    """Ask the user before a file that holds secrets is read (its text goes to the model);
    ``linked``: the secrets file that ``shown`` is a hard link to."""
    what = "a file that usually holds secrets"
    if linked is not None:
        what = f"a hard link to {linked} (the same file under another name), which usually holds secrets"
    answer = await ctx.ask_user(
        f"The agent wants to read {shown}, {what} (keys, passwords, tokens). "
        "What it reads is sent to the model provider. Allow it to read this file once?",
        ["Allow once", "Deny"],
    )
    if answer is None:
        held = f"is a hard link to {linked!r}, which " if linked is not None else ""
        raise WorkspaceError(
            f"{shown!r} {held}holds secrets by convention, so reading it needs the user's consent, and "
            "nobody can answer in this run. Do not try to read it another way; ask the user for the values "
            "you need (or for them to be set as environment variables)."
        )
    if not answer.strip().lower().startswith(("allow", "yes")):
        raise WorkspaceError(
            f"The user declined to let you read {shown!r}. Do not try to read it another way; "
            "go on without it or ask the user."
        )


def _linked_secret(root: str, info: os.stat_result) -> str | None:
    return io.secret_inode(root, info, skip=frozenset(SKIP_DIRS))


def _linked_secret_at(root: str, target: Path) -> str | None:
    try:
        info = target.stat()
    except OSError:
        return None  # not there: the read says so
    return _linked_secret(root, info)


def _read_range(
    root: str, parts: list[str], start_line: int, end_line: int | None, *, consented: bool
) -> str:
    with io.open_regular(root, parts) as fd:
        linked = None if consented else _linked_secret(root, os.fstat(fd))
        if linked is not None:  # linked after the check above: nobody was asked
            raise WorkspaceError(
                f"{'/'.join(parts)!r} is now a hard link to {linked!r}, which holds secrets by "
                "convention; nothing was read. Ask the user for the values you need."
            )
        if io.is_binary(fd):
            raise WorkspaceError(f"{parts[-1]} is a binary file; it cannot be read as text.")
        first = max(1, start_line)
        out: list[str] = []
        size = number = 0
        for number, (line, cut, offset) in enumerate(io.iter_lines(fd), 1):
            if number < first:
                continue
            if end_line is not None and number > end_line:
                break
            shown = f"{number:>6}  {line}" + (f" … (line cut at {io.MAX_LINE_BYTES:,} bytes)" if cut else "")
            size += len(shown) + 1
            if size > MAX_READ_CHARS:
                total = _total_lines(fd, number, offset)
                out.append(f"… (stopped at line {number - 1} of {total}; ask for start_line={number})")
                break
            out.append(shown)
        if not out:
            total = _total_lines(fd, 0, 0)
            last = total if end_line is None else end_line
            return f"(no lines {first}-{last}; the file has {total} lines)"
        return "\n".join(out)


def _total_lines(fd: int, number: int, offset: int) -> str:
    """How many lines the file has, counting past line ``number`` (which ends at ``offset``)
    without holding the file in memory; past MAX_COUNT_BYTES, a lower bound."""
    count, complete = io.count_newlines(fd, offset, limit=MAX_COUNT_BYTES)
    size = os.fstat(fd).st_size
    if size > offset and os.pread(fd, 1, size - 1) != b"\n":
        count += 1  # a last line without a newline
    return f"{number + count}" if complete else f"more than {number + count}"


def _read_whole(root: str, parts: list[str]) -> str:
    with io.open_regular(root, parts) as fd:
        if io.is_binary(fd):
            raise WorkspaceError(f"{parts[-1]} is a binary file; it cannot be edited as text.")
        if os.fstat(fd).st_size > MAX_EDIT_BYTES:
            raise WorkspaceError(
                f"{'/'.join(parts)} is larger than {MAX_EDIT_BYTES:,} bytes; edit_file holds the whole "
                "file. Use the python tool to change a file this large."
            )
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    # surrogateescape: bytes that are not UTF-8 are written back exactly as they were.
    return b"".join(chunks).decode("utf-8", errors="surrogateescape")


async def _search(request: dict[str, object], seconds: float) -> str:
    """Run the search worker; kill it at ``seconds`` (or when this call is cancelled) and keep
    the matches it sent before."""
    if not sys.executable:
        raise WorkspaceError("search_files cannot start its search process here (no Python executable).")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-E", "-s", "-S", _WORKER,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=1 << 20,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    matches: list[str] = []
    done: dict[str, object] | None = None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    try:
        process.stdin.write(json.dumps(request).encode())
        await process.stdin.drain()
        process.stdin.close()
        while done is None:
            try:
                line = await asyncio.wait_for(process.stdout.readline(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                break
            if not line:
                break
            item = json.loads(line)
            if "error" in item:
                raise WorkspaceError(str(item["error"]))
            if "match" in item:
                matches.append(str(item["match"]))
            else:
                done = item
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        await process.wait()
    if done is None and loop.time() < deadline:
        detail = (await process.stderr.read())[-500:].decode(errors="replace").strip()
        raise WorkspaceError(f"The search process failed ({detail or f'exit {process.returncode}'}).")
    return _search_report(matches, done, seconds)


def _search_report(matches: list[str], done: dict[str, object] | None, seconds: float) -> str:
    notes: list[str] = []
    if done is None:
        stopped = (
            f"the search stopped at its time limit of {seconds:g} s"
            + (" (matches above were found before it)" if matches else " with no match found")
            + ". Narrow path or glob, or simplify the pattern "
            "(nested quantifiers like (a+)+ can run for ever)."
        )
        if not matches:
            raise WorkspaceError(stopped[0].upper() + stopped[1:])
        notes.append(f"… ({stopped})")
    elif done.get("done") == "limit":
        notes.append(f"… (stopped at {MAX_MATCHES} matches)")
    if done is not None and done.get("secret"):
        notes.append(
            f"… (skipped {done['secret']} file(s) that hold secrets by convention, such as .env or private "
            "keys; read_file asks the user before reading one)"
        )
    if done is not None:
        skipped = [
            _skipped(done.get("large"), f"file(s) over {_search_worker.MAX_FILE_BYTES // 1_000_000} MB"),
            _skipped(done.get("binary"), "binary file(s)"),
        ]
        if any(skipped):
            notes.append(f"… (not searched: {'; '.join(s for s in skipped if s)})")
    if done is not None and done.get("deep"):
        notes.append(f"… (folders more than {io.MAX_DEPTH} levels down were not searched)")
    return "\n".join((matches or ["(no matches)"]) + notes)


def _skipped(counted: object, what: str) -> str:
    """What the worker's ``[count, names...]`` says: "3 binary file(s): a.png, b.db, and 1 more"."""
    if not isinstance(counted, list) or not counted or not counted[0]:
        return ""
    count, shown = int(counted[0]), [str(name) for name in counted[1:]]
    more = f", and {count - len(shown)} more" if count > len(shown) else ""
    return f"{count} {what}: {', '.join(shown)}{more}"
