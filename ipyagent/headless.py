"""Executing notebooks headless, each in a fresh kernel of this Python, and saying what happened.

This module owns one notebook's execution and its :class:`NotebookReport`: which cells ran,
which one failed and how, which cells never ran, the models the kernel used, and the time it
took. ``python -m ipyagent run`` (:mod:`ipyagent.__main__`) parses the command line and prints
the reports; :func:`run_notebooks` runs several at once.

A report tells the truth about *this* run: outputs saved in the file by an earlier run are
cleared before the kernel starts, so a cell that did not run shows nothing rather than old
results.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .agentlib.atomic import atomic_write
from .kernel.cassettes import ENV_MODE
from .kernel.notebook_path import HEADLESS_ENV

__all__ = [
    "CellReport",
    "NotebookReport",
    "find_notebooks",
    "is_agent_cell",
    "run_notebook",
    "run_notebooks",
]

CellStatus = Literal["ran", "failed", "not run"]
#: Whether the kernel records its model to the notebook's cassette or answers from it.
Replay = Literal["record", "replay"] | None

#: How long the kernel is given to say which models it used once the cells are done.
_ASK_TIMEOUT = 10.0
_KERNEL_NAME = "ipyagent-run"


def is_agent_cell(source: str) -> bool:
    return source.lstrip().startswith("%%agent")


@dataclass
class CellReport:
    """One code cell of this run: its source, whether it ran, and its outputs or error as text."""

    index: int
    source: str
    status: CellStatus = "not run"
    outputs: list[dict[str, Any]] = field(default_factory=list)
    #: The failure as the user should read it: the error's traceback, a timeout, a dead kernel.
    error: str | None = None

    @property
    def agent(self) -> bool:
        return is_agent_cell(self.source)


@dataclass
class NotebookReport:
    path: Path
    cells: list[CellReport]
    seconds: float = 0.0
    #: The models the kernel's ``%%agent`` runs used, in the order they were first used.
    models: list[str] = field(default_factory=list)
    #: ``record`` or ``replay`` when the model was recorded or replayed; ``off`` otherwise.
    replay: str = "off"
    #: The kernel could not be started or the notebook could not be read.
    setup_error: str | None = None
    saved_to: Path | None = None
    #: Why the notebook was not saved although asked to (a cell failed while recording).
    not_saved: str | None = None

    @property
    def ok(self) -> bool:
        return self.setup_error is None and all(c.status == "ran" for c in self.cells)

    @property
    def failed_cell(self) -> CellReport | None:
        return next((c for c in self.cells if c.status == "failed"), None)


def find_notebooks(paths: Iterable[Path]) -> list[Path]:
    """The notebooks named, a folder standing for every notebook under it (checkpoints and
    hidden folders left out), each once, in the order given."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(
                sorted(
                    p
                    for p in path.rglob("*.ipynb")
                    if not any(part.startswith(".") for part in p.relative_to(path).parts)
                )
            )
        else:
            found.append(path)
    unique: dict[Path, Path] = {}
    for path in found:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


def _use_kernelspec() -> str:
    """Make a kernelspec for this very interpreter findable, so the notebook runs with what is
    installed here; returns its folder (the kernels' sockets go there too). Made once per
    process; the folder goes when the process ends."""
    global _SPEC_DIR
    if _SPEC_DIR is not None:
        return _SPEC_DIR.name
    _SPEC_DIR = tempfile.TemporaryDirectory(prefix="ipyagent-run-")
    spec = Path(_SPEC_DIR.name) / "kernels" / _KERNEL_NAME
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "ipyagent", "language": "python"})
    )
    # jupyter_client looks kernelspecs up through this variable, in this process.
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        p for p in (_SPEC_DIR.name, os.environ.get("JUPYTER_PATH")) if p
    )
    return _SPEC_DIR.name


_SPEC_DIR: tempfile.TemporaryDirectory[str] | None = None


def _kernel_env(path: Path, *, cassette: Replay, environ: Mapping[str, str]) -> dict[str, str]:
    env = dict(environ)
    # Always this notebook: started from another notebook's kernel, the variable names that one.
    env["JPY_SESSION_NAME"] = str(path.resolve())
    # No front end: the agent's notebook tools must not edit the file this run executes.
    env[HEADLESS_ENV] = "1"
    if cassette is not None:
        env[ENV_MODE] = cassette
    return env


#: Asked of the kernel after the last cell: which models its runs used, and the replay mode.
_MODELS_EXPRESSION = "__import__('ipyagent.kernel.extension', fromlist=['_']).run_summary()"


async def _ask_models(client: Any, report: NotebookReport, env: Mapping[str, str]) -> None:
    """Fill in which models the kernel's runs used, and whether they were recorded or replayed."""
    summary = await _kernel_summary(client.kc)
    report.models = [str(m) for m in summary.get("models", [])]
    report.replay = str(summary.get("replay") or env.get(ENV_MODE) or "off")


async def _kernel_summary(kc: Any) -> dict[str, Any]:
    msg_id = kc.execute("", silent=True, store_history=False, user_expressions={"s": _MODELS_EXPRESSION})
    deadline = time.monotonic() + _ASK_TIMEOUT
    try:
        while True:
            reply = await kc.get_shell_msg(timeout=max(0.0, deadline - time.monotonic()))
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                break
    except Exception:  # a dead or busy kernel: the report goes without the models
        return {}
    value = reply.get("content", {}).get("user_expressions", {}).get("s", {})
    if value.get("status") != "ok":
        return {}
    try:  # text/plain is the repr of the JSON string
        summary = json.loads(ast.literal_eval(value["data"]["text/plain"]))
    except (KeyError, ValueError, SyntaxError):
        return {}
    return summary if isinstance(summary, dict) else {}


def _cell_error(cell: Any) -> str | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            traceback = "\n".join(output.get("traceback", []))
            return traceback or f"{output.get('ename')}: {output.get('evalue')}"
    return None


async def run_notebook(
    path: Path,
    *,
    timeout: int = 900,
    cassette: Replay = None,
    output: Path | None = None,
    on_cell: Callable[[CellReport], None] | None = None,
) -> NotebookReport:
    """Execute ``path`` in a fresh kernel and report on every code cell.

    ``on_cell`` is called as each code cell ends (ran or failed). With ``cassette="record"``
    the kernel records its model requests to the notebook's cassette, and the notebook is saved
    (to ``output``, else in place) only if every cell ran; a failure leaves both as they were.
    With ``cassette="replay"`` the model answers from the cassette (offline, no key). Otherwise
    the notebook is saved only when ``output`` is given."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    started = time.monotonic()
    env = _kernel_env(path, cassette=cassette, environ=os.environ)
    try:
        nb = nbformat.read(str(path), as_version=4)  # type: ignore[no-untyped-call]
    except Exception as exc:
        return NotebookReport(path, [], setup_error=f"Could not read {path}: {exc}")
    cells = {i: CellReport(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    for index in cells:  # what an earlier run left is not this run's
        nb.cells[index].outputs = []
        nb.cells[index].execution_count = None
    # Widget state saved by an earlier run describes views whose outputs are replaced now.
    nb.metadata.pop("widgets", None)
    report = NotebookReport(path, list(cells.values()))
    record = cassette == "record"
    recorded = _cassette(path, env) if record else None
    kept = recorded.read_bytes() if recorded is not None and recorded.exists() else None

    def cell_done(cell: Any, cell_index: int, execute_reply: Any = None, **_: Any) -> None:
        done = cells[cell_index]
        done.outputs = list(cell.get("outputs", []))
        allowed = "raises-exception" in cell.get("metadata", {}).get("tags", [])
        failed = (execute_reply or {}).get("content", {}).get("status") == "error" and not allowed
        done.status = "failed" if failed else "ran"
        done.error = _cell_error(cell) if failed else None
        if on_cell is not None:
            on_cell(done)

    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=_KERNEL_NAME,
        resources={"metadata": {"path": str(path.parent)}},
        # A view's saved state carries its whole front-end bundle (~140 KB each); the run's
        # text is in the outputs anyway.
        store_widget_state=False,
        on_cell_executed=cell_done,
    )
    folder = _use_kernelspec()
    # Unix sockets rather than TCP: no port to collide with a parallel run's, and no warning
    # about unencrypted TCP on every kernel's stderr.
    client.km = client.create_kernel_manager()
    client.km.transport = "ipc"
    # The sockets' path prefix, unique per kernel (the default is one shared name in the
    # working directory, on which parallel runs collide).
    client.km.ip = os.path.join(folder, uuid.uuid4().hex[:12])
    running: list[int] = []
    client.on_cell_start = lambda cell, cell_index, **_: running.append(cell_index)
    try:
        async with client.async_setup_kernel(env=env):
            await _kernel_info(client)
            try:
                for index, cell in enumerate(nb.cells):
                    await client.async_execute_cell(
                        cell, index, execution_count=client.code_cells_executed + 1
                    )
            except CellExecutionError:
                await _ask_models(client, report, env)  # the kernel is idle again: it can say
                raise
            except CellTimeoutError:
                await _interrupt(client)
                raise
            await _ask_models(client, report, env)
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
        failing = cells.get(running[-1]) if running else None
        if failing is not None and failing.status != "failed":  # timed out, or the kernel died
            failing.status = "failed"
            failing.outputs = list(nb.cells[failing.index].outputs)
            failing.error = str(exc).strip() or type(exc).__name__
            if isinstance(exc, DeadKernelError):
                failing.error += "\nThe kernel died while this cell ran (out of memory, or a crash)."
            if on_cell is not None:
                on_cell(failing)
    except Exception as exc:  # the kernel did not start, or the client failed
        report.setup_error = f"{type(exc).__name__}: {exc}"
    report.seconds = time.monotonic() - started
    _save(report, nb, output=output, record=record, cassette=recorded, kept=kept)
    return report


async def _interrupt(client: Any) -> None:
    """Stop the cell that timed out and let the kernel answer it: a kernel shut down while
    busy prints a traceback of its own, which says nothing about the notebook."""
    await client.km.interrupt_kernel()
    deadline = time.monotonic() + _ASK_TIMEOUT
    with contextlib.suppress(Exception):  # no answer: it is shut down all the same
        while (await client.kc.get_shell_msg(timeout=deadline - time.monotonic()))[
            "msg_type"
        ] != "execute_reply":
            pass


async def _kernel_info(client: Any) -> None:
    msg_id = client.kc.kernel_info()
    info = await client.async_wait_for_reply(msg_id)
    if info is not None and "language_info" in info["content"]:
        client.nb.metadata["language_info"] = info["content"]["language_info"]


def _cassette(path: Path, env: Mapping[str, str]) -> Path:
    from .kernel.cassettes import ReplaySwitch

    return ReplaySwitch.from_env(env).cassette_path(path.resolve())


def _save(
    report: NotebookReport,
    nb: Any,
    *,
    output: Path | None,
    record: bool,
    cassette: Path | None,
    kept: bytes | None,
) -> None:
    import nbformat

    if cassette is not None and not report.ok:  # the notebook and its cassette stay a matching pair
        if kept is None:
            cassette.unlink(missing_ok=True)
        else:
            cassette.write_bytes(kept)
        report.not_saved = (
            f"Not saved: a cell failed, so {report.path.name} and {cassette.name} stay as they were."
        )
    elif output is not None or record:
        target = output or report.path
        atomic_write(target, nbformat.writes(nb) + "\n")  # type: ignore[no-untyped-call]
        report.saved_to = target


async def run_notebooks(
    paths: list[Path],
    *,
    jobs: int = 1,
    run: Callable[[Path], Awaitable[NotebookReport]],
    on_done: Callable[[NotebookReport], None] | None = None,
) -> list[NotebookReport]:
    """Run ``run(path)`` for every path, at most ``jobs`` at a time; reports in the given order.
    ``on_done`` is called as each one ends."""
    gate = asyncio.Semaphore(max(1, jobs))

    async def one(path: Path) -> NotebookReport:
        async with gate:
            report = await run(path)
        if on_done is not None:
            on_done(report)
        return report

    return list(await asyncio.gather(*(one(p) for p in paths)))
