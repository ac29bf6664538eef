"""A map's checkpoint: one JSON line per finished item, appended as each one finishes.

The file opens with a header naming the call it belongs to (a fingerprint of the prompts, the
output type and the model, see :mod:`.maps`); each later line is one item's outcome: its index,
the key of its prompt, ``ok`` with the output as JSON or ``failed`` with the error, and its
usage. Each line is written with :mod:`.jsonl` as its item finishes (one ``os.write`` loop: in
the system's hands at once, so a crash of the process or a kernel restart loses at most the items
in flight, and leaves at most a torn last line, which reading skips with a warning and the next
write cuts off; the file is read with :func:`.jsonl.read_lines` under :data:`POLICY`). Forcing
the file to disk (``fsync``, against a crash of the machine) happens on a thread of its own, as
soon as the previous one is done and at close: a map's loop never waits for the disk, which can
take tens of milliseconds per call.

A checkpoint written for another call is never reused: :func:`open_checkpoint` warns, naming the
file, and starts a file of its own beside it. A file whose header cannot be read is *not* taken
for another call's (that would ask every item on file again, and pay for it, without a word): it
stops the map with a :class:`UserError` that names the file and line 1, says how many finished
items it holds, and gives the header this call expects, so the file can be mended and resumed.
A damaged line further down stops the map the same way, naming its line. This module owns the
file format; what an item's outcome is, and when to write it, is :mod:`.maps`'s.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UserError
from .jsonl import UNREADABLE, Policy, append_line, damaged_line, json_line, open_for_append, read_lines

__all__ = ["Checkpoint", "CheckpointRecord", "MapCheckpointWarning", "damaged", "open_checkpoint"]

FORMAT, VERSION = "ipyagent-map", 1
#: A damaged line stops the map: skipping it would ask its item again, and pay for it, without a
#: word; a torn last line is the item in flight when the process died, which runs again.
POLICY = Policy(
    what="checkpoint",
    damaged="raise",
    torn="its item runs again",
    hint="Mend or delete line {line} of {path} (a deleted line's item is asked again, and paid for), "
    "then run the map again; or pass checkpoint=<a new path> to start afresh (every item is asked again).",
    code="checkpoint_damaged",
)


class MapCheckpointWarning(UserWarning):
    """A map's checkpoint could not be used as it was (another call's, or a torn last line)."""


@dataclass(frozen=True)
class CheckpointRecord:
    """One finished item as the checkpoint holds it."""

    index: int
    key: str
    ok: bool
    output: Any = None
    error: dict[str, Any] | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    #: Where the record was read from (its line number in the file; 0: written by this map).
    line_number: int = field(default=0, compare=False)

    def line(self) -> str:
        record: dict[str, Any] = {"i": self.index, "key": self.key, "ok": self.ok, "usage": self.usage}
        if self.ok:
            record["output"] = self.output
        else:
            record["error"] = self.error
        return json_line(record)


class Checkpoint:
    """An open checkpoint file: :attr:`records` read from it, :meth:`write` appends."""

    def __init__(
        self, path: Path, fingerprint: str, records: dict[int, CheckpointRecord], *, fsync: bool
    ) -> None:
        self.path = path
        self.fingerprint = fingerprint
        #: What earlier runs of the same call finished, by item index.
        self.records = records
        self.fsync = fsync
        self._fd: int | None = None
        self._dirty = threading.Event()
        self._closing = False
        self._syncer: threading.Thread | None = None

    def write(self, record: CheckpointRecord) -> None:
        """Append one finished item (the file and its header are made on the first write)."""
        try:
            self._write(record)
        except OSError as exc:
            raise UserError(
                f"Cannot write the map's checkpoint {self.path}: {exc}",
                hint="Free some disk space or pass another checkpoint=PATH; the items on file are kept, "
                "and running the map again resumes from them.",
                code="checkpoint_unwritable",
            ) from exc

    def _write(self, record: CheckpointRecord) -> None:
        if self._fd is None:
            self._fd = open_for_append(self.path)  # a torn last line is cut: the next starts clean
            if os.fstat(self._fd).st_size == 0:
                header = {"format": FORMAT, "version": VERSION, "call": self.fingerprint}
                append_line(self._fd, json_line(header), fsync=False)
            if self.fsync:
                self._syncer = threading.Thread(target=self._sync, name="ipyagent-checkpoint", daemon=True)
                self._syncer.start()
        append_line(self._fd, record.line(), fsync=False)
        self.records[record.index] = record
        self._dirty.set()

    def _sync(self) -> None:
        """The syncing thread: force what was written to disk, again whenever more was."""
        while True:
            self._dirty.wait()
            if self._closing:
                return
            self._dirty.clear()
            if self._fd is not None:
                os.fsync(self._fd)

    def close(self) -> None:
        """Force the file to disk (when ``fsync``) and close it."""
        if self._fd is None:
            return
        if self._syncer is not None:
            self._closing = True
            self._dirty.set()
            self._syncer.join()
            self._syncer = None
            os.fsync(self._fd)
        os.close(self._fd)
        self._fd = None

    def __repr__(self) -> str:
        return f"Checkpoint({str(self.path)!r}, finished={len(self.records)})"


def open_checkpoint(path: Path, fingerprint: str, *, fsync: bool = True) -> Checkpoint:
    """The checkpoint of the call ``fingerprint`` at ``path``: its finished items when the file
    is this call's; when it is another call's, a warning and a fresh file beside it
    (``name.<fingerprint>.jsonl``, resumed in turn if it exists)."""
    found = _read(path, fingerprint)
    if found is not None:
        return Checkpoint(path, fingerprint, found, fsync=fsync)
    own = path.with_name(f"{path.name.removesuffix('.jsonl')}.{fingerprint[:12]}.jsonl")
    warnings.warn(
        f"The checkpoint {path} was written by another map (other prompts, items, output type or "
        f"model), so it is not reused: this map checkpoints to {own}.",
        MapCheckpointWarning,
        stacklevel=3,
    )
    return Checkpoint(own, fingerprint, _read(own, fingerprint) or {}, fsync=fsync)


def _read(path: Path, fingerprint: str) -> dict[int, CheckpointRecord] | None:
    """The records of ``path`` if it is this call's (empty when it does not exist yet), else None."""
    try:
        with path.open("rb") as handle:  # the lines as they are: the header and records read below
            read = read_lines(handle, path, lambda line, number: (number, line), POLICY)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UserError(
            f"Cannot read the checkpoint {path}: {exc}",
            hint="Pass another checkpoint=PATH, or checkpoint=False to run without one.",
            code="checkpoint_unreadable",
        ) from exc
    lines: list[tuple[int, bytes]] = read.records
    if lines:  # else empty, or only a header torn as it was first written: nothing finished
        first, line = lines[0]
        header = _header(line) if first == 1 else None
        if header is None:
            raise _damaged_header(path, fingerprint, len(lines) - int(first == 1))
        if header["call"] != fingerprint:
            return None
    records = _records(lines[1:], path)
    for note in read.notes:  # a torn last line: a damaged one raised
        warnings.warn(note, MapCheckpointWarning, stacklevel=4)
    return records


def _records(lines: list[tuple[int, bytes]], path: Path) -> dict[int, CheckpointRecord]:
    try:  # one parse for the whole file: resuming a long map is then quick
        parsed = json.loads(b"[" + b",".join(line for _, line in lines) + b"]")
        return {
            int(d["i"]): CheckpointRecord(
                int(d["i"]),
                str(d["key"]),
                bool(d["ok"]),
                d.get("output"),
                d.get("error"),
                d.get("usage") or {},
                n,
            )
            for d, (n, _) in zip(parsed, lines, strict=True)
        }
    except UNREADABLE:  # a damaged line: read line by line, to say which
        pass
    records: dict[int, CheckpointRecord] = {}
    for number, line in lines:
        try:
            record = _record(line, number)
        except UNREADABLE as exc:
            raise damaged_line(path, number, exc, POLICY) from exc
        records[record.index] = record
    return records


def _record(line: bytes, number: int) -> CheckpointRecord:
    data = json.loads(line)
    return CheckpointRecord(
        index=int(data["i"]),
        key=str(data["key"]),
        ok=bool(data["ok"]),
        output=data.get("output"),
        error=data.get("error"),
        usage=dict(data.get("usage") or {}),
        line_number=number,
    )


def _header(line: bytes) -> dict[str, Any] | None:
    """The header a checkpoint opens with, or None when ``line`` is not one."""
    try:
        header = json.loads(line)
    except ValueError:
        return None
    ok = isinstance(header, dict) and header.get("format") == FORMAT and isinstance(header.get("call"), str)
    return header if ok else None


def damaged(path: Path, number: int, what: str) -> UserError:
    """The error for line ``number`` of the checkpoint ``path``, which ``what`` (it cannot be
    read as a record: hand-edited, or written over)."""
    return UserError(
        f"The checkpoint {path} is damaged at line {number}: it {what}.",
        hint=POLICY.hint.format(line=number, path=path),
        code=POLICY.code,
    )


def _damaged_header(path: Path, fingerprint: str, held: int) -> UserError:
    expected = json_line({"format": FORMAT, "version": VERSION, "call": fingerprint}).strip()
    if not held:
        return UserError(
            f"The checkpoint {path} is damaged at line 1: it is not a map checkpoint's header, and no "
            "finished item follows it.",
            hint=f"Nothing on file is lost: delete {path} and run the map again.",
            code="checkpoint_damaged",
        )
    return UserError(
        f"The checkpoint {path} is damaged at line 1: it is not a map checkpoint's header, so the "
        f"{held} finished item{'s' if held > 1 else ''} after it cannot be told to be this map's. "
        "Nothing was asked.",
        hint=f"If the file is this map's, make its line 1 read {expected} and run the map again: the "
        f"items on file are then not asked again. Otherwise delete {path}, or pass checkpoint=<a new "
        "path>, to ask every item again (and pay for it).",
        code="checkpoint_damaged",
    )
