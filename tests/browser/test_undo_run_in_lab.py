"""Each run is a checkpoint, in a real JupyterLab: "Undo run" on the bar of a run's changes puts
back what the run did to the cells (sources, order, a deleted cell with its output, an inserted
cell removed), leaves a cell the user changed since as it is and says so, and asks the kernel to
put back the variables the run's code changed (a run that changed none says nothing of them).
Keep ends a cell's review, not the checkpoint: an undo of the run puts kept cells back too, even
after Keep all. ``%agent undo`` does the same from the kernel. A run that only moved and deleted
cells shows its bar too.
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
    assert "and the variables the run's code changed" in title
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
    # The notification shows its first ~140 characters: the counts; this run changed no variable.
    message = page.get_by_text("ipyagent undid run", exact=False).first
    message.wait_for(timeout=10_000)
    text = message.inner_text()
    assert "put back 3 cells, 1 cell left as it is." in text and "Variables" not in text, text


def test_undo_run_is_a_checkpoint_it_puts_back_kept_cells_too_even_after_keep_all(
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
    # Keep ends that cell's review; the bar still counts every cell Undo run puts back.
    page.locator(".jp-ipyagent-run-title", has_text="changed 4 cells").wait_for(timeout=10_000)

    run_by_id(page, "c-undo")
    said = output_of(page, "c-undo")
    assert said.startswith("Undid run run_"), said
    assert "put back 4 cells" in said and "Left as they are" not in said, said
    assert "Variables" not in said, "the run changed no variable"
    assert sources(page) == BEFORE, "the kept cell goes too: the notebook is as before the run"
    assert bar(page).count() == 0

    # A second run of the same kind, kept whole: its bar and reviews go, and it can still be undone.
    run_by_id(page, "c-setup")
    run_by_id(page, "c-agent")
    bar(page).wait_for(timeout=10_000)
    bar(page).get_by_role("button", name="Keep all").click()
    bar(page).wait_for(state="detached", timeout=10_000)
    assert page.locator(".jp-ipyagent-review").count() == 0
    run_by_id(page, "c-undo")
    said = output_of(page, "c-undo")
    assert "put back 4 cells" in said, said
    assert sources(page) == BEFORE
    # Nothing is left to undo now, and it says so.
    run_by_id(page, "c-undo")
    said = output_of(page, "c-undo")
    assert "Nothing was undone" in said and "no run's changes are left to undo" in said, said
    assert sources(page) == BEFORE


MOVING_AGENT = """
%load_ext ipyagent
from ipyagent.testing import ScriptedModel, tool_call

m = ScriptedModel([
    [
        tool_call("move_cell", {"cell_id": "c-import", "to_index": 0}),
        tool_call("delete_cell", {"cell_id": "c-print", "old_source": "print(total)"}),
    ],
    "Done.",
])
"""


def test_a_run_that_only_moved_and_deleted_cells_shows_its_bar_and_undoes(page: Any, lab: Lab) -> None:
    name = "undo-moved.ipynb"
    before = [("c-setup", MOVING_AGENT), *BEFORE[1:]]
    write_cells(lab, name, before)
    open_notebook(page, lab, name)
    for cell_id in ("c-setup", "c-total", "c-print"):
        run_by_id(page, cell_id)
    run_by_id(page, "c-agent")
    assert [c for c, _ in sources(page)] == ["c-import", "c-setup", "c-total", "c-agent", "c-undo"]
    assert page.locator(".jp-ipyagent-review").count() == 0, "no cell to review one by one"
    # The bar is on the first cell the run changed, in the document's order: the moved one.
    bar(page).wait_for(timeout=10_000)
    assert page.locator(".jp-Notebook .jp-Cell").nth(0).locator(".jp-ipyagent-run").count() == 1
    assert "changed 2 cells" in bar(page).locator(".jp-ipyagent-run-title").inner_text()
    screenshot(page, "undo_run", "3-moved-and-deleted")
    bar(page).get_by_role("button", name="Undo run").click()
    bar(page).wait_for(state="detached", timeout=10_000)
    assert sources(page) == before
    assert output_of(page, "c-print") == "2\n", "the deleted cell comes back with its output"


def test_undo_run_still_works_after_the_page_is_reloaded(page: Any, lab: Lab) -> None:
    name = "undo-reload.ipynb"
    write_cells(lab, name, BEFORE)
    open_notebook(page, lab, name)
    for cell_id in ("c-setup", "c-total", "c-print"):
        run_by_id(page, cell_id)
    run_by_id(page, "c-agent")
    bar(page).wait_for(timeout=10_000)
    after_run = sources(page)
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=10_000)

    open_notebook(page, lab, name)  # a new page: the checkpoint comes from this browser's storage
    assert sources(page) == after_run
    bar(page).wait_for(timeout=10_000)
    assert "changed 4 cells" in bar(page).locator(".jp-ipyagent-run-title").inner_text()
    # The edited and the inserted cell's reviews, counted on their cells' widgets, not in the
    # page: JupyterLab's windowing may leave a cell off screen out of it. Twice in CI, under load,
    # the page held one of the two; whether the other was off the page or lost is not known.
    page.wait_for_function(
        """() => window.jupyterapp.shell.currentWidget.content.widgets
            .filter((w) => w.node.querySelector(':scope > .jp-ipyagent-review')).length === 2""",
        timeout=10_000,
    )
    bar(page).get_by_role("button", name="Undo run").click()
    bar(page).wait_for(state="detached", timeout=10_000)
    assert sources(page) == BEFORE
    assert output_of(page, "c-print") == "2\n", "the deleted cell comes back with its output"


VARIABLES_AGENT = """
%load_ext ipyagent
from ipyagent.testing import ScriptedModel, tool_call

m = ScriptedModel([
    [tool_call("edit_cell", {"cell_id": "c-print", "old_source": "print(total)",
                             "new_source": "print(total, data)"})],
    [tool_call("run_python", {"code": "total = 100\\ndata.append(4)\\ncreated = 1"})],
    "Done.",
])
"""
VARIABLES = [
    ("c-setup", VARIABLES_AGENT),
    ("c-total", "total = 1 + 1\ndata = [1, 2, 3]"),
    ("c-print", "print(total)"),
    ("c-agent", "%%agent -m m --yes --tools notebook,python\nChange things."),
    ("c-check", "print(total, data, 'created' in globals())"),
]


def test_undo_run_in_the_page_puts_back_the_variables_the_runs_code_changed(page: Any, lab: Lab) -> None:
    name = "undo-variables.ipynb"
    write_cells(lab, name, VARIABLES)
    open_notebook(page, lab, name)
    for cell_id in ("c-setup", "c-total", "c-agent", "c-check"):
        run_by_id(page, cell_id)
    assert output_of(page, "c-check") == "100 [1, 2, 3, 4] True\n"
    bar(page).wait_for(timeout=10_000)
    bar(page).get_by_role("button", name="Undo run").click()
    bar(page).wait_for(state="detached", timeout=10_000)
    message = page.get_by_text("ipyagent undid run", exact=False).first
    message.wait_for(timeout=15_000)
    text = message.inner_text()
    screenshot(page, "undo_run", "4-variables")
    assert (
        "put back 1 cell. Variables: put back data, total; removed created (the run created them)." in text
    ), text
    assert sources(page) == VARIABLES
    run_by_id(page, "c-check")
    assert output_of(page, "c-check") == "2 [1, 2, 3] False\n", "the list is put back, total and created too"
