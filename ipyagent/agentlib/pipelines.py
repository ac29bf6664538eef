"""Pipelines: named steps over a state, the state persisted after every step, runs that resume.

    pipe = Pipeline("tickets", store="runs")

    @pipe.step
    def load(state):
        return {"tickets": pd.read_csv(state["path"])}

    pipe.add(map_step(agent, items_from="tickets", prompt="Classify: {title}", into="labels"))
    run = await pipe.invoke({"path": "tickets.csv"})     # run.state, run.status; displays its steps
    run = await pipe.resume()                            # the latest run, from where it stopped

A step is a function (sync or async) of the state returning its update: a dict of the fields it
sets (or ``None``); it may take a second argument, its :class:`StepContext`. Each step sees what
the earlier ones produced. :func:`~.pipeline_steps.agent_step` and
:func:`~.pipeline_steps.map_step` make steps that ask an agent.

This module owns a run's course: which step runs next, merging updates, what ends the run
(a step raising, the budget, an interrupt), resuming, and the run as a notebook shows it
(:class:`PipelineRun`). The run's file is :mod:`.pipeline_log`'s; the state's encoding
:mod:`.pipeline_state`'s.
"""

from __future__ import annotations

import datetime
import html
import inspect
import re
import secrets
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from pydantic import BaseModel, ValidationError

from .budget import Budget, spent_tokens
from .errors import AgentError, PipelineFailed, UserError
from .pipeline_log import RunHistory, RunLog, StepError, StepRecord, read_header, read_run
from .pipeline_state import FrameFormat, StateCodec
from .usage import Usage

__all__ = ["BudgetExhausted", "Pipeline", "PipelineRun", "RunInfo", "Step", "StepContext"]

_F = TypeVar("_F", bound=Callable[..., Any])
RunStatus = Literal["completed", "failed", "exhausted", "cancelled", "interrupted", "running"]
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_MARKS = {"done": "✓", "pending": "·", "running": "▸"}
_COLORS = {"done": "#1a7f37", "pending": "#6e7781", "running": "#0969da"}


class BudgetExhausted(Exception):
    """Raised by a step that stopped because the pipeline's budget ran out: the run ends
    ``exhausted`` (not failed), and resuming with a larger budget goes on from that step."""


@dataclass
class StepContext:
    """What a step may know of its run: the run's id, the step's name and attempt, the run's
    ``folder`` (for files a step keeps), and what is left of the pipeline's ``budget``. A step
    that spends (calls a model) says so with :meth:`spend`; ``detail`` is shown beside it."""

    run_id: str
    step: str
    attempt: int
    folder: Path
    budget: Budget | None = None
    usage: Usage = field(default_factory=Usage)
    detail: str = ""

    def spend(self, usage: Usage) -> None:
        """Count ``usage`` against the pipeline's budget (and show it with the step)."""
        self.usage = self.usage + usage

    def checkpoint(self, what: str = "map") -> Path:
        """Where this attempt of the step keeps a checkpoint: the same file when a stopped step
        resumes, a new one when a finished step runs again."""
        return self.folder / f"{self.step}.{self.attempt}.{what}.jsonl"


class Step:
    """A named step. Subclasses implement :meth:`__call__`; ``spends`` says whether the
    pipeline's budget is checked before it runs."""

    spends: bool = False

    def __init__(self, name: str) -> None:
        self.name = _check_name(name, "step")

    def describe(self) -> str:
        """A few words for the pipeline's display (``python``, ``map tickets → labels``)."""
        return "python"

    async def __call__(self, state: Any, context: StepContext) -> Any:
        raise NotImplementedError


class FunctionStep(Step):
    """A plain function of the state (and optionally of its :class:`StepContext`), sync or async."""

    def __init__(self, function: Callable[..., Any], name: str | None = None) -> None:
        named = name or str(getattr(function, "__name__", ""))
        if named == "<lambda>":
            raise UserError(
                "A lambda has no name, and a pipeline's steps are named.",
                hint="Pass one: pipe.add(lambda state: ..., name='load'), or use a def.",
                code="invalid_step",
            )
        super().__init__(named)
        self.function = function
        try:
            params = [
                p
                for p in inspect.signature(function).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
        except (TypeError, ValueError):
            params = []
        self.takes_context = len(params) >= 2

    async def __call__(self, state: Any, context: StepContext) -> Any:
        value = self.function(state, context) if self.takes_context else self.function(state)
        if inspect.isawaitable(value):
            value = await value
        return value


@dataclass(frozen=True)
class RunInfo:
    """One run of a pipeline in its store: its id, status, the step it stopped at, when it began."""

    run_id: str
    status: RunStatus
    stopped_at: str | None
    created: str


class PipelineRun:
    """A run of a pipeline: its ``status``, each step's :class:`StepRecord` in ``steps``, the
    ``state`` after its last finished step, what it spent (``usage``), and, when it failed,
    why (``reason``; ``exception`` when it failed in this session). Displays as its steps."""

    def __init__(
        self,
        pipeline: Pipeline,
        history: RunHistory,
        codec: StateCodec,
        *,
        live: bool = False,
        held: dict[str, Any] | None = None,
    ) -> None:
        self.pipeline = pipeline.name
        self.run_id = history.run_id
        self.path = pipeline.folder / f"{history.run_id}.jsonl"
        self._descriptions = {step.name: step.describe() for step in pipeline.steps}
        self._history, self._codec = history, codec
        self.live = live
        self.exception: BaseException | None = None
        #: A step's update that could not be persisted (kept here so that nothing is lost).
        self.unsaved: Any = None
        #: States as the steps left them in memory, by step ("" the input): read from the file
        #: otherwise. The pipeline running the run fills it.
        self._held: dict[str, Any] = held if held is not None else {}

    @property
    def steps(self) -> list[StepRecord]:
        history = self._history
        records = [history.steps.get(name, StepRecord(name)) for name in history.order]
        if not self.live:
            records = [replace(r, status="interrupted") if r.status == "running" else r for r in records]
        return records

    @property
    def stopped_at(self) -> StepRecord | None:
        """The first step not done (None when every step is)."""
        return next((record for record in self.steps if record.status != "done"), None)

    @property
    def status(self) -> RunStatus:
        record = self.stopped_at
        if record is None:
            return "completed"
        if record.status == "pending":
            return "running" if self.live else "interrupted"
        return "failed" if record.status == "failed" else record.status  # type: ignore[return-value]

    @property
    def reason(self) -> str:
        record = self.stopped_at
        if record is None or record.status in ("pending", "running"):
            return ""
        if record.error is not None:
            return f"Step {record.name!r} failed: {record.error}"
        if record.status == "exhausted":
            return record.detail
        return f"Step {record.name!r} was {record.status}."

    @property
    def usage(self) -> Usage:
        """What every attempt of every step spent."""
        return self._history.usage

    @property
    def state(self) -> Any:
        """The state after the last finished step (the initial state when none finished)."""
        done = [r.name for r in self.steps if r.status == "done" and r.name in self._history.states]
        last = done[-1] if done else None
        key = last or ""
        if key not in self._held:
            encoded = self._history.states[last] if last else self._history.input
            self._held[key] = self._codec.decode(encoded)
        return self._held[key]

    def durations(self) -> dict[str, float | None]:
        """Seconds each step took (every attempt counted; None for a step not run)."""
        return {record.name: record.seconds for record in self.steps}

    def raise_for_status(self) -> PipelineRun:
        """Raise :class:`PipelineFailed` unless the run completed; return self otherwise."""
        if self.status == "completed":
            return self
        record = self.stopped_at
        assert record is not None  # a run that did not complete stopped somewhere
        code = {"exhausted": "pipeline_exhausted", "failed": "pipeline_step_failed"}.get(
            self.status, "pipeline_stopped"
        )
        again = "Raise pipe.budget, then " if self.status == "exhausted" else "Fix the step, then "
        hint = f"{again}run `await pipe.resume()`: it goes on from {record.name!r} with the state before it."
        error = PipelineFailed(self.reason or f"The run stopped at {record.name!r}.", hint=hint, code=code)
        if self.exception is not None:
            raise error from self.exception
        raise error

    def rows(self) -> list[tuple[str, str, str, str]]:
        """Each step as (name, description, status, detail): what the displays show."""
        out: list[tuple[str, str, str, str]] = []
        for record in self.steps:
            detail = str(record.error) if record.error else record.detail
            if record.usage.requests or record.usage.total_tokens:
                detail = f"{detail} · {record.usage}" if detail else str(record.usage)
            out.append((record.name, self._descriptions.get(record.name, ""), record.status, detail))
        return out

    def outcome(self) -> str:
        """The run's status in words: ``completed``, ``failed at 'publish'``."""
        record = self.stopped_at
        where = f" at {record.name!r}" if record is not None and self.status != "running" else ""
        return f"{self.status}{where}"

    def title(self) -> str:
        return f"Pipeline {self.pipeline!r}: {self.outcome()}"

    def __repr__(self) -> str:
        return _text(self.title(), self.rows())

    def _repr_html_(self) -> str:
        return _html(self.title(), self.rows())


class Pipeline:
    """Named steps over a state, the state persisted after every step.

    Args:
        name: The pipeline's name: its runs are kept in ``store/name/``.
        steps: Functions of the state (named by their ``__name__``) or :class:`Step` objects
            (:func:`agent_step`, :func:`map_step`); more with :meth:`step` and :meth:`add`.
        store: The folder for runs (default ``pipelines`` in the working directory). Each run is
            ``<run id>.jsonl`` with a folder ``<run id>/`` beside it for DataFrames and checkpoints.
        budget: A cap across the run's agent and map steps (``"tokens=2M,cost=5,time=1h"``),
            counted over every attempt: checked before each of them, and what is left is the
            cap of each map. A run that reaches it ends ``exhausted``.
        frames: How DataFrames in the state are stored: ``parquet`` (needs pyarrow), ``json``
            (inline), or ``auto`` (parquet when pyarrow is installed).
    """

    def __init__(
        self,
        name: str,
        steps: Iterable[Step | Callable[..., Any]] = (),
        *,
        store: str | Path | None = None,
        budget: Budget | Mapping[str, Any] | str | None = None,
        frames: FrameFormat = "auto",
    ) -> None:
        self.name = _check_name(name, "pipeline")
        self.folder = (Path(store) if store is not None else Path("pipelines")).absolute() / self.name
        self.budget = budget
        self.frames = frames
        StateCodec(self.folder, frames).check()
        self._steps: list[Step] = []
        self._running: set[str] = set()
        #: The latest run this pipeline made or resumed in this session.
        self.last_run: PipelineRun | None = None
        for step in steps:
            self.add(step)

    @property
    def budget(self) -> Budget | None:
        return self._budget

    @budget.setter
    def budget(self, value: Budget | Mapping[str, Any] | str | None) -> None:
        self._budget = Budget.of(value)

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(self._steps)

    def add(self, step: Step | Callable[..., Any], *, name: str | None = None) -> Step:
        """Append a step (a :class:`Step`, or a function of the state) and return it."""
        made = step if isinstance(step, Step) else FunctionStep(step, name)
        if name is not None and isinstance(step, Step):
            made.name = _check_name(name, "step")
        if made.name == "input":
            raise UserError(
                "A step cannot be named 'input': that names the initial state in snapshots.",
                hint="Name it otherwise, e.g. add(step, name='load_input').",
                code="invalid_step",
            )
        if any(existing.name == made.name for existing in self._steps):
            raise UserError(
                f"The pipeline {self.name!r} has a step {made.name!r} already.",
                hint="Give the new step another name (name=...).",
                code="invalid_step",
            )
        self._steps.append(made)
        return made

    @overload
    def step(self, function: _F, *, name: str | None = None) -> _F: ...
    @overload
    def step(self, function: None = None, *, name: str | None = None) -> Callable[[_F], _F]: ...
    def step(self, function: _F | None = None, *, name: str | None = None) -> _F | Callable[[_F], _F]:
        """Decorator: ``@pipe.step`` (or ``@pipe.step(name="...")``) appends the function as a
        step and returns it unchanged."""

        def register(fn: _F) -> _F:
            self.add(fn, name=name)
            return fn

        return register(function) if function is not None else register

    async def invoke(self, state: Any, *, run_id: str | None = None) -> PipelineRun:
        """Run every step on ``state`` (a dict with string keys or a pydantic model) as a new
        run; return it. A step that raises ends the run ``failed`` (nothing is raised: see
        ``run.status``, ``run.raise_for_status()``); :meth:`resume` goes on from there."""
        if not self._steps:
            raise UserError(
                f"The pipeline {self.name!r} has no steps.",
                hint="Add some with @pipe.step.",
                code="invalid_step",
            )
        run_id = _check_name(run_id, "run id") if run_id is not None else _new_run_id()
        codec = StateCodec(self.folder / run_id, self.frames)
        encoded = codec.encode_state(state)  # refused before anything runs
        header = {
            "pipeline": self.name,
            "run": run_id,
            "steps": [s.name for s in self._steps],
            "created": _now(),
        }
        log = RunLog.create(self.folder / f"{run_id}.jsonl", header)
        history = RunHistory(header)
        course = _Course(self, history, codec, log)
        course.write({"kind": "input", "state": encoded})
        course.held[""] = state
        return await self._go(course, 0, state)

    async def resume(self, run_id: str | None = None, *, from_: str | None = None) -> PipelineRun:
        """Go on with a run (by default the latest): from its first step not finished, or, with
        ``from_``, from that step, with the state persisted before it. A step that was stopped
        goes on with its own checkpoint (a map asks only the items not finished); a finished
        step that runs again asks afresh."""
        run_id = run_id or self._latest()
        if run_id in self._running:
            raise UserError(
                f"The run {run_id!r} is running.",
                hint="Wait for it, or stop it first.",
                code="pipeline_running",
            )
        path = self.folder / f"{run_id}.jsonl"
        history = read_run(path)
        names = [s.name for s in self._steps]
        if from_ is not None and from_ not in names:
            raise UserError(
                f"The pipeline {self.name!r} has no step {from_!r}.",
                hint=f"Its steps are {', '.join(map(repr, names))}.",
                code="invalid_step",
            )
        done = {name for name, r in history.steps.items() if r.status == "done" and name in history.states}
        start = (
            names.index(from_)
            if from_ is not None
            else next((i for i, n in enumerate(names) if n not in done), len(names))
        )
        missing = [name for name in names[:start] if name not in done]
        if missing:
            raise UserError(
                f"Step {missing[0]!r} comes before {names[start]!r} but has not finished in the "
                f"run {run_id!r}.",
                hint=f"Resume from {missing[0]!r} (or without from_).",
                code="invalid_step",
            )
        codec = StateCodec(self.folder / run_id, self.frames)
        history.order = names
        if start == len(names):  # every step is done: nothing to run
            self.last_run = PipelineRun(self, history, codec)
            return self.last_run
        state = codec.decode(history.states[names[start - 1]] if start else history.input)
        course = _Course(self, history, codec, RunLog.reopen(path))
        course.held[names[start - 1] if start else ""] = state
        course.write({"kind": "resume", "from": names[start], "steps": names, "rerun": from_ is not None})
        return await self._go(course, start, state)

    def snapshot(self, run_id: str | None = None) -> dict[str, Any]:
        """The states a run persisted: ``"input"``, then the state after each finished step."""
        history = read_run(self.folder / f"{run_id or self._latest()}.jsonl")
        codec = StateCodec(self.folder / history.run_id, self.frames)
        states = {"input": codec.decode(history.input)}
        for name in history.order:
            if name in history.states:
                states[name] = codec.decode(history.states[name])
        return states

    def run(self, run_id: str | None = None) -> PipelineRun:
        """A run (by default the latest) as its file tells it."""
        history = read_run(self.folder / f"{run_id or self._latest()}.jsonl")
        return PipelineRun(
            self,
            history,
            StateCodec(self.folder / history.run_id, self.frames),
            live=history.run_id in self._running,
        )

    def runs(self) -> list[RunInfo]:
        """The runs in the store, oldest first."""
        infos = []
        for header, path in self._headers():
            run = PipelineRun(
                self,
                read_run(path),
                StateCodec(path.with_suffix(""), self.frames),
                live=header["run"] in self._running,
            )
            stopped = run.stopped_at
            infos.append(
                RunInfo(
                    run.run_id, run.status, stopped.name if stopped else None, str(header.get("created", ""))
                )
            )
        return infos

    # -- running ---------------------------------------------------------------------------------

    async def _go(self, course: _Course, start: int, state: Any) -> PipelineRun:
        run = course.run
        self._running.add(run.run_id)
        self.last_run = run
        try:
            for step in self._steps[start:]:
                state, go_on = await self._one(step, course, state)
                if not go_on:
                    break
        finally:
            self._running.discard(run.run_id)
            run.live = False
            course.log.close()
        return run

    async def _one(self, step: Step, course: _Course, state: Any) -> tuple[Any, bool]:
        """Run one step: its lines written, the state it leaves, whether the run goes on."""
        run, history = course.run, course.history
        attempt = history.next_attempt(step.name)
        left, spent = self._left(history) if step.spends else (None, "")
        if spent:
            course.write({"kind": "exhausted", "step": step.name, "attempt": attempt, "detail": spent})
            return state, False
        context = StepContext(run.run_id, step.name, attempt, self.folder / run.run_id, budget=left)
        context.folder.mkdir(parents=True, exist_ok=True)
        course.write({"kind": "start", "step": step.name, "attempt": attempt})
        clock = time.monotonic()

        def ended(kind: str, **more: Any) -> dict[str, Any]:
            seconds = round(time.monotonic() - clock, 3)
            usage = context.usage.model_dump(mode="json", exclude_defaults=True)
            line = {"kind": kind, "step": step.name, "attempt": attempt, "seconds": seconds, "usage": usage}
            return {**line, "detail": context.detail, **more}

        returned, update = False, None
        try:
            update = await step(state, context)
            returned = True
            new_state, changed = _merge(state, update, step.name)
            encoded = course.codec.encode_state(new_state)
        except BudgetExhausted as stop:
            context.detail = str(stop)
            course.write(ended("exhausted"))
            return state, False
        except Exception as exc:
            run.exception = exc
            if returned and isinstance(exc, UserError) and exc.code == "state_unserializable":
                run.unsaved = update  # kept, so that nothing the step made is lost
                hint = f"{exc.hint} The step's result is in run.unsaved, not persisted."
                exc.info = exc.info.model_copy(update={"hint": hint})
            course.write(ended("failed", error=_error(exc).__dict__))
            return state, False
        except BaseException:  # cancelled, interrupted: the step runs again on resume
            course.write(ended("cancelled"))
            raise
        course.write(ended("done", state=encoded, changed=changed))
        course.held[step.name] = new_state
        return new_state, True

    def _left(self, history: RunHistory) -> tuple[Budget | None, str]:
        """What is left of the budget, or why nothing is."""
        budget = self._budget
        if budget is None:
            return None, ""
        used, cost = spent_tokens(history.usage), history.usage.cost or 0.0
        again = "; raise pipe.budget and resume to go on."
        if budget.tokens is not None and used >= budget.tokens:
            return None, f"The pipeline used {used:,} tokens, reaching its budget of {budget.tokens:,}{again}"
        if budget.cost is not None and cost >= budget.cost:
            return None, f"The pipeline cost ${cost:.4f}, reaching its budget of ${budget.cost:.2f}{again}"
        if budget.seconds is not None and history.seconds >= budget.seconds:
            return (
                None,
                f"The pipeline ran {history.seconds:.1f} s, reaching its time budget of "
                f"{budget.seconds:g} s{again}",
            )
        return Budget(
            tokens=budget.tokens - used if budget.tokens is not None else None,
            cost=budget.cost - cost if budget.cost is not None else None,
            seconds=budget.seconds - history.seconds if budget.seconds is not None else None,
        ), ""

    def _headers(self) -> list[tuple[dict[str, Any], Path]]:
        found = []
        for path in self.folder.glob("*.jsonl") if self.folder.is_dir() else ():
            header = read_header(path)
            if header is not None and header.get("pipeline") == self.name:
                found.append((header, path))
        return sorted(found, key=lambda item: (str(item[0].get("created", "")), str(item[0]["run"])))

    def _latest(self) -> str:
        headers = self._headers()
        if not headers:
            raise UserError(
                f"The pipeline {self.name!r} has no runs in {self.folder}.",
                hint="Start one with await pipe.invoke(state).",
                code="pipeline_no_run",
            )
        return str(headers[-1][0]["run"])

    # -- display ---------------------------------------------------------------------------------

    def _rows(self) -> list[tuple[str, str, str, str]]:
        if self.last_run is not None:
            return self.last_run.rows()
        return [(step.name, step.describe(), "", "") for step in self._steps]

    def _title(self) -> str:
        count = f"{len(self._steps)} step{'s' if len(self._steps) != 1 else ''}"
        last = self.last_run
        return f"Pipeline {self.name!r} ({count})" + (f": {last.outcome()}" if last else "")

    def __repr__(self) -> str:
        return _text(self._title(), self._rows())

    def _repr_html_(self) -> str:
        return _html(self._title(), self._rows())


class _Course:
    """A run being run: its file, its replayed history, its states in memory, its view."""

    def __init__(self, pipeline: Pipeline, history: RunHistory, codec: StateCodec, log: RunLog) -> None:
        self.history, self.codec, self.log = history, codec, log
        self.held: dict[str, Any] = {}
        self.run = PipelineRun(pipeline, history, codec, live=True, held=self.held)

    def write(self, line: dict[str, Any]) -> None:
        """Append ``line`` to the run's file (on disk when this returns), then replay it."""
        self.log.write(line)
        self.history.apply(line)


def _merge(state: Any, update: Any, step: str) -> tuple[Any, list[str]]:
    """The state after ``update`` (a dict of fields, the state's own model, or None)."""
    if update is None:
        return state, []
    if isinstance(state, BaseModel):
        fields = type(state).model_fields
        if isinstance(update, type(state)):
            return update, list(fields)
        if isinstance(update, Mapping):
            unknown = [key for key in update if key not in fields]
            if unknown:
                raise UserError(
                    f"Step {step!r} set {unknown[0]!r}, which {type(state).__name__} has no field for.",
                    hint=f"Its fields are {', '.join(fields)}; add the field to the model.",
                    code="invalid_step_result",
                )
            try:
                return type(state).model_validate({**dict(state), **update}), list(update)
            except ValidationError as exc:
                raise UserError(
                    f"Step {step!r} returned fields that do not validate into {type(state).__name__}: {exc}",
                    hint="Return values of the fields' types.",
                    code="invalid_step_result",
                ) from exc
    elif isinstance(update, Mapping) and all(isinstance(key, str) for key in update):
        return {**state, **update}, list(update)
    raise UserError(
        f"Step {step!r} returned a {type(update).__name__}; a step returns a dict of the fields it "
        "sets, or None.",
        hint='Return e.g. {"labels": labels}.',
        code="invalid_step_result",
    )


def _error(exc: BaseException) -> StepError:
    code = exc.code if isinstance(exc, AgentError) else ""
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return StepError(type(exc).__name__, str(exc), code=code, traceback=trace[-4000:])


def _check_name(name: str | None, what: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.endswith(".jsonl"):
        raise UserError(
            f"Invalid {what} name {name!r}.",
            hint="Use letters, digits, '_', '-' and '.' (it names files), starting with a letter or digit.",
            code="invalid_step" if what == "step" else "invalid_option",
        )
    return name


def _new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")


def _text(title: str, rows: list[tuple[str, str, str, str]]) -> str:
    width = max((len(name) for name, *_ in rows), default=0)
    kinds = max((len(kind) for _, kind, *_ in rows), default=0)
    lines = [title]
    for name, kind, status, detail in rows:
        mark = _MARKS.get(status, "✗") if status else " "
        line = f"  {mark} {name:<{width}}  {kind:<{kinds}}  {status}"
        lines.append((f"{line} · {detail}" if detail else line).rstrip())
    return "\n".join(lines)


def _html(title: str, rows: list[tuple[str, str, str, str]]) -> str:
    cells = []
    for name, kind, status, detail in rows:
        color = _COLORS.get(status, "#cf222e")
        mark = html.escape(_MARKS.get(status, "✗") if status else "")
        cells.append(
            f'<tr><td style="color:{color}">{mark}</td><td><code>{html.escape(name)}</code></td>'
            f'<td style="color:#6e7781">{html.escape(kind)}</td>'
            f'<td style="color:{color}">{html.escape(status)}</td><td>{html.escape(detail)}</td></tr>'
        )
    return (
        f'<div class="ipyagent-pipeline"><div><strong>{html.escape(title)}</strong></div>'
        f'<table style="border-collapse:collapse">{"".join(cells)}</table></div>'
    )
