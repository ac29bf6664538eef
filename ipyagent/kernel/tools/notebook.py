"""Tools on the notebook document: read its cells, insert, edit, delete and move them.

How edits reach the user:

- Where a page with ipyagent's JupyterLab extension shows this kernel's notebook, every edit of
  it changes the open document at once (:mod:`._live_edits`): addressed by cell id, guarded by
  the source the agent names (``old_source``; a move by the source the cell has just before),
  applied all or nothing, one undo step each, and stamped with the session, run and call in the
  cell's ``metadata.ipyagent``. A cell the user changed meanwhile is never overwritten: the
  result says so and asks for a re-read. The tools' arguments are the same in both modes.
- Elsewhere, ``insert_cell`` on the notebook this kernel belongs to proposes the cell through the
  kernel's ``set_next_input`` payload: the front end adds it below the running cell, in the
  user's own document, where nothing can be overwritten and the user sees it at once. (Front
  ends apply one such proposal per cell run, so several are joined into one cell.) Small models
  fill in an ``index`` they were not asked for; it applies only to another notebook's file.
- Every other edit is applied to the saved ``.ipynb`` with nbformat, atomically, and guarded
  against stale edits: it names the source it expects to replace, and is refused if the cell
  changed. A front end with the file open notices the change on disk and asks before
  overwriting it when the user saves, so unsaved work is never silently replaced. Each edit
  holds the file (:func:`~.file_lock.locked`) from its read to its write, so concurrent edits
  from other threads, agents or kernels are applied one after another and none is lost.
- A notebook saved before cell ids existed (nbformat 4.4) gets ids derived from each cell's
  content, the same at every read, and the first edit saves them (as nbformat 4.5).
- ``read_cells`` returns a page that fits a tool result, and says how to read on. Where a page
  with ipyagent's JupyterLab extension shows this kernel's notebook, it reads the open document
  instead of the file: unsaved edits, which cell the agent runs in, the active, selected and last
  failed cells (:mod:`._live_cells`, which also says how each mode is told in the result).

A notebook run headless (``headless``: ``python -m ipyagent run``, pytest's nbval) is executed
from a copy in memory, and its file is that run's input: a test run must not change the notebook
it tests. So there, this kernel's own notebook is never written: every insert is a proposal,
other edits are refused, and ``read_cells`` leaves out saved outputs, which come from an earlier
run (a recorded conversation would otherwise differ from its replay).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...agentlib.atomic import atomic_write
from ...agentlib.tools import RunContext, Tool, ToolOutput, tool
from ...agentlib.workers import tool_workers
from ..history import runs_an_agent
from ..live_protocol import CellOutputsParams, DeleteOp, InsertOp, MoveOp, Provenance, ReplaceOp
from ..runner import MainThread
from ._live_cells import changed_by
from ._live_edits import LIVE, apply_live, edit_mode
from .file_lock import locked
from .files import WorkspaceError, resolve_inside

if TYPE_CHECKING:
    from ..live_notebook import LiveNotebook
    from ._cell_runs import CellRunner

__all__ = ["notebook_tools"]

OUTPUT_CAP = 1_500


async def _nobody(_question: str, _choices: list[str]) -> str | None:
    return None


#: The run context of a tool called directly (in a cell, in a test), not by an agent's run.
OUTSIDE_A_RUN = RunContext(run_id="", call_id="", tool_name="", _ask=_nobody)
#: Characters of cells in one read_cells page: below the tool-result limit (30k by default),
#: so a page is never cut where the model cannot see how to go on.
PAGE_CHARS = 20_000


def _load(path: Path) -> Any:
    import nbformat

    if not path.exists():
        raise WorkspaceError(f"No notebook at {path}.")
    nb = nbformat.reads(_read_regular(path), as_version=4)
    _give_ids(nb)
    return nb


def _read_regular(path: Path) -> str:
    """The file's text, if it is a regular file: opening a named pipe would block the tool."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WorkspaceError(f"{path.name} is not a regular file; only notebook files are read.")
        os.set_blocking(fd, True)
        with open(fd, "rb", closefd=False) as file:
            return file.read().decode("utf-8")
    finally:
        os.close(fd)


def _give_ids(nb: Any) -> None:
    """Give cells without an id (nbformat 4.4 and older) one derived from their content.

    nbformat's own upgrade picks random ids: they would differ between ``read_cells`` and the
    edit that follows it. These are the same at every read until the first edit saves them.
    """
    if nb.nbformat == 4 and nb.nbformat_minor < 5:
        nb.nbformat_minor = 5  # 4.5 added the ids and nothing else
    used = {cell.get("id") for cell in nb.cells}
    for cell in nb.cells:
        if cell.get("id"):
            continue
        digest = hashlib.sha1(f"{cell.cell_type}\0{cell.source}".encode()).hexdigest()[:8]
        candidate, n = f"cell-{digest}", 1
        while candidate in used:  # cells with the same content: numbered in order
            n += 1
            candidate = f"cell-{digest}-{n}"
        cell.id = candidate
        used.add(candidate)


def _save(path: Path, nb: Any) -> None:
    import nbformat

    nbformat.validate(nb)
    atomic_write(path, nbformat.writes(nb) + "\n")


def _find(nb: Any, cell_id: str) -> int:
    for index, cell in enumerate(nb.cells):
        if cell.get("id") == cell_id:
            return index
    ids = ", ".join(c.get("id", "?") for c in nb.cells[:30])
    raise WorkspaceError(f"No cell with id {cell_id!r}. Cell ids: {ids}. Call read_cells again.")


def _outputs_text(cell: Any) -> str:
    parts: list[str] = []
    for output in cell.get("outputs", []):
        kind = output.get("output_type")
        if kind == "stream":
            parts.append(output.get("text", ""))
        elif kind == "error":
            parts.append(f"{output.get('ename')}: {output.get('evalue')}")
        elif kind in ("execute_result", "display_data"):
            data = output.get("data", {})
            parts.append(data.get("text/plain", f"({', '.join(sorted(data))})"))
    text = "".join(p if p.endswith("\n") else p + "\n" for p in parts).rstrip()
    return text if len(text) <= OUTPUT_CAP else text[:OUTPUT_CAP] + "\n… (output truncated)"


def _cell_text(index: int, cell: Any, with_outputs: bool) -> str:
    head = f"[{index}] id={cell.id} {cell.cell_type}"
    notes = []
    if cell.cell_type == "code" and cell.get("execution_count"):
        notes.append(f"ran as In [{cell.execution_count}]")
    stamp = cell.get("metadata", {}).get("ipyagent")
    if isinstance(stamp, dict):  # saved from the live notebook, where one of ipyagent's edits changed it
        notes.append(changed_by(stamp.get("run") if isinstance(stamp.get("run"), str) else None))
    if notes:
        head += f" ({'; '.join(notes)})"
    part = f"{head}\n{cell.source}"
    outputs = _outputs_text(cell) if with_outputs and cell.cell_type == "code" else ""
    return f"{part}\n--- output ---\n{outputs}" if outputs else part


_HEADLESS = (
    "This notebook is being run headless (`python -m ipyagent run`, pytest --nbval), from a copy in "
    "memory; its file is that run's input and is not edited."
)


def notebook_tools(
    shell: Any,
    main: MainThread,
    notebook: Path | None,
    *,
    headless: bool = False,
    live: LiveNotebook | None = None,
    cell_id: str | None = None,
    session: str | None = None,
    cells: CellRunner | None = None,
    code_in_cells: bool = False,
) -> list[Tool]:
    """The notebook tools of one run. ``live``: the channel to the pages showing this kernel's
    notebook (the tools read and edit the open document through it when a page is connected);
    ``cell_id``: the cell the run is in, if any; ``session``: the conversation's session file
    name, stamped with the run and the call on every cell the run changes in the open document;
    ``cells``: what runs a cell for ``run_cell`` (not offered without it); ``code_in_cells``:
    also offer ``run_new_cell``, the agent's code as cells the user sees (``%%agent --cells``)."""
    proposals: list[str] = []
    #: Ids of the cells this run inserted into the live notebook, in order.
    inserted: list[str] = []

    def this_notebook(file: Path) -> bool:
        return notebook is not None and file.resolve() == notebook.resolve()

    def runs_from_memory(file: Path) -> bool:
        return headless and this_notebook(file)

    def writable(path: str | None) -> Path:
        file = target(path)
        if runs_from_memory(file):
            raise WorkspaceError(f"{_HEADLESS} Propose new code with insert_cell instead.")
        return file

    def target(path: str | None) -> Path:
        if path:  # confined like the file tools: the notebook's folder is the workspace
            return resolve_inside(notebook.parent if notebook else Path.cwd(), path)
        if notebook is None:
            raise WorkspaceError(
                "This kernel does not know its notebook (it was not started by Jupyter Server); "
                "pass the notebook's path."
            )
        return notebook

    def read_cells(path: str | None = None, start: int = 0, limit: int | None = None) -> str:
        """Read a notebook's cells: index, id, type, source and (trimmed) saved outputs. A long
        notebook comes in pages; the end of a page says where the next one starts.

        Args:
            path: Notebook path; default: the notebook this kernel belongs to (as last saved).
            start: Index of the first cell to show (0 = first).
            limit: At most this many cells (default: as many as fit in one page).
        """
        note = ""
        if live is not None and not headless and (path is None or this_notebook(target(path))):
            from ._live_cells import read_live

            page, note = read_live(
                live,
                start=start,
                limit=limit,
                own_cell_id=cell_id,
                output_chars=OUTPUT_CAP,
                page_chars=PAGE_CHARS,
                again=lambda i: f"path={path!r}, start={i}" if path else f"start={i}",
            )
            if page is not None:
                return page
        file = target(path)
        nb = _load(file)
        total = len(nb.cells)
        if total and not 0 <= start < total:
            raise WorkspaceError(f"start must be from 0 to {total - 1}: the notebook has {total} cells.")
        with_outputs = not runs_from_memory(file)
        parts = [note] if note else []
        if not with_outputs:
            parts.append(f"({_HEADLESS} Saved outputs are left out: they are from an earlier run.)")
        end = total if limit is None else min(total, start + max(1, limit))
        index, size = start, 0
        while index < end:
            part = _cell_text(index, nb.cells[index], with_outputs)
            if index > start and size + len(part) > PAGE_CHARS:
                break
            parts.append(part)
            size += len(part) + 2
            index += 1
        if index < total:
            again = f"path={path!r}, start={index}" if path else f"start={index}"
            parts.append(
                f"(cells {start} to {index - 1} of {total} cells shown; read on with read_cells({again}))"
            )
        if note and not total:
            parts.append("(the notebook has no cells)")
        return "\n\n".join(parts) or "(the notebook has no cells)"

    def live_here(path: str | None) -> tuple[bool, str]:
        """Whether an edit of ``path`` goes to the live notebook; else the note that opens the
        saved-file result ("" where no page is connected)."""
        if headless or live is None or not (path is None or this_notebook(target(path))):
            return False, ""
        return edit_mode(live)

    def provenance(run: RunContext) -> Provenance:
        return Provenance(session=session, run=run.run_id, call=run.call_id)

    def noted(note: str, text: str) -> str:
        return f"{note}\n\n{text}" if note else text

    async def insert_cell(
        source: str,
        cell_type: str = "code",
        index: int | None = None,
        path: str | None = None,
        run: RunContext = OUTSIDE_A_RUN,
    ) -> str:
        """Add a cell. In this notebook it is proposed right below the running cell, where the
        user sees it at once; in another notebook (``path``) it is inserted at ``index``.

        Args:
            source: The new cell's content.
            cell_type: "code" or "markdown".
            index: Only with ``path``: the position in that notebook (0 = first; default: last).
            path: Another notebook to add the cell to (default: this one).

        Notes:
            With the live notebook, the cell is inserted into the open document below the cell
            this run is in (after the cells this run inserted before), or at the end.
        """
        if cell_type not in ("code", "markdown"):
            raise WorkspaceError('cell_type must be "code" or "markdown".')
        is_live, note = live_here(path)
        if is_live:
            assert live is not None
            return await asyncio.to_thread(insert_live, live, source, cell_type, run)
        if path is None or this_notebook(target(path)):
            text = source if cell_type == "code" else f"%%markdown\n{source}"
            proposals.append(text)
            joined = "\n\n".join(proposals)
            await main.run(lambda: shell.set_next_input(joined, replace=False))
            if headless:
                return (
                    "Proposed the cell below the current one (this run is headless: the notebook "
                    "file is not changed)."
                )
            return noted(note, "Proposed the cell below the current one; the user sees it in the notebook.")
        # In a worker: the lock may wait for another process, and this coroutine is on the loop.
        return await tool_workers().run(
            insert_saved, (target(path), source, cell_type, index), label="insert_cell"
        )

    def insert_saved(file: Path, source: str, cell_type: str, index: int | None) -> str:
        import nbformat

        with locked(file):
            nb = _load(file)
            position = len(nb.cells) if index is None else max(0, min(index, len(nb.cells)))
            make = nbformat.v4.new_code_cell if cell_type == "code" else nbformat.v4.new_markdown_cell
            cell = make(source)
            nb.cells.insert(position, cell)
            _save(file, nb)
        return f"Inserted a {cell_type} cell with id {cell.id} at index {position} of {file.name}."

    def insert_live(live: LiveNotebook, source: str, cell_type: str, run: RunContext) -> str:
        # Below the run's own cell, after what this run inserted before: in the order asked.
        anchor = inserted[-1] if inserted else cell_id
        op = InsertOp(op="insert", cell_type="code" if cell_type == "code" else "markdown", source=source)
        if anchor is not None:
            op["after_id"] = anchor
        try:
            answer = apply_live(live, [op], provenance(run))
        except WorkspaceError:
            if anchor is None:
                raise
            del op["after_id"]  # the cell it was to follow is gone: at the end instead
            answer = apply_live(live, [op], provenance(run))
        [cell] = answer.cells
        inserted.append(cell.cell_id)
        return f"Inserted a {cell_type} cell with id {cell.cell_id} at index {cell.index} of {LIVE}."

    def edit_cell(
        cell_id: str,
        old_source: str,
        new_source: str,
        path: str | None = None,
        run: RunContext = OUTSIDE_A_RUN,
    ) -> str:
        """Replace a cell's whole source. Refused if the cell no longer holds ``old_source``.

        Args:
            cell_id: The cell's id (from read_cells).
            old_source: The source you expect the cell to have now, exactly.
            new_source: Its new source.
            path: Notebook path (default: this one).

        Notes:
            With the live notebook, the guard is checked against the open document (unsaved
            edits included); outputs stay until the cell runs again.
        """
        is_live, note = live_here(path)
        if is_live:
            assert live is not None
            op = ReplaceOp(op="replace", cell_id=cell_id, expect=old_source, source=new_source)
            [cell] = apply_live(live, [op], provenance(run)).cells
            return f"Edited cell {cell_id} (at index {cell.index}) in {LIVE}."
        file = writable(path)
        with locked(file):
            nb = _load(file)
            cell = nb.cells[_find(nb, cell_id)]
            if cell.source != old_source:
                raise WorkspaceError(
                    f"Cell {cell_id} changed since you read it; nothing was edited. "
                    f"Its source now:\n{cell.source}"
                )
            cell.source = new_source
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
            _save(file, nb)
        return noted(note, f"Edited cell {cell_id} in the saved file {file.name}.")

    def delete_cell(
        cell_id: str, old_source: str, path: str | None = None, run: RunContext = OUTSIDE_A_RUN
    ) -> str:
        """Delete a cell. Refused if it no longer holds ``old_source``.

        Args:
            cell_id: The cell's id (from read_cells).
            old_source: The source you expect the cell to have, exactly.
            path: Notebook path (default: this one).
        """
        is_live, note = live_here(path)
        if is_live:
            assert live is not None
            op = DeleteOp(op="delete", cell_id=cell_id, expect=old_source)
            apply_live(live, [op], provenance(run))
            return f"Deleted cell {cell_id} from {LIVE}."
        file = writable(path)
        with locked(file):
            nb = _load(file)
            index = _find(nb, cell_id)
            if nb.cells[index].source != old_source:
                raise WorkspaceError(f"Cell {cell_id} changed since you read it; nothing was deleted.")
            del nb.cells[index]
            _save(file, nb)
        return noted(
            note, f"Deleted cell {cell_id} (it was at index {index}) from the saved file {file.name}."
        )

    def move_cell(
        cell_id: str, to_index: int, path: str | None = None, run: RunContext = OUTSIDE_A_RUN
    ) -> str:
        """Move a cell to another position.

        Args:
            cell_id: The cell's id (from read_cells).
            to_index: Its new index (0 = first).
            path: Notebook path (default: this one).

        Notes:
            With the live notebook, the index is taken in the document as it is now, and the move
            is sent as "after cell X" so that a cell the user adds meanwhile does not shift it.
        """
        is_live, note = live_here(path)
        if is_live:
            assert live is not None
            return move_live(live, cell_id, to_index, run)
        file = writable(path)
        with locked(file):
            nb = _load(file)
            cell = nb.cells.pop(_find(nb, cell_id))
            position = max(0, min(to_index, len(nb.cells)))
            nb.cells.insert(position, cell)
            _save(file, nb)
        return noted(note, f"Moved cell {cell_id} to index {position} of the saved file {file.name}.")

    def move_live(live: LiveNotebook, cell_id: str, to_index: int, run: RunContext) -> str:
        from ..live_document import LiveNotebookError

        # A move overwrites nothing: its guard is the source the cell has now, read just before.
        try:
            doc = live.read(max_output_chars=0)
        except LiveNotebookError as exc:
            raise WorkspaceError(f"Nothing was moved: {exc}") from exc
        cell = doc.cell(cell_id)
        if cell is None:
            ids = ", ".join(c.id for c in doc.cells[:30])
            raise WorkspaceError(f"No cell with id {cell_id!r}. Cell ids: {ids}. Call read_cells again.")
        rest = [c.id for c in doc.cells if c.id != cell_id]
        position = max(0, min(to_index, len(rest)))
        after = rest[position - 1] if position > 0 else None
        op = MoveOp(op="move", cell_id=cell_id, expect=cell.source, after_id=after)
        [moved] = apply_live(live, [op], provenance(run)).cells
        where = f"after cell {after}" if after is not None else "at the top"
        return f"Moved cell {cell_id} to index {moved.index} ({where}) of {LIVE}."

    async def run_cell(cell_id: str, timeout: float = 120, run: RunContext = OUTSIDE_A_RUN) -> ToolOutput:
        """Run a code cell of this notebook as the user would, and read its outputs (text, the
        result, an error with its traceback, figures). In the open notebook the outputs land in
        that cell with its execution count, and the user sees them as it runs.

        Args:
            cell_id: The cell's id (read_cells shows it).
            timeout: Seconds after which the cell is interrupted; you then get what it printed
                until then.
        """
        assert cells is not None
        if cell_id == own_cell:
            raise WorkspaceError(f"Cell {cell_id} is the cell this run is in: it cannot run itself.")
        is_live, note = live_here(None)
        source, where = None, ""
        if is_live:
            assert live is not None
            source, note = await asyncio.to_thread(live_source, live, cell_id)
            is_live = source is not None
        if source is None:
            file = target(None)
            nb = _load(file)
            cell = nb.cells[_find(nb, cell_id)]
            if cell.get("cell_type") != "code":
                raise WorkspaceError(
                    f"Cell {cell_id} is a {cell.get('cell_type')} cell: only code cells run."
                )
            source = str(cell.get("source", ""))
            where = (
                f"(this run is headless: cell {cell_id} ran from {file.name} as saved; the file is not "
                "changed)"
                if headless
                else noted(
                    note,
                    f"(cell {cell_id} ran from the saved file {file.name}; its outputs "
                    "are shown here, not in the cell: no page shows the notebook live)",
                )
            )
        if runs_an_agent(source):
            raise WorkspaceError(
                f"Cell {cell_id} runs an agent (%%agent or %agent): an agent run cannot start "
                "another from inside it. Ask the user to run that cell."
            )
        send = None
        if is_live and live is not None:
            notify = live.notify_cell_outputs

            def send(params: CellOutputsParams) -> bool:
                # The run is named so that an undo of it puts back the outputs the cell had.
                return notify(CellOutputsParams(**params, run=run.run_id) if run.run_id else params)

        timeout = max(1.0, min(float(timeout), 3600.0))
        output = await cells.run(cell_id, source, send=send, timeout=timeout, run=run)
        head = f"Ran cell {cell_id} in {LIVE}: its outputs are in the cell." if is_live else where
        return ToolOutput(
            text=f"{head}\n{output.text}",
            is_error=output.is_error,
            display=output.display,
            images=output.images,
        )

    async def run_new_cell(code: str, timeout: float = 120, run: RunContext = OUTSIDE_A_RUN) -> ToolOutput:
        """Run Python code in the user's live namespace as a new cell of the notebook, below the
        cells this run added: the user sees the code and its outputs in the notebook, so every
        result shows how it was made. Returns what it printed, its result and any error.

        Args:
            code: Python source. Notebook magics such as %timeit work too.
            timeout: Seconds after which the cell is interrupted; you then get what it printed
                until then.
        """
        assert cells is not None
        is_live, note = live_here(None)
        timeout = max(1.0, min(float(timeout), 3600.0))
        if is_live:
            assert live is not None
            try:
                head = await asyncio.to_thread(insert_live, live, code, "code", run)
            except WorkspaceError as exc:
                is_live, note = False, f"(not added to the live notebook: {exc})"
            else:
                new_id = inserted[-1]
                notify = live.notify_cell_outputs
                output = await cells.run(new_id, code, send=notify, timeout=timeout, run=run)
                return ToolOutput(
                    text=f"{head} It ran; its outputs are in the cell.\n{output.text}",
                    is_error=output.is_error,
                    images=output.images,
                )
        output = await cells.run("", code, send=None, timeout=timeout, run=run)
        where = (
            "(ran in the kernel; this run is headless, so no cell was added)"
            if headless
            else noted(note, "(ran in the kernel; no page shows the notebook live, so no cell was added)")
        )
        return ToolOutput(
            text=f"{where}\n{output.text}",
            is_error=output.is_error,
            display=output.display,
            images=output.images,
        )

    def live_source(live: LiveNotebook, cell_id: str) -> tuple[str | None, str]:
        """The cell's source in the open document; ``(None, note)`` to fall back on the file."""
        from ..live_document import LiveNotebookError

        try:
            doc = live.read(max_output_chars=0)
        except LiveNotebookError as exc:
            return None, f"(saved file, not the live notebook: {exc})"
        cell = doc.cell(cell_id)
        if cell is None:
            ids = ", ".join(c.id for c in doc.cells[:30])
            raise WorkspaceError(f"No cell with id {cell_id!r}. Cell ids: {ids}. Call read_cells again.")
        if cell.cell_type != "code":
            raise WorkspaceError(f"Cell {cell_id} is a {cell.cell_type} cell: only code cells run.")
        return cell.source, ""

    own_cell = cell_id
    tools = [
        tool(read_cells, read_only=True),
        tool(insert_cell),
        tool(edit_cell),
        tool(delete_cell),
        tool(move_cell),
    ]
    if cells is not None:
        tools.append(tool(run_cell))
        if code_in_cells:
            tools.append(tool(run_new_cell))
    return tools
