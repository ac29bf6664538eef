"""Executors that run a map's items somewhere else: a Dask cluster.

    from distributed import Client
    labels = await agent.map(df, "Classify: {title}", output_type=Label, executor=Client())

A Dask client given as it is runs through a :class:`DaskExecutor`, a
:class:`~ipyagent.agentlib.maps.MapExecutor`: it sends the run's
configuration and each item to the cluster's workers, where :func:`run_item_sync` runs the item
as its own conversation, and hands each result back as it finishes; the map keeps its checkpoint
and its progress where it was called, so resuming works as with the default executor.

What is sent must pickle (Dask uses cloudpickle): the provider (with its key: the workers call
the model), the tools, the hooks and the output type. MCP servers are not sent: their
connections belong to this process, so items on a cluster do not get their tools. A
configuration that does not pickle fails before anything is sent, saying what to change. Dask
is imported only when a :class:`DaskExecutor` is used (``pip install 'dask[distributed]'``).
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import Any

from .errors import ErrorInfo, UserError
from .maps import ItemResult, MapJob, run_item
from .run_config import RunConfig

__all__ = ["DaskExecutor", "executor_for", "portable_config", "run_item_sync"]


def executor_for(given: Any) -> Any:
    """What runs a map's items, given ``executor=``: a Dask ``distributed.Client`` as it is
    becomes a :class:`DaskExecutor`; anything else is taken as a ``MapExecutor`` (or ``None``,
    the default)."""
    if type(given).__module__.partition(".")[0] == "distributed":
        return DaskExecutor(given)
    return given


def run_item_sync(config: RunConfig, job: MapJob) -> ItemResult:
    """Run one item on a worker thread (no event loop running there): what a worker calls."""
    return asyncio.run(run_item(config, job))


def portable_config(config: RunConfig) -> RunConfig:
    """``config`` as it can travel to another process: without the tool sources (MCP servers,
    whose connections stay here) and the system-prompt builder that goes with them."""
    portable = replace(config, tool_sources=(), system_for=None)
    try:
        importlib.import_module("cloudpickle").dumps(portable)  # what Dask will do, said now
    except Exception as exc:
        raise UserError(
            f"The agent's configuration cannot be sent to the cluster: {type(exc).__name__}: {exc}",
            hint="Give the model by its id (model='openai/gpt-4.1'), define tools and hooks as plain "
            "functions, or run the map without executor= (on this kernel).",
            code="not_portable",
        ) from exc
    return portable


class DaskExecutor:
    """Run a map's items on a Dask cluster through ``client`` (a ``distributed.Client``,
    synchronous or ``asynchronous=True``). Up to the map's ``concurrency`` items are on the
    cluster at once; stopping the map cancels those still there."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def run(
        self,
        config: RunConfig,
        jobs: Sequence[MapJob],
        *,
        concurrency: int,
        may_start: Callable[[], bool],
    ) -> AsyncIterator[ItemResult]:
        portable = portable_config(config)
        pending = iter(jobs)
        running: dict[asyncio.Future[ItemResult], Any] = {}

        def submit() -> None:
            while len(running) < concurrency:
                job = next(pending, None)
                if job is None or not may_start():
                    return
                future = self.client.submit(run_item_sync, portable, job, pure=False)
                running[self._outcome(future, job)] = future

        try:
            submit()
            while running:
                finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for waiter in finished:
                    running.pop(waiter)
                    yield waiter.result()
                submit()
        finally:
            for waiter, future in running.items():
                waiter.cancel()
                future.cancel()

    def _outcome(self, future: Any, job: MapJob) -> asyncio.Future[ItemResult]:
        """An asyncio future for the item's result; a failure on the cluster (a worker lost, a
        result that does not unpickle) becomes the item's error, like any other failure."""
        loop = asyncio.get_running_loop()
        if getattr(self.client, "asynchronous", False):
            return asyncio.ensure_future(_awaited(future, job))
        waiter: asyncio.Future[ItemResult] = loop.create_future()

        def settle(done: Any) -> None:  # on the client's thread, once the future is done
            loop.call_soon_threadsafe(_settle, waiter, done, job)

        future.add_done_callback(settle)
        return waiter


async def _awaited(future: Any, job: MapJob) -> ItemResult:
    try:
        result: ItemResult = await future
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return _failed(job, exc)
    return result


def _settle(waiter: asyncio.Future[ItemResult], done: Any, job: MapJob) -> None:
    if waiter.done():
        return
    try:
        waiter.set_result(done.result())
    except Exception as exc:  # raised by the task on the cluster, or a cancelled future
        waiter.set_result(_failed(job, exc))


def _failed(job: MapJob, exc: BaseException) -> ItemResult:
    error = ErrorInfo(
        code="executor_error",
        layer="run",
        message=f"The item could not run on the cluster: {type(exc).__name__}: {exc}",
        hint="Check the cluster's workers (their logs, and that ipyagent is installed there); run the "
        "map again with retry_failed=True to retry the item.",
    )
    return ItemResult(job.index, "failed", error=error)
