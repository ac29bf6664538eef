"""Each run is a checkpoint, in a real JupyterLab: "Undo run" on the bar of a run's changes puts
back what the run did to the cells (sources, order, a deleted cell with its output, an inserted
cell removed), leaves a cell the user changed since as it is and says so, and says that the
kernel's variables are not rolled back. A cell the user kept stays; after Keep all, nothing is
left to undo. ``%agent undo`` does the same from the kernel.
Screenshots go to tests/browser/screenshots/undo_run/."""

from __future__ import annotations

from typing import Any

from conftest import (
    Lab,
    document,
    open_notebook,
    output_of,
    run_by_id,
    screenshot,
    sources,
    type_into,
    write_cells,
)
from test_live_edits_in_lab import EDITING_AGENT

# One run of the agent: an edit, an insert, a move and a delete, each its own tool call.
AGENT = EDITING_AGENT
RUN = "%%agent -m m --yes --tools notebook\nTidy up my notebook."
BEFORE = [
    ("c-setup", AGENT),
    ("c-total", "total = 1 + 1"),
    ("c-print", "print(total)"),
    ("c-import", "import math"),
    ("c-agent", RUN),
    ("c-undo", "%agent undo"),
]


def bar(page: Any) -> Any:
    return page.locator(".jp-ipyagent-run")


def test_undo_run_puts_back_the_run_and_keeps_the_users_later_edit(page: Any, lab: Lab) -> None:
    name = "undo-run.ipynb"
    write_cells(lab, name, BEFORE)
    open_notebook(page, lab, name)
    for cell_id in ("c-setup", "c-total", "c-print"):
        run_by_id(page, cell_id)
    assert output_of(page, "c-print") == "2\n"
    run_by_id(page, "c-agent")
    inserted = next(c["id"] for c in document(page) if c["source"] == "total * 2")
    bar(page).wait_for(timeout=10_000)
    title = bar(page).locator(".jp-ipyagent-run-title").inner_text()
    assert "changed 4 cells" in title, title
    assert "the kernel's variables are not rolled back" in title
    # The bar is on the first reviewed cell of the run, in the document's order: c-total.
    assert page.locator(".jp-Notebook .jp-Cell").nth(2).locator(".jp-ipyagent-run").count() == 1

    type_into(page, "c-total", "  # mine")
    screenshot(page, "undo_run", "1-before-undo")
    bar(page).get_by_role("button", name="Undo run").click()
    bar(page).wait_for(state="detached", timeout=10_000)
    screenshot(page, "undo_run", "2-undone")

    assert sources(page) == [
        ("c-setup", AGENT),
        ("c-total", "total = 2  # mine"),
        ("c-print", "print(total)"),
        ("c-import", "import math"),
        ("c-agent", RUN),
        ("c-undo", "%agent undo"),
    ], "moved back, re-inserted, inserted cell removed; the user's edit stays"
    assert inserted not in [c["id"] for c in document(page)]
    assert output_of(page, "c-print") == "2\n", "the deleted cell comes back with its output"
    note = page.locator(".jp-ipyagent-review-note")
    assert note.inner_text() == "Not undone: it was changed since, so your work there is kept."
    # The notification shows its first ~140 characters: the counts and the note on variables.
    message = page.get_by_text("ipyagent undid run", exact=False).first
    message.wait_for(timeout=10_000)
    text = message.inner_text()
    assert "put back 3 cells, 1 cell left as it is; the kernel's variables are not rolled back" in text, text


def test_a_kept_cell_stays_when_the_kernel_undoes_the_run_and_keep_all_leaves_nothing(
    page: Any, lab: Lab
) -> None:
    name = "undo-kept.ipynb"
    write_cells(lab, name, BEFORE)
    open_notebook(page, lab, name)
    run_by_id(page, "c-setup")
    run_by_id(page, "c-agent")
    inserted = next(c["id"] for c in document(page) if c["source"] == "total * 2")
    cells = page.locator(".jp-Notebook .jp-Cell")
    review = cells.nth([c["id"] for c in document(page)].index(inserted)).locator(".jp-ipyagent-review")
    review.get_by_role("button", name="Keep").click()
    review.wait_for(state="detached", timeout=10_000)
    # The kept cell is no longer the run's to undo: the bar (re-drawn) counts the three others.
    page.locator(".jp-ipyagent-run-title", has_text="changed 3 cells").wait_for(timeout=10_000)

    run_by_id(page, "c-undo")
    said = output_of(page, "c-undo")
    assert said.startswith("Undid run run_"), said
    assert "put back 3 cells" in said
    assert f"  cell [5] ({inserted}): you kept it" in said
    assert "The kernel's variables are not rolled back" in said
    assert sources(page) == [
        ("c-setup", AGENT),
        ("c-total", "total = 1 + 1"),
        ("c-print", "print(total)"),
        ("c-import", "import math"),
        ("c-agent", RUN),
        (inserted, "total * 2"),
        ("c-undo", "%agent undo"),
    ]
    assert bar(page).count() == 0

    # A second run of the same kind, kept whole: nothing is left to undo, and it says so.
    run_by_id(page, "c-setup")
    run_by_id(page, "c-agent")
    bar(page).wait_for(timeout=10_000)
    after_run = sources(page)
    bar(page).get_by_role("button", name="Keep all").click()
    bar(page).wait_for(state="detached", timeout=10_000)
    assert page.locator(".jp-ipyagent-review").count() == 0
    run_by_id(page, "c-undo")
    said = output_of(page, "c-undo")
    assert "Nothing was undone" in said and "no run's changes are left to undo" in said, said
    assert sources(page) == after_run
