"""Append-only JSON Lines: how sessions, cassettes, map checkpoints, pipeline runs and summaries
write a record, and the one reader all five read their files with.

A record is one compact JSON object on one line, written with one ``os.write`` loop on a file
opened for appending, then (by default) ``fsync``-ed: a crash leaves the earlier lines whole and
at most a *torn* last line — bytes after the last newline that are not a whole JSON value. Before
a writer appends to a file it did not just create, :func:`settle_tail` cuts such bytes (a whole
last line that only lacks its newline gets it), so a new record never lands glued onto a torn one.
Replacing a whole file is :mod:`.atomic`'s.

:func:`read_lines` reads a file line by line and hands each whole line to the caller's parser.
What happens to a line that cannot be read is the caller's stated :class:`Policy`:

- a torn last line is always skipped and said in a note (it held no committed record);
- a *damaged* line — any other line that is not JSON, or that the parser rejects (valid JSON of
  the wrong shape) — either stops the reading with a :class:`UserError` naming the file, the line
  and what to do (``damaged="raise"``), or is skipped and said in a note (``damaged="skip"``).

Blank lines are neither: they are passed over. The table of which file takes which policy is in
docs/architecture.md ("Append-only files").
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from .clip import clip
from .errors import UserError

__all__ = [
    "UNREADABLE",
    "Policy",
    "Read",
    "append_line",
    "damaged_line",
    "json_line",
    "open_for_append",
    "read_lines",
    "settle_tail",
]

T = TypeVar("T")

#: What a parser raises for a line it cannot read (a pydantic ``ValidationError`` and a
#: ``UnicodeDecodeError`` are ``ValueError``\ s). Anything else — a ``UserError`` above all —
#: passes through the reader untouched.
UNREADABLE: tuple[type[Exception], ...] = (ValueError, TypeError, KeyError, AttributeError, IndexError)
#: How far back :func:`settle_tail` reads at a time, looking for the last newline.
_CHUNK = 1 << 16


def json_line(record: Any) -> str:
    """``record`` as one line of compact JSON (non-ASCII kept as is), newline included."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def open_for_append(
    path: os.PathLike[str] | str, *, create: bool = True, exclusive: bool = False, settle: bool = True
) -> int:
    """A descriptor on ``path`` whose writes always land at the end (``O_APPEND``), its tail
    settled (:func:`settle_tail`) unless ``settle`` is false — for a writer that settles it once
    it holds the file's lock."""
    flags = os.O_RDWR | os.O_APPEND | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    if create:
        flags |= os.O_CREAT
    if exclusive:
        flags |= os.O_EXCL
    fd = os.open(path, flags, 0o644)
    if settle:
        try:
            settle_tail(fd)
        except BaseException:
            os.close(fd)
            raise
    return fd


def append_line(fd: int, line: str, *, fsync: bool = True) -> None:
    """Append one whole line to the file open on ``fd`` (a regular file may take a large line in
    more than one write), then force it to disk unless ``fsync`` is false."""
    data = memoryview(line.encode())
    while data:
        written = os.write(fd, data)
        data = data[written:]
    if fsync:
        os.fsync(fd)


def settle_tail(fd: int) -> int:
    """Make the file open on ``fd`` end with a newline, so the next append starts a line of its
    own: a torn last line is cut, a whole one lacking its newline gets it. Returns how many torn
    bytes were cut (the readers have said so already: they skip a torn line with a note)."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return 0
    start = _last_line_start(fd, size)
    if _whole(os.pread(fd, size - start, start)):
        os.write(fd, b"\n")
        return 0
    os.ftruncate(fd, start)
    return size - start


def _last_line_start(fd: int, size: int) -> int:
    end = size
    while end > 0:
        begin = max(0, end - _CHUNK)
        found = os.pread(fd, end - begin, begin).rfind(b"\n")
        if found >= 0:
            return begin + found + 1
        end = begin
    return 0


def _whole(tail: bytes) -> bool:
    """Whether the bytes after a file's last newline are a whole line (blank, or a JSON value):
    a write cut short never is, as every record is a JSON object."""
    if not tail.strip():
        return True
    try:
        json.loads(tail)
    except ValueError:
        return False
    return True


# -- reading -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    """How a reader treats a file's unreadable lines.

    Args:
        what: The file's kind, as messages name it ("session", "cassette", ...).
        damaged: ``"raise"``: a damaged line stops the reading with a :class:`UserError`;
            ``"skip"``: it is skipped with a note.
        torn: What skipping a torn last line means for the user ("its item runs again").
        hint: What to do about a damaged line (the error's hint; with ``"skip"``, appended to
            the note); ``{line}`` and ``{path}`` in it are filled in.
        code: The error's code.
    """

    what: str
    damaged: Literal["raise", "skip"]
    torn: str
    hint: str
    code: str


@dataclass
class Read:
    """What :func:`read_lines` found: the parsed records (a parser's non-``None`` results), what
    was skipped in words, and where a torn last line starts (the file's length when none)."""

    records: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    whole_length: int = 0


def read_lines(
    lines: Iterable[bytes], path: Path, parse: Callable[[bytes, int], T | None], policy: Policy
) -> Read:
    """Read the lines of ``path`` — ``lines`` as a file opened in binary mode yields them, each
    with its newline, so only the last can lack one — one at a time: ``parse(line, number)`` (the
    line without its newline, numbered from 1) returns the line's record (``None``: nothing to
    keep), or raises one of :data:`UNREADABLE` when the line is damaged, which ``policy`` settles.
    Lines are parsed as they are read, so a large file is never held twice."""
    read = Read()
    for number, raw in enumerate(lines, 1):
        whole = raw.endswith(b"\n")
        if not whole and not _whole(raw):
            read.notes.append(
                f"{path.name}: skipped a torn last line ({len(raw)} bytes, a write cut short by a "
                f"crash); every line before it was kept, and {policy.torn}."
            )
            break
        read.whole_length += len(raw)
        line = raw[:-1] if whole else raw
        if not line.strip():
            continue
        try:
            record = parse(line, number)
        except UNREADABLE as exc:
            if policy.damaged == "raise":
                raise damaged_line(path, number, exc, policy) from exc
            hint = policy.hint.format(line=number, path=path)
            read.notes.append(f"{path.name}: skipped line {number} ({_brief(exc)}). {hint}")
            continue
        if record is not None:
            read.records.append(record)
    return read


def damaged_line(path: Path, number: int, exc: BaseException, policy: Policy) -> UserError:
    """The error for line ``number`` of ``path``, which ``exc`` says could not be read."""
    return UserError(
        f"The {policy.what} {path} is damaged at line {number}: {_brief(exc)}",
        hint=policy.hint.format(line=number, path=path),
        code=policy.code,
    )


def _brief(exc: BaseException) -> str:
    if isinstance(exc, json.JSONDecodeError):  # its own "line 1" would be the line's, not the file's
        return f"not JSON ({exc.msg} at column {exc.colno})"
    if isinstance(exc, KeyError):
        return f"no {exc} field"
    return clip(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, 160)
