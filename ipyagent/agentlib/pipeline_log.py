"""A pipeline run's file: one JSON line per thing that happened, appended as it happens.

The file (``<store>/<pipeline>/<run id>.jsonl``) opens with a header naming the pipeline, the run
and its steps; then the run's initial ``input`` state, and for every step a ``start`` line and one
that ends it: ``done`` with the state after the step (all of it, as :mod:`.pipeline_state`
encodes it), ``failed`` with the error, ``cancelled`` or ``exhausted``. A ``resume`` line marks
where a later call went on from. Each line is written with :mod:`.jsonl` and forced to disk
before the next step starts, so a crash loses at most the step in flight, and leaves at most a
torn last line, which reading skips with a warning and resuming cuts off; the file is read with
:func:`.jsonl.read_lines` under :data:`POLICY`.

:class:`RunHistory` replays the lines into each step's :class:`StepRecord` and the states after
the finished steps; the same replay runs as the lines are written, so a run in progress and one
read back from its file are one thing. This module owns the format; what a step is and when the
lines are written is :mod:`.pipelines`'.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from .errors import UserError
from .jsonl import Policy, append_line, json_line, open_for_append, read_lines
from .usage import Usage

__all__ = ["PipelineWarning", "RunHistory", "RunLog", "StepError", "StepRecord", "read_header", "read_run"]

FORMAT, VERSION = "ipyagent-pipeline", 1
#: A damaged line stops the reading: the states after it could not be trusted. A torn last line is
#: the step in flight when the process died, which runs again.
POLICY = Policy(
    what="pipeline's run file",
    damaged="raise",
    torn="that step runs again",
    hint="Move the file aside; the run cannot be resumed from it.",
    code="pipeline_run_damaged",
)
StepStatus = Literal["pending", "running", "done", "failed", "cancelled", "exhausted", "interrupted"]
#: A step that stopped without finishing: running it again goes on with its own checkpoint.
STOPPED = ("failed", "cancelled", "exhausted", "interrupted", "running")


class PipelineWarning(UserWarning):
    """A pipeline's run file could not be read as it was (a torn last line)."""


@dataclass(frozen=True)
class StepError:
    """Why a step failed: the exception's type and message (with its hint, for ipyagent's own
    errors), its ``code`` when it has one, and the traceback."""

    type: str
    message: str
    code: str = ""
    traceback: str = ""

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"


@dataclass(frozen=True)
class StepRecord:
    """One step of a run as its file tells it: its ``status``, which ``attempt`` (a finished step
    run again is a new attempt, with fresh checkpoints), a ``detail`` (a map's counts), its
    ``error``, what it spent (``usage``), how long it took (``seconds``) and which fields of the
    state it set (``changed``)."""

    name: str
    status: StepStatus = "pending"
    attempt: int = 0
    detail: str = ""
    error: StepError | None = None
    usage: Usage = field(default_factory=Usage)
    seconds: float | None = None
    changed: tuple[str, ...] = ()


class RunHistory:
    """A run replayed from its lines: the header, the initial state, each step's record and the
    (encoded) state after each finished step, and what all its attempts spent."""

    def __init__(self, header: dict[str, Any]) -> None:
        self.header = header
        self.input: Any = None
        self.order: list[str] = list(header.get("steps", []))
        self.steps: dict[str, StepRecord] = {}
        self.states: dict[str, Any] = {}
        #: Spent by every attempt of every step, and their wall time.
        self.usage = Usage()
        self.seconds = 0.0

    @property
    def run_id(self) -> str:
        return str(self.header["run"])

    def apply(self, line: dict[str, Any]) -> None:
        """Replay one line."""
        kind = line.get("kind")
        name = str(line.get("step", ""))
        before = self.steps.get(name, StepRecord(name))
        if kind == "input":
            self.input = line["state"]
        elif kind == "resume":
            self.order = list(line.get("steps", self.order))
            if line.get("rerun"):  # from_=...: the steps from there run again, afresh, except
                # the step resumed from when it had stopped: it goes on with its own checkpoint.
                start = self.order.index(line["from"]) if line["from"] in self.order else 0
                for again in self.order[start:]:
                    record = self.steps.get(again)
                    if record is None or (again == line["from"] and record.status != "done"):
                        continue
                    self.steps[again] = StepRecord(again, "pending", attempt=record.attempt)
                    self.states.pop(again, None)
        elif kind == "start":
            attempt = int(line["attempt"])
            carried = before if attempt == before.attempt else StepRecord(name)
            self.steps[name] = replace(carried, status="running", attempt=attempt, error=None)
        elif kind in ("done", "failed", "cancelled", "exhausted"):
            usage = Usage.model_validate(line.get("usage") or {})
            seconds = float(line.get("seconds") or 0.0)
            self.usage = self.usage + usage
            self.seconds += seconds
            error = StepError(**line["error"]) if line.get("error") else None
            self.steps[name] = replace(
                before,
                status=kind,
                attempt=int(line.get("attempt", before.attempt)),
                detail=str(line.get("detail", "")),
                error=error,
                usage=before.usage + usage,  # the same attempt resumed adds to what it spent
                seconds=(before.seconds or 0.0) + seconds,
                changed=tuple(line.get("changed", ())),
            )
            if kind == "done":
                self.states[name] = line["state"]

    def next_attempt(self, name: str) -> int:
        """The attempt a step starts now: the one it stopped in (its checkpoint resumes), or a
        new one when it never ran or finished before."""
        record = self.steps.get(name)
        if record is None or record.attempt == 0:
            return 1
        return record.attempt if record.status in STOPPED else record.attempt + 1


class RunLog:
    """A run's file open for appending: each :meth:`write` is one line, on disk when it returns."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def create(cls, path: Path, header: dict[str, Any]) -> RunLog:
        """A new run file with ``header`` (a :class:`UserError` if the run exists)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = open_for_append(path, exclusive=True)
        except FileExistsError:
            raise UserError(
                f"The run {header['run']!r} exists already ({path}).",
                hint="Resume it with pipe.resume(run_id), or pass another run_id.",
                code="pipeline_run_exists",
            ) from None
        log = cls(path, fd)
        log.write({"format": FORMAT, "version": VERSION, **header})
        return log

    @classmethod
    def reopen(cls, path: Path) -> RunLog:
        """The run file at ``path``, to go on appending (a torn last line is cut first)."""
        return cls(path, open_for_append(path, create=False))

    def write(self, line: dict[str, Any]) -> None:
        if self._fd is None:
            raise RuntimeError("the run's file is closed")
        try:
            append_line(self._fd, json_line(line))
        except OSError as exc:
            raise UserError(
                f"Cannot write the pipeline's run file {self.path}: {exc}",
                hint="Free some disk space or give the pipeline another store=; the steps on file are "
                "kept, and resuming goes on from them.",
                code="pipeline_unwritable",
            ) from exc

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_header(path: Path) -> dict[str, Any] | None:
    """The header of a run file, or None when ``path`` is not one."""
    try:
        with path.open("rb") as handle:
            header = json.loads(handle.readline() or b"null")
    except (OSError, ValueError):
        return None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return None
    return header


def read_run(path: Path) -> RunHistory:
    """The run in ``path``, replayed (a torn last line is skipped with a warning)."""
    header = read_header(path)
    if header is None:
        if not path.is_file():
            raise UserError(
                f"No pipeline run at {path}.", hint="List the runs with pipe.runs().", code="pipeline_no_run"
            )
        raise UserError(f"{path} is not a pipeline's run file.", code="pipeline_run_damaged")
    history = RunHistory(header)

    def replay(raw: bytes, number: int) -> None:
        if number == 1:  # the header, read already
            return
        line = json.loads(raw)
        if not isinstance(line, dict):
            raise ValueError("not a JSON object")
        history.apply(line)

    with path.open("rb") as handle:
        notes = read_lines(handle, path, replay, POLICY).notes
    for note in notes:
        warnings.warn(note, PipelineWarning, stacklevel=3)
    return history
