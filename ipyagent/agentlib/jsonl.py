"""Append-only JSON Lines: how sessions and cassettes write a record.

A record is one compact JSON object on one line, written with one ``os.write`` loop on a file
opened for appending, then (by default) ``fsync``-ed: a crash leaves the earlier lines whole and
at most a torn last line, which the readers skip. Replacing a whole file is :mod:`.atomic`'s.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["append_line", "json_line", "open_for_append"]


def json_line(record: Any) -> str:
    """``record`` as one line of compact JSON (non-ASCII kept as is), newline included."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def open_for_append(path: os.PathLike[str] | str, *, create: bool = True, exclusive: bool = False) -> int:
    """A descriptor on ``path`` whose writes always land at the end (``O_APPEND``)."""
    flags = os.O_RDWR | os.O_APPEND | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    if create:
        flags |= os.O_CREAT
    if exclusive:
        flags |= os.O_EXCL
    return os.open(path, flags, 0o644)


def append_line(fd: int, line: str, *, fsync: bool = True) -> None:
    """Append one whole line to the file open on ``fd`` (a regular file may take a large line in
    more than one write), then force it to disk unless ``fsync`` is false."""
    data = memoryview(line.encode())
    while data:
        written = os.write(fd, data)
        data = data[written:]
    if fsync:
        os.fsync(fd)
