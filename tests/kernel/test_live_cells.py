"""How read_cells shows a page of the live document: outputs as the user sees them now, and the
cells the agent must be able to tell apart. Pure: a document the page could have sent, in; the
tool's text, out (the channel itself is tested in test_live_notebook.py)."""

from __future__ import annotations

from typing import Any

from ipyagent.kernel.live_document import LiveDocument
from ipyagent.kernel.tools._live_cells import CELL_OUTPUT_CAP, _page


def page_of(cells: list[dict[str, Any]], **document: Any) -> str:
    doc = LiveDocument.model_validate({"path": "a.ipynb", "dirty": False, "cells": cells, **document})
    return _page(doc, document.get("own"), 20_000, lambda i: f"start={i}")


def code(cell_id: str, source: str, outputs: list[dict[str, Any]], count: int | None = 1) -> dict[str, Any]:
    cell = {"id": cell_id, "cell_type": "code", "source": source}
    return cell | {"execution_count": count, "outputs": outputs}


def test_outputs_are_shown_as_the_user_sees_them() -> None:
    outputs = [
        {"type": "stream", "name": "stdout", "text": "tail of the log\n", "omitted": 4000},
        {"type": "result", "text": "   a\n0  1", "mime_types": ["text/html", "text/plain"]},
        {"type": "display", "text": "<Figure size 640x480>", "mime_types": ["image/png", "text/plain"]},
        {"type": "display", "text": "", "mime_types": ["image/svg+xml"]},
        {"type": "display", "text": "", "mime_types": ["application/vnd.custom+json"]},
        {"type": "unknown", "output_type": "future_kind"},
    ]
    text = page_of([code("c1", "run()", outputs)])
    assert text.endswith(
        "[0] id=c1 code (ran as In [1])\nrun()\n--- output ---\n"
        "… (4000 characters before left out)\ntail of the log\n"
        "   a\n0  1\n"
        "<Figure size 640x480>\n(image shown)\n"
        "(image shown)\n"
        "(application/vnd.custom+json)\n"
        "(an output of type future_kind)"
    )


def test_an_error_shows_its_name_message_and_the_end_of_its_traceback() -> None:
    error = {
        "type": "error",
        "ename": "ZeroDivisionError",
        "evalue": "division by zero",
        "traceback": "----> 1 1 / 0\n\nZeroDivisionError: division by zero",
        "omitted": 900,
    }
    text = page_of(
        [code("ok", "1", [], count=7), code("bad", "1 / 0", [error], count=3)], active_cell_id="ok"
    )
    assert "Failed last: cell [1] id=bad (ZeroDivisionError: division by zero).)" in text
    assert text.endswith(
        "[1] id=bad code (ran as In [3]; failed last)\n1 / 0\n--- output ---\n"
        "ZeroDivisionError: division by zero\n"
        "Traceback (its last 50 characters):\n----> 1 1 / 0\n\nZeroDivisionError: division by zero"
    )


def test_a_cells_long_output_keeps_its_start_and_its_end() -> None:
    stream = {"type": "stream", "name": "stdout", "text": "s" * 5000}
    error = {"type": "error", "ename": "KeyError", "evalue": "'x'", "traceback": ""}
    text = page_of([code("c1", "work()", [stream, error])])
    output = text.split("--- output ---\n", 1)[1]
    assert output.startswith("s" * 1000 + "\n… (")
    assert output.endswith("s" * 100 + "\nKeyError: 'x'")
    assert len(output) < CELL_OUTPUT_CAP + 100


def test_the_header_tells_the_agents_cell_the_users_cells_and_the_others_running() -> None:
    cells = [code(f"c{i}", f"x{i}", [], count=None) for i in range(3)]
    document = {
        "start": 20,
        "total": 40,
        "own": "c1",
        "active_cell_id": "c30",
        "selected_cell_ids": ["c30", "c31", "c32"],
        "running_cell_ids": ["c1", "c35", "c36"],
        "index_of": {"c30": 30, "c31": 31, "c32": 32, "c35": 35, "c36": 36, "c1": 21},
        "dirty": True,
    }
    text = page_of(cells, **document)
    assert text.startswith(
        "(live document: a.ipynb as the user sees it now, with unsaved changes; 40 cells.\n"
        "This agent runs in cell [21] id=c1.\n"
        "The user is on cell [30] id=c30; selected: [30] id=c30, [31] id=c31, [32] id=c32.\n"
        "Running or queued: [35] id=c35, [36] id=c36.)\n\n"
        "[20] id=c0 code\nx0\n\n[21] id=c1 code (running; this agent's cell)\nx1\n\n[22] id=c2 code\nx2\n\n"
    )
    assert text.endswith("(cells 20 to 22 of 40 cells shown; read on with read_cells(start=23))")


def test_an_empty_notebook() -> None:
    assert page_of([]).endswith("0 cells.)\n\n(the notebook has no cells)")


def test_a_cell_changed_by_ipyagent_says_so() -> None:
    stamp = {"session": "a.agent.jsonl", "run": "r-7", "call": "call_1"}
    text = page_of([code("c1", "total = 2", [], count=None) | {"provenance": stamp}, code("c2", "x", [])])
    assert "[0] id=c1 code (changed by ipyagent, run r-7)\ntotal = 2" in text
    assert "[1] id=c2 code (ran as In [1])\nx" in text
