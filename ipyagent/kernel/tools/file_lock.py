"""One read-modify-write of a file at a time, across threads and processes, with a deadline.

A tool that loads a file, changes it and writes it back loses a concurrent change made between
its read and its write: the later writer wins. :func:`locked` serializes them: a lock per path
for the threads of this process, and an advisory ``flock`` on the file itself for other
processes (two kernels, a headless run) that use the same lock. Writes replace the file
atomically (a new inode), so after taking the ``flock`` the holder checks that the path still
names the file it locked, and locks again if it was replaced in between.

Neither lock is waited for without end: a file another process keeps locked (another kernel's
open conversation file, ``*.agent.jsonl``, is locked for as long as that kernel runs) would
otherwise hold the calling thread for good. The ``flock`` is tried without blocking, again and
again with a growing pause, until the deadline (:data:`LOCK_SECONDS` by default); then
:class:`FileBusy` says which file, which process holds it where the system says
(``/proc/locks`` on Linux), and what to do.

This module owns only the locking. It does not read or write the file; without ``fcntl``
(Windows) only the threads of one process are serialized.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ._safe_io import WorkspaceError

__all__ = ["LOCK_SECONDS", "FileBusy", "locked"]

#: Seconds :func:`locked` waits for a file another call or process holds.
LOCK_SECONDS = 10.0
#: The pauses between tries grow from the first to the last.
_FIRST_PAUSE, _LAST_PAUSE = 0.005, 0.2

_flock: Callable[[int, int], Any] | None
try:
    import fcntl

    _flock, _TRY = fcntl.flock, fcntl.LOCK_EX | fcntl.LOCK_NB
except ImportError:  # pragma: no cover - Windows: threads of this process only
    _flock, _TRY = None, 0

_guard = threading.Lock()
_locks: dict[str, threading.Lock] = {}


class FileBusy(WorkspaceError):
    """A file stayed locked by another call or process past the deadline; nothing was changed."""


def _thread_lock(path: Path) -> threading.Lock:
    with _guard:
        return _locks.setdefault(str(path), threading.Lock())


@contextmanager
def locked(path: Path, *, timeout: float = LOCK_SECONDS) -> Iterator[None]:
    """Hold ``path`` for one read-modify-write, or raise :class:`FileBusy` after ``timeout``
    seconds. A missing file is not locked across processes (there is nothing to read yet); the
    threads of this process are serialized either way."""
    path = path.resolve()
    deadline = time.monotonic() + timeout
    lock = _thread_lock(path)
    if not lock.acquire(timeout=max(0.0, timeout)):
        raise FileBusy(
            f"{path.name} is being changed by another call of this kernel, which has held it for over "
            f"{timeout:g} s; nothing was changed. Try again in a moment, or change another file."
        )
    try:
        fd = _lock_file(path, deadline, timeout)
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)  # closing the last descriptor releases the flock
    finally:
        lock.release()


def _lock_file(path: Path, deadline: float, timeout: float) -> int | None:
    if _flock is None:  # pragma: no cover - Windows
        return None
    pause = _FIRST_PAUSE
    while True:
        try:
            # Never blocks: a named pipe where the file should be is the caller's read to refuse.
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:  # missing or unreadable: the caller's read reports it
            return None
        try:
            _flock(fd, _TRY)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            left = deadline - time.monotonic()
            if left <= 0:
                raise FileBusy(_busy(path, timeout, holder)) from None
            time.sleep(min(pause, left))
            pause = min(pause * 2, _LAST_PAUSE)
            continue
        except OSError:  # a file system without locks (some network mounts): threads only
            os.close(fd)
            return None
        if _same_file(fd, path):
            return fd
        os.close(fd)  # replaced while we waited: lock the file the path names now


def _busy(path: Path, timeout: float, holder: str | None) -> str:
    who = f"process {holder}" if holder else "another process"
    if path.name.endswith(".jsonl") and ".agent." in path.name:
        what = (
            f"It looks like the conversation file of another agent or kernel ({who} keeps it locked "
            "while its conversation is open); only that agent writes it. Leave it alone, or ask the "
            "user to close that conversation first."
        )
    else:
        what = (
            f"{who.capitalize()} holds a lock on it (an editor, another kernel's agent, a program "
            "that writes it). Try again later, or ask the user to close the program that holds it."
        )
    return f"{path.name} stayed locked for {timeout:g} s, so nothing was changed. {what}"


def _holder(fd: int) -> str | None:
    """Who holds a ``flock`` on the file open on ``fd``, as ``"1234 (python)"``, where the system
    lists its locks (Linux's ``/proc/locks``); ``None`` elsewhere, or when it cannot tell."""
    try:
        info = os.fstat(fd)
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            lines = locks.read(1 << 20).splitlines()
    except OSError:
        return None
    wanted = (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4321 fd:01:1835022 0 EOF"; a waiter's line has "->" first.
        if len(fields) < 6 or fields[1] == "->":
            continue
        try:
            major, minor, inode = fields[5].split(":")
            found = (int(major, 16), int(minor, 16), int(inode))
        except ValueError:
            continue
        if found == wanted and fields[4].isdigit() and fields[4] != "0":
            pid = fields[4]
            name = ""
            with contextlib.suppress(OSError):
                name = Path(f"/proc/{pid}/comm").read_text(errors="replace").strip()
            return f"{pid} ({name})" if name else pid
    return None


def _same_file(fd: int, path: Path) -> bool:
    try:
        now = os.stat(path)
    except OSError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)
