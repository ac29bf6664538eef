"""The workspace's control files, read-only for a sandboxed call.

A command in the sandbox may write anywhere in the workspace (Landlock grants the folder whole,
and cannot take a part of a granted folder back). Control files (``.mcp.json``, ``AGENTS.md``,
``.ipyagent/``, the skill folders; :data:`~ipyagent.agentlib.control_files.SANDBOX_GUARDED`) must
stay as they are: what they say runs or instructs the next run. So the confined process, in its
own mount namespace, mounts each of them read-only over itself (:func:`._confine.enter`, from the
pairs this module gives): a write, a removal or a rename there fails with "Read-only file system"
or "Device or resource busy", for the command and everything it starts, whatever path it uses.

A mount needs something to sit on. For an entry that does not exist yet, an empty placeholder is
made in the workspace for as long as the call runs (an empty file, ``{"mcpServers": {}}`` for
``.mcp.json``, an empty folder), then removed — unless someone outside the sandbox wrote into it
meanwhile. Calls that run at once share a placeholder (counted here). For an entry that is a
symbolic link, the mount sits on the link itself (it cannot be removed or replaced), showing the
link's target when that is inside the workspace, and an empty placeholder from the call's private
temporary folder otherwise (a mount of a file outside would make it readable under the
workspace's grant).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from ..control_files import SANDBOX_GUARDED

__all__ = ["guarded"]

_PLACEHOLDER_TEXT = {".mcp.json": b'{"mcpServers": {}}\n'}
_lock = threading.Lock()


@dataclass
class _Placeholder:
    users: int
    inode: tuple[int, int]
    #: Size and mtime as made: a file written from outside the sandbox meanwhile is kept.
    stamp: tuple[int, int]


#: Placeholders this process made and calls still use, by path.
_placed: dict[str, _Placeholder] = {}


@contextlib.contextmanager
def guarded(cwd: str, tmp: str, *, enabled: bool = True) -> Iterator[list[tuple[str, str]]]:
    """``(entry, what to mount read-only on it)`` for each control entry of the workspace ``cwd``,
    placeholders made for the call's duration (``tmp``: the call's private folder). Not
    ``enabled``: none (the file tools' own writes, which the loop asked a person about)."""
    if not enabled:
        yield []
        return
    root = os.path.realpath(cwd)
    pairs: list[tuple[str, str]] = []
    ours: list[str] = []
    with _lock:
        for name, folder in SANDBOX_GUARDED:
            path = os.path.join(root, name)
            if path in _placed:
                _placed[path].users += 1
                ours.append(path)
                pairs.append((path, path))
                continue
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                if _place(path, name, folder):
                    ours.append(path)
                    pairs.append((path, path))
                continue  # a workspace the kernel cannot write: the sandbox cannot either
            except OSError:
                continue
            pairs.append(
                (path, _link_source(root, path, tmp, folder) if stat.S_ISLNK(info.st_mode) else path)
            )
    try:
        yield pairs
    finally:
        with _lock:
            for path in ours:
                _release(path)


def _place(path: str, name: str, folder: bool) -> bool:
    try:
        if folder:
            os.mkdir(path)
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(_PLACEHOLDER_TEXT.get(name, b""))
        info = os.lstat(path)
    except OSError:
        return False
    _placed[path] = _Placeholder(1, (info.st_dev, info.st_ino), (info.st_size, info.st_mtime_ns))
    return True


def _release(path: str) -> None:
    made = _placed[path]
    made.users -= 1
    if made.users:
        return
    del _placed[path]
    with contextlib.suppress(OSError):
        info = os.lstat(path)
        if (info.st_dev, info.st_ino) != made.inode:
            return  # replaced from outside the sandbox meanwhile: someone's file now
        if stat.S_ISDIR(info.st_mode):
            os.rmdir(path)  # fails, and stays, when someone put files in it meanwhile
        elif (info.st_size, info.st_mtime_ns) == made.stamp:
            os.unlink(path)


def _link_source(root: str, path: str, tmp: str, folder: bool) -> str:
    real = os.path.realpath(path)
    if real.startswith(root + os.sep) and os.path.exists(real):
        return real
    stand_in = os.path.join(tmp, f".ipyagent-guard-{os.path.basename(path)}")
    with contextlib.suppress(FileExistsError):
        if folder:
            os.mkdir(stand_in)
        else:
            os.close(os.open(stand_in, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444))
    return stand_in
