"""One read-modify-write of a file at a time, across threads and processes.

A tool that loads a file, changes it and writes it back loses a concurrent change made between
its read and its write: the later writer wins. :func:`locked` serializes them: a lock per path
for the threads of this process, and an advisory ``flock`` on the file itself for other
processes (two kernels, a headless run) that use the same lock. Writes replace the file
atomically (a new inode), so after taking the ``flock`` the holder checks that the path still
names the file it locked, and locks again if it was replaced in between.

This module owns only the locking. It does not read or write the file; without ``fcntl``
(Windows) only the threads of one process are serialized.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["locked"]

_flock: Callable[[int, int], Any] | None
try:
    import fcntl

    _flock, _EXCLUSIVE = fcntl.flock, fcntl.LOCK_EX
except ImportError:  # pragma: no cover - Windows: threads of this process only
    _flock, _EXCLUSIVE = None, 0

_guard = threading.Lock()
_locks: dict[str, threading.Lock] = {}


def _thread_lock(path: Path) -> threading.Lock:
    with _guard:
        return _locks.setdefault(str(path), threading.Lock())


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold ``path`` for one read-modify-write. A missing file is not locked across processes
    (there is nothing to read yet); the threads of this process are serialized either way."""
    path = path.resolve()
    with _thread_lock(path):
        fd = _lock_file(path)
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)  # closing the last descriptor releases the flock


def _lock_file(path: Path) -> int | None:
    if _flock is None:  # pragma: no cover - Windows
        return None
    while True:
        try:
            # Never blocks: a named pipe where the file should be is the caller's read to refuse.
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:  # missing or unreadable: the caller's read reports it
            return None
        try:
            _flock(fd, _EXCLUSIVE)
        except OSError:  # a file system without locks (some network mounts): threads only
            os.close(fd)
            return None
        if _same_file(fd, path):
            return fd
        os.close(fd)  # replaced while we waited: lock the file the path names now


def _same_file(fd: int, path: Path) -> bool:
    try:
        now = os.stat(path)
    except OSError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)
