"""Fixing an error, in a real JupyterLab: a cell fails, its Fix button (or ``%agent fix`` in a
cell) has the agent propose an edit of that cell, shown on it as a diff with the agent's
explanation; "Keep and run" keeps the fix and runs the cell, whose new output appears.
Screenshots go to tests/browser/screenshots/fix/."""

from __future__ import annotations

from typing import Any

from conftest import Lab, document, open_notebook, output_of, run_by_id, screenshot, sources, write_cells

FAILING = "total = 1 + 1\nprint(totl)"
FIXED = "total = 1 + 1\nprint(total)"
SETUP = f"""
%load_ext ipyagent
from ipyagent.testing import ScriptedModel, text, tool_call

m = ScriptedModel([
    [text('`totl` is a typo of `total`.'),
     tool_call('fix_cell', {{'new_source': {FIXED!r}}})],
    'I corrected the name in the print call.',
])
%agent model m
"""
SHOW_PROMPT = "print(m.requests[0].messages[-1].text)"


def cell(page: Any, cell_id: str) -> Any:
    return page.locator(".jp-Notebook .jp-Cell").nth([c["id"] for c in document(page)].index(cell_id))


def execution_count(page: Any, cell_id: str) -> int | None:
    count: int | None = page.evaluate(
        f"""() => window.jupyterapp.shell.currentWidget.content.widgets
            .find(w => w.model.id === {cell_id!r}).model.executionCount"""
    )
    return count


def keep_and_run(page: Any, review: Any) -> None:
    review.get_by_role("button", name="Keep and run").click()
    review.wait_for(state="detached", timeout=10_000)
    page.wait_for_function(
        """() => {
            const view = window.jupyterapp.shell.currentWidget.content;
            const w = view.widgets.find(w => w.model.id === 'c-fail');
            return w.model.outputs.toJSON().some(o => o.output_type === 'stream');
        }""",
        timeout=30_000,
    )


def test_the_fix_button_proposes_a_diff_and_keep_runs_the_fixed_cell(page: Any, lab: Lab) -> None:
    name = write_cells(
        lab, "fix-button.ipynb", [("c-setup", SETUP), ("c-fail", FAILING), ("c-show", SHOW_PROMPT)]
    )
    open_notebook(page, lab, name)
    run_by_id(page, "c-setup")
    run_by_id(page, "c-fail")
    assert "NameError" in output_of(page, "c-fail")
    failed_count = execution_count(page, "c-fail")

    fix = cell(page, "c-fail").locator(".jp-ipyagent-fix")
    fix.wait_for(timeout=10_000)
    assert cell(page, "c-setup").locator(".jp-ipyagent-fix").count() == 0, "only a failed cell offers it"
    screenshot(page, "fix", "1-failed")
    fix.get_by_role("button", name="Fix").click()

    review = cell(page, "c-fail").locator(".jp-ipyagent-review")
    review.wait_for(timeout=30_000)
    assert review.locator(".jp-ipyagent-review-title").inner_text() == "ipyagent proposes this fix"
    assert review.locator(".jp-ipyagent-review-removed").all_inner_texts() == ["- print(totl)"]
    assert review.locator(".jp-ipyagent-review-added").all_inner_texts() == ["+ print(total)"]
    # What the agent said comes to the review when its run ends.
    why = review.locator(".jp-ipyagent-review-why")
    why.wait_for(timeout=30_000)
    assert why.inner_text() == "`totl` is a typo of `total`.\n\nI corrected the name in the print call."
    screenshot(page, "fix", "2-proposed")
    # The fix is an edit of the cell and nothing else: no cell added, no execution count taken.
    assert sources(page) == [("c-setup", SETUP), ("c-fail", FIXED), ("c-show", SHOW_PROMPT)]
    assert execution_count(page, "c-fail") == failed_count
    assert fix.count() == 0, "no Fix button while its fix is under review"

    keep_and_run(page, review)
    screenshot(page, "fix", "3-kept-and-run")
    assert output_of(page, "c-fail") == "2\n"
    assert execution_count(page, "c-fail") == (failed_count or 0) + 1
    assert cell(page, "c-fail").locator(".jp-ipyagent-fix").count() == 0

    # The model was sent the error, its traceback and the cell.
    run_by_id(page, "c-show")
    prompt = output_of(page, "c-show")
    assert "Cell id: c-fail" in prompt
    assert "NameError: name 'totl' is not defined" in prompt
    assert "print(totl)" in prompt and "Traceback" in prompt


def test_agent_fix_in_a_cell_proposes_the_fix_and_undo_puts_the_failed_cell_back(page: Any, lab: Lab) -> None:
    cells = [("c-setup", SETUP), ("c-fail", FAILING), ("c-fix", "%agent fix"), ("c-undo", "%agent undo")]
    name = write_cells(lab, "fix-magic.ipynb", cells)
    open_notebook(page, lab, name)
    run_by_id(page, "c-setup")
    run_by_id(page, "c-fail")
    failed = output_of(page, "c-fail")
    failed_count = execution_count(page, "c-fail")
    run_by_id(page, "c-fix")
    said = output_of(page, "c-fix")
    assert "The fix is shown on cell [1] c-fail as a diff: Keep runs the cell with the fix" in said, said
    review = cell(page, "c-fail").locator(".jp-ipyagent-review")
    review.wait_for(timeout=10_000)
    assert review.locator(".jp-ipyagent-review-added").all_inner_texts() == ["+ print(total)"]
    keep_and_run(page, review)
    assert output_of(page, "c-fail") == "2\n"
    assert sources(page) == [("c-setup", SETUP), ("c-fail", FIXED), *cells[2:]]

    # The fix's run is a checkpoint like any: undone, the cell is as it was before it, output too.
    run_by_id(page, "c-undo")
    assert "put back 1 cell" in output_of(page, "c-undo")
    assert sources(page) == cells
    assert output_of(page, "c-fail") == failed and "NameError" in failed
    assert execution_count(page, "c-fail") == failed_count
