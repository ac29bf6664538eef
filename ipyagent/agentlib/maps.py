"""``agent.map``: the same question asked of every item, each item its own run, checkpointed.

    labels = await agent.map(df, "Classify this ticket: {title}\\n\\n{body}", output_type=Label)

Each item runs as an independent conversation: a fresh transcript with the agent's model, tools
and settings (a :class:`~ipyagent.agentlib.run_config.RunConfig` frozen once for the map), never
appended to the agent's own conversation. Nobody is asked for permission in an item's run, so a
tool that changes things is denied there unless the agent has ``auto_approve``.

This module owns the map's policy: which items run (those the checkpoint does not hold), when to
stop starting new ones (a budget), what each outcome is (:class:`ItemResult`) and what the map
returns (:class:`MapResult`, or a DataFrame for a pandas input). The checkpoint's file format is
:mod:`.checkpoint`'s; items, prompts and the DataFrame are :mod:`.map_items`'. *Where* items run
is an executor's (:class:`MapExecutor`): by default :class:`LoopExecutor`, concurrent runs on
the running event loop; the seam takes an executor that runs them elsewhere (a Dask or Ray
client) while this module keeps the checkpoint and the progress on the caller's side.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from .budget import Budget, spent_tokens
from .bus import EventBus
from .checkpoint import Checkpoint, CheckpointRecord, damaged, open_checkpoint
from .conversation import Conversation
from .errors import ErrorInfo, UserError
from .events import AgentEvent, MapProgress
from .map_items import MapInput, Prompt, fingerprint, map_input, prompt_key, to_frame
from .run import AgentRun
from .run_config import RunConfig
from .usage import Usage

__all__ = [
    "ItemResult",
    "LoopExecutor",
    "MapExecutor",
    "MapJob",
    "MapResult",
    "TextProgress",
    "run_item",
    "run_map",
]

ItemStatus = Literal["ok", "failed", "pending"]
MapStatus = Literal["completed", "exhausted", "cancelled"]
#: Seconds between two progress events (the last one is always sent).
PROGRESS_INTERVAL = 0.25


@dataclass(frozen=True)
class MapJob:
    """One item to run: its position in the input and its prompt."""

    index: int
    prompt: str


@dataclass(frozen=True)
class ItemResult:
    """One item's outcome: ``ok`` with its ``output``, ``failed`` with its ``error``, or
    ``pending`` (not run: the map stopped first). ``resumed``: read from the checkpoint."""

    index: int
    status: ItemStatus
    output: Any = None
    error: ErrorInfo | None = None
    usage: Usage = field(default_factory=Usage)
    resumed: bool = False


async def run_item(config: RunConfig, job: MapJob) -> ItemResult:
    """Run one item as its own conversation (nothing listens to its events: nobody is asked)."""
    result = await AgentRun(Conversation(emit=_ignore), config, job.prompt, bus=EventBus()).execute()
    if result.status == "completed":
        return ItemResult(job.index, "ok", output=result.output, usage=result.usage)
    if result.status == "cancelled":
        raise asyncio.CancelledError  # only the map cancels an item's run: it is not an outcome
    error = result.error or ErrorInfo(code=f"run_{result.status}", layer="run", message=result.reason)
    return ItemResult(job.index, "failed", error=error, usage=result.usage)


class MapExecutor(Protocol):
    """Where a map's items run. :meth:`run` starts ``work(job)`` for the jobs, at most
    ``concurrency`` at a time, asking ``may_start()`` before each (``False``: start no more), and
    yields each result as it finishes. Closing the iterator early must stop the jobs in flight.

    An executor for a cluster would ship ``config`` and each job to a worker there and run
    :func:`run_item` on it; the map keeps checkpointing and progress where it was called."""

    def run(
        self,
        config: RunConfig,
        jobs: Sequence[MapJob],
        *,
        concurrency: int,
        may_start: Callable[[], bool],
    ) -> AsyncIterator[ItemResult]: ...


class LoopExecutor:
    """The default executor: concurrent runs on the running event loop (the kernel's, in a
    notebook), each its own task."""

    async def run(
        self,
        config: RunConfig,
        jobs: Sequence[MapJob],
        *,
        concurrency: int,
        may_start: Callable[[], bool],
    ) -> AsyncIterator[ItemResult]:
        pending = iter(jobs)
        running: set[asyncio.Task[ItemResult]] = set()

        def fill() -> None:
            while len(running) < concurrency:
                job = next(pending, None)
                if job is None or not may_start():
                    return
                running.add(asyncio.ensure_future(run_item(config, job)))

        try:
            fill()
            while running:
                finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in finished:
                    running.discard(task)
                    yield task.result()
                fill()
        finally:
            for task in running:
                task.cancel()
            if running:
                await asyncio.wait(running)


class MapResult(Sequence[Any]):
    """What ``agent.map`` returns for a list: the outputs in the input's order (``result[i]``,
    ``list(result)``; ``None`` for an item that failed or did not run), with each item's
    :class:`ItemResult` in :attr:`items`, the failures in :attr:`errors` and the whole map's
    ``status`` (``completed``, or ``exhausted`` when a budget stopped it), ``usage`` and
    ``checkpoint`` file. :meth:`to_pandas` gives the DataFrame a pandas input gets."""

    def __init__(
        self,
        items: list[ItemResult],
        *,
        status: MapStatus,
        reason: str,
        usage: Usage,
        checkpoint: Path | None,
        index: Any = None,
    ) -> None:
        self.items = items
        self.status = status
        self.reason = reason
        self.usage = usage
        self.checkpoint = checkpoint
        self._index = index

    @property
    def outputs(self) -> list[Any]:
        return [item.output for item in self.items]

    @property
    def errors(self) -> dict[int, ErrorInfo]:
        """The failed items' errors, by position."""
        return {item.index: item.error for item in self.items if item.error is not None}

    @property
    def failed(self) -> int:
        return sum(item.status == "failed" for item in self.items)

    @property
    def pending(self) -> int:
        return sum(item.status == "pending" for item in self.items)

    def to_pandas(self) -> Any:
        """A DataFrame on the input's index: the output's fields as columns (one ``output``
        column for other types) and an ``error`` column (empty where the item succeeded; for an
        item the map did not run, why). ``frame.attrs["map"]`` holds the map's status, reason,
        usage and checkpoint."""
        not_run = f"Not run: {self.reason or 'the map stopped first.'}"
        errors = [
            item.error.message if item.error else not_run if item.status == "pending" else None
            for item in self.items
        ]
        frame = to_frame(self.outputs, errors, self._index)
        frame.attrs["map"] = {
            "status": self.status,
            "reason": self.reason,
            "ok": len(self.items) - self.failed - self.pending,
            "failed": self.failed,
            "pending": self.pending,
            "usage": self.usage.model_dump(mode="json", exclude_defaults=True),
            "checkpoint": str(self.checkpoint) if self.checkpoint else None,
        }
        return frame

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, position: Any) -> Any:
        if isinstance(position, slice):
            return [item.output for item in self.items[position]]
        return self.items[position].output

    def __iter__(self) -> Iterator[Any]:
        return (item.output for item in self.items)

    def __repr__(self) -> str:
        done = sum(item.status == "ok" for item in self.items)
        return (
            f"MapResult(status={self.status!r}, ok={done}, failed={self.failed}, pending={self.pending}, "
            f"usage={str(self.usage)!r})"
        )


class TextProgress:
    """The map's progress as one line of text rewritten in place (``\\r``) on ``stream`` (the
    cell's stderr in a notebook): done, failed, tokens, cost and the time left."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream

    def __call__(self, event: MapProgress) -> None:
        stream = self.stream if self.stream is not None else sys.stderr
        stream.write("\r" + str(event) + ("\n" if event.finished else ""))
        stream.flush()


async def run_map(
    config: RunConfig,
    items: Iterable[Any],
    prompt: Prompt,
    *,
    concurrency: int = 8,
    budget: Budget | None = None,
    checkpoint: str | os.PathLike[str] | bool = True,
    retry_failed: bool = False,
    executor: MapExecutor | None = None,
    progress: bool | Callable[[MapProgress], Any] = True,
    emit: Callable[[AgentEvent], None] = lambda event: None,
    fsync: bool = True,
) -> Any:
    """Run ``prompt`` over ``items`` with ``config`` (see ``Agent.map``, which calls this)."""
    if concurrency < 1:
        raise UserError(
            f"concurrency must be at least 1, not {concurrency}.",
            hint="Pass e.g. concurrency=8.",
            code="invalid_option",
        )
    given = map_input(items, prompt)
    schema = config.output.schema.json_schema if config.output else None
    call = fingerprint(given.prompts, schema, config.provider.model_id)
    store = _checkpoint(checkpoint, call, fsync=fsync)
    try:
        return await _Map(config, given, store, budget, emit, _display(progress)).run(
            executor or LoopExecutor(), concurrency, retry_failed
        )
    finally:
        if store is not None:
            store.close()


def _checkpoint(checkpoint: str | os.PathLike[str] | bool, call: str, *, fsync: bool) -> Checkpoint | None:
    if checkpoint is False:
        return None
    path = Path.cwd() / f"agent-map-{call[:12]}.jsonl" if checkpoint is True else Path(checkpoint)
    return open_checkpoint(path, call, fsync=fsync)


def _display(progress: bool | Callable[[MapProgress], Any]) -> Callable[[MapProgress], Any] | None:
    if progress is True:
        return TextProgress()
    return progress or None


class _Map:
    """One map in progress: what it has spent and finished, and what it reports."""

    def __init__(
        self,
        config: RunConfig,
        given: MapInput,
        store: Checkpoint | None,
        budget: Budget | None,
        emit: Callable[[AgentEvent], None],
        display: Callable[[MapProgress], Any] | None,
    ) -> None:
        self.config, self.given, self.store, self.budget = config, given, store, budget
        self.emit, self.display = emit, display
        total = len(given.items)
        self.results: list[ItemResult] = [ItemResult(i, "pending") for i in range(total)]
        self.usage = Usage()  # spent by this call (not by the items read from the checkpoint)
        self.started = self.finished = self.resumed = 0
        self.clock = time.monotonic()
        self.last_report = 0.0
        self.stopped_by = ""

    async def run(self, executor: MapExecutor, concurrency: int, retry_failed: bool) -> Any:
        jobs = self._resume(retry_failed)
        self._report()
        status: MapStatus = "completed"
        seconds = self.budget.seconds if self.budget else None
        stream = executor.run(self.config, jobs, concurrency=concurrency, may_start=self._may_start)

        async def consume() -> None:
            async for outcome in stream:
                self._finished(outcome)

        try:
            await asyncio.wait_for(consume(), seconds)  # at the time cap, the items in flight stop
        except asyncio.TimeoutError:
            self.stopped_by = f"The map ran {seconds:g} s, reaching its time budget; run it again to go on."
        except asyncio.CancelledError:
            self._report(final=True, status="cancelled")
            raise
        finally:
            await _close(stream)
        if self.stopped_by:
            status = "exhausted"
        self._report(final=True, status=status)
        result = MapResult(
            self.results,
            status=status,
            reason=self.stopped_by,
            usage=self.usage,
            checkpoint=self.store.path if self.store else None,
            index=self.given.index,
        )
        return result.to_pandas() if self.given.kind != "list" else result

    def _resume(self, retry_failed: bool) -> list[MapJob]:
        """The items to run: those the checkpoint does not hold (or holds as failed, when asked).

        A record that cannot be loaded stops the map before anything is asked: an output the
        output type no longer accepts (a validator added since: the schema, and so the call, is
        the same) or a hand-edited usage or error. Asking such items again would pay for them
        twice without a word; the error names the file, the line and the ways out."""
        records = self.store.records if self.store else {}
        output = self.config.output
        jobs = []
        rejected: list[tuple[CheckpointRecord, str]] = []
        for index, prompt in enumerate(self.given.prompts):
            record = records.get(index)
            if record is None or record.key != prompt_key(prompt) or (retry_failed and not record.ok):
                jobs.append(MapJob(index, prompt))
                continue
            try:
                usage = Usage.model_validate(record.usage)
                error = ErrorInfo.model_validate(record.error) if record.error else None
            except ValidationError as exc:
                assert self.store is not None  # records come from it
                raise damaged(self.store.path, record.line_number, f"holds {_problems(exc)}") from None
            if record.ok:
                try:
                    value = output.load(record.output) if output else record.output
                except (ValidationError, ValueError, TypeError) as exc:
                    rejected.append((record, _problems(exc)))
                    continue
                self.results[index] = ItemResult(index, "ok", output=value, usage=usage, resumed=True)
            else:
                self.results[index] = ItemResult(index, "failed", error=error, usage=usage, resumed=True)
            self.resumed += 1
        if rejected:
            raise self._rejected(rejected)
        return jobs

    def _rejected(self, rejected: list[tuple[CheckpointRecord, str]]) -> UserError:
        assert self.store is not None and self.config.output is not None
        path, type_name = self.store.path, self.config.output.type_name
        first, problem = rejected[0]
        more = len(rejected) - 1
        also = f" ({more} more line{'s' if more > 1 else ''} of it as well)" if more else ""
        return UserError(
            f"The checkpoint {path} holds at line {first.line_number} an output for item {first.index} "
            f"that the output type {type_name} no longer accepts: {problem}{also}. Nothing was asked.",
            hint=f"Fix the output type (or the saved output) so they agree, and run the map again; or "
            f"delete line {first.line_number} (and any other such line) to ask those items again, and "
            "pay for them; or pass checkpoint=<a new path> to ask every item again.",
            code="checkpoint_output_invalid",
        )

    def _may_start(self) -> bool:
        """Whether another item may start: not once the budget would be spent by the items
        already running (each estimated at the mean of those finished)."""
        budget = self.budget
        if self.stopped_by:
            return False
        if budget is not None and (budget.tokens is not None or budget.cost is not None):
            running = self.started - self.finished
            mean = 1 / self.finished if self.finished else 0.0
            tokens = spent_tokens(self.usage) * (1 + running * mean)
            cost = (self.usage.cost or 0.0) * (1 + running * mean)
            if budget.tokens is not None and tokens >= budget.tokens:
                used = spent_tokens(self.usage)
                self.stopped_by = f"The map used {used:,} tokens, reaching its budget of {budget.tokens:,}"
            elif budget.cost is not None and cost >= budget.cost:
                self.stopped_by = (
                    f"The map cost ${self.usage.cost or 0:.4f}, reaching its budget of ${budget.cost:.2f}"
                )
            if self.stopped_by:
                self.stopped_by += (
                    " (counting the items in flight); run it again with a larger budget to go on."
                )
                return False
        self.started += 1
        return True

    def _finished(self, outcome: ItemResult) -> None:
        self.finished += 1
        self.results[outcome.index] = outcome
        self.usage = self.usage + outcome.usage
        if (
            self.finished == 1
            and self.budget is not None
            and self.budget.cost is not None
            and self.usage.cost is None
        ):
            model = self.config.provider.model_id
            warnings.warn(
                f"No price is known for {model}, so the map's cost cap cannot apply; tokens are counted "
                'and capped as set. Add its price to ~/.config/ipyagent/config.toml ([prices."MODEL"]) '
                "or cap tokens instead.",
                UserWarning,
                stacklevel=2,
            )
        if self.store is not None:
            output = self.config.output
            self.store.write(
                CheckpointRecord(
                    index=outcome.index,
                    key=prompt_key(self.given.prompts[outcome.index]),
                    ok=outcome.status == "ok",
                    output=output.dump(outcome.output) if output else outcome.output,
                    error=outcome.error.model_dump(mode="json") if outcome.error else None,
                    usage=outcome.usage.model_dump(mode="json", exclude_defaults=True),
                )
            )
        self._report()

    def _report(self, *, final: bool = False, status: MapStatus | None = None) -> None:
        now = time.monotonic()
        if not final and now - self.last_report < PROGRESS_INTERVAL:
            return
        self.last_report = now
        elapsed = now - self.clock
        done = sum(r.status == "ok" for r in self.results)
        failed = sum(r.status == "failed" for r in self.results)
        left = len(self.results) - done - failed
        rate = self.finished / elapsed if self.finished and elapsed > 0 else 0.0
        event = MapProgress(
            total=len(self.results),
            done=done,
            failed=failed,
            resumed=self.resumed,
            running=self.started - self.finished,
            usage=self.usage,
            elapsed=elapsed,
            remaining=left / rate if rate else None,
            finished=final,
            status=status or "running",
            checkpoint=str(self.store.path) if self.store else None,
        )
        self.emit(event)
        if self.display is not None:
            self.display(event)


def _problems(exc: Exception) -> str:
    """What a validation error says, on one line: ``field: message; ...``."""
    if not isinstance(exc, ValidationError):
        return f"{type(exc).__name__}: {exc}"
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'the value'}: {e['msg']}" for e in exc.errors(include_url=False)
    )


async def _close(stream: AsyncIterator[ItemResult]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


def _ignore(event: AgentEvent) -> None:
    """Where an item's conversation reports (nobody watches one item of a map)."""
