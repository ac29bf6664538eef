"""``read_cells`` on the live document: the open notebook as the user sees it, read from the page.

:func:`read_live` asks the page (through :class:`~..live_notebook.LiveNotebook`) for the range of
cells that fits one tool result and shows it as the saved-file reader shows a page of the file,
with what only the open document knows: unsaved edits, which cell the agent runs in, which one
the user is on or selected, which failed last, and outputs as they are now (stream tails, results,
errors with their traceback, "image shown").

Which mode applies, said in every result:

- a compatible page is connected: the live document; the result opens with "(live document: …)";
- a page speaks another protocol, or did not answer: the saved file, with a first line saying why
  and what to do (reload the page, restart the kernel);
- no page (nbclient, nbval, VS Code, Colab, terminal IPython): the saved file, and the result is
  exactly what it was before the live document existed: recorded conversations replay unchanged.

"The cell the agent runs in" is the cell named by the kernel's own execute request (JupyterLab and
Notebook 7 put the cell's id in its metadata), not the page's running flag: JupyterLab marks every
cell of a Run All as running at once, so the flag cannot tell the agent's cell from queued ones,
and a ``%%agent`` run from a console is in no cell at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from typing_extensions import assert_never

from .files import WorkspaceError

if TYPE_CHECKING:
    from ..live_document import LiveCell, LiveDocument, LiveOutput
    from ..live_notebook import LiveNotebook

__all__ = ["read_live"]

#: Characters of one cell's outputs shown: its start and its end (where an error is) are kept.
CELL_OUTPUT_CAP = 3_000
#: Selected cells listed one by one in the header; more are shown as a range.
_LISTED = 5


def read_live(
    live: LiveNotebook,
    *,
    start: int,
    limit: int | None,
    own_cell_id: str | None,
    output_chars: int,
    page_chars: int,
    again: Callable[[int], str],
) -> tuple[str | None, str]:
    """``(page, "")`` read from the live document; else ``(None, note)``: the caller reads the
    saved file and opens its result with ``note`` ("" when no page is connected, so that the
    result is the saved-file one, unchanged). ``again(i)`` gives read_cells' arguments that read
    on from cell ``i``."""
    from ..live_document import LiveNotebookError
    from ..live_notebook import Mismatched, NoPage

    live.settle()
    state = live.state()
    if isinstance(state, NoPage):
        return None, ""
    if isinstance(state, Mismatched):
        return None, f"(saved file, not the live document: {state.message})"
    try:
        doc = live.read(
            max_output_chars=output_chars,
            start=start,
            limit=None if limit is None else max(1, limit),
            page_chars=page_chars,
        )
    except LiveNotebookError as exc:
        why = str(exc)  # its hint included
        return None, f"(saved file, not the live document, which could not be read: {why})"
    if doc.total and not 0 <= start < doc.total:
        raise WorkspaceError(f"start must be from 0 to {doc.total - 1}: the notebook has {doc.total} cells.")
    return _page(doc, own_cell_id, page_chars, again), ""


def _page(doc: LiveDocument, own: str | None, page_chars: int, again: Callable[[int], str]) -> str:
    parts = [_header(doc, own)]
    size, shown = 0, 0
    for offset, cell in enumerate(doc.cells):
        part = _cell_text(doc, doc.start + offset, cell, own)
        if offset > 0 and size + len(part) > page_chars:
            break
        parts.append(part)
        size += len(part) + 2
        shown += 1
    end = doc.start + shown
    if not doc.total:
        parts.append("(the notebook has no cells)")
    elif end < doc.total:
        shown_range = f"cells {doc.start} to {end - 1} of {doc.total} cells shown"
        parts.append(f"({shown_range}; read on with read_cells({again(end)}))")
    return "\n\n".join(parts)


def _where(doc: LiveDocument, cell_id: str) -> str:
    index = doc.index(cell_id)
    return f"id={cell_id}" if index is None else f"[{index}] id={cell_id}"


def _header(doc: LiveDocument, own: str | None) -> str:
    saved = "with unsaved changes" if doc.dirty else "all saved"
    client = f" in {doc.client}" if doc.client else ""
    lines = [f"(live document: {doc.path} as the user sees it now{client}, {saved}; {doc.total} cells."]
    if own is not None and doc.index(own) is not None:
        lines.append(f"This agent runs in cell {_where(doc, own)}.")
    if doc.active_cell_id is not None:
        line = f"The user is on cell {_where(doc, doc.active_cell_id)}"
        selected = list(doc.selected_cell_ids)
        if selected and selected != [doc.active_cell_id]:
            line += f"; selected: {_selection(doc, selected)}"
        lines.append(line + ".")
    failed = doc.last_failed_cell_id
    if failed is not None:
        cell = doc.cell(failed)
        error = cell.error if cell is not None else None
        what = f" ({error.ename}: {_one_line(error.evalue)})" if error is not None else ""
        lines.append(f"Failed last: cell {_where(doc, failed)}{what}.")
    others = [c for c in doc.running_cell_ids if c != own]
    if others:
        shown = ", ".join(_where(doc, c) for c in others[:_LISTED])
        more = f" and {len(others) - _LISTED} more" if len(others) > _LISTED else ""
        lines.append(f"Running or queued: {shown}{more}.")
    return "\n".join(lines) + ")"


def _selection(doc: LiveDocument, selected: list[str]) -> str:
    if len(selected) <= _LISTED:
        return ", ".join(_where(doc, c) for c in selected)
    return f"{len(selected)} cells, {_where(doc, selected[0])} to {_where(doc, selected[-1])}"


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit] + "…"


def _cell_text(doc: LiveDocument, index: int, cell: LiveCell, own: str | None) -> str:
    notes = []
    if cell.id == own:
        notes.append("running; this agent's cell")
    elif cell.id in doc.running_cell_ids:
        notes.append("running or queued")
    elif cell.execution_count:
        notes.append(f"ran as In [{cell.execution_count}]")
    if cell.id == doc.active_cell_id:
        notes.append("the user's active cell")
    elif cell.id in doc.selected_cell_ids:
        notes.append("selected")
    if cell.id == doc.last_failed_cell_id:
        notes.append("failed last")
    if cell.provenance is not None:
        notes.append(changed_by(cell.provenance.run))
    head = f"[{index}] id={cell.id} {cell.cell_type}" + (f" ({'; '.join(notes)})" if notes else "")
    outputs = _outputs_text(cell.outputs) if cell.cell_type == "code" else ""
    part = f"{head}\n{cell.source}"
    return f"{part}\n--- output ---\n{outputs}" if outputs else part


def changed_by(run: str | None) -> str:
    """The note on a cell one of ipyagent's edits changed (its ``metadata.ipyagent``)."""
    return f"changed by ipyagent, run {run}" if run else "changed by ipyagent"


def _outputs_text(outputs: tuple[LiveOutput, ...]) -> str:
    from ..live_document import ErrorOutput, ResultOutput, StreamOutput, UnknownOutput

    parts: list[str] = []
    for output in outputs:
        if isinstance(output, StreamOutput):
            left_out = f"… ({output.omitted} characters before left out)\n" if output.omitted else ""
            parts.append(left_out + output.text)
        elif isinstance(output, ResultOutput):
            text = output.text + (f"\n… ({output.omitted} more characters)" if output.omitted else "")
            if output.shows_image:
                text = f"{text}\n(image shown)" if text else "(image shown)"
            elif not text:
                text = f"({', '.join(output.mime_types)})" if output.mime_types else "(empty output)"
            parts.append(text)
        elif isinstance(output, ErrorOutput):
            text = f"{output.ename}: {output.evalue}"
            if output.traceback:
                tail = f" (its last {len(output.traceback)} characters)" if output.omitted else ""
                text += f"\nTraceback{tail}:\n{output.traceback}"
            parts.append(text)
        elif isinstance(output, UnknownOutput):
            parts.append(f"(an output of type {output.output_type})")
        else:
            assert_never(output)
    text = "".join(p if p.endswith("\n") else p + "\n" for p in parts).rstrip()
    if len(text) <= CELL_OUTPUT_CAP:
        return text
    first = CELL_OUTPUT_CAP // 3
    last = CELL_OUTPUT_CAP - first
    cut = len(text) - first - last
    return f"{text[:first]}\n… ({cut} characters of output left out) …\n{text[-last:]}"
