"""ipyagent's JupyterLab extension in a real JupyterLab: the kernel reads the open document —
an edit the user has typed and not saved, the active cell — from a cell that is still running,
the agent's read_cells sees it too, and a page and kernel that speak different protocols say
what to do. Screenshots go to tests/browser/screenshots/live_notebook/."""

from __future__ import annotations

import json
from typing import Any

import nbformat
from conftest import Lab, open_notebook, run_cell, screenshot, wait_cell_done, write_notebook

# Reads the live document until it shows the user's edit (typed while this cell runs), then
# prints what it saw. Every read is answered while this cell blocks the kernel's main shell.
PROBE = """
import json, time
from ipyagent.kernel.live_notebook import live_document
reads, deadline = 0, time.monotonic() + 60
while True:
    doc = live_document()
    reads += 1
    if doc is not None and doc.cells[1].source.endswith("+ 41") or time.monotonic() > deadline:
        break
    time.sleep(0.1)
print(json.dumps({
    "sources": [c.source for c in doc.cells],
    "ids": [c.id for c in doc.cells],
    "active": doc.active_cell_id,
    "running": [c.id for c in doc.running_cells],
    "dirty": doc.dirty,
    "client": doc.client,
    "reads": reads,
}))
"""


def outputs_text(page: Any, index: int) -> str:
    text: str = page.evaluate(
        f"""() => window.jupyterapp.shell.currentWidget.content.widgets[{index}].model.outputs
            .toJSON().map(o => o.text ? [].concat(o.text).join('') : JSON.stringify(o)).join('')"""
    )
    return text


def cell_ids(page: Any) -> list[str]:
    ids: list[str] = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.widgets.map(w => w.model.id)"
    )
    return ids


def test_the_kernel_reads_unsaved_edits_while_its_cell_runs(page: Any, lab: Lab) -> None:
    name = write_notebook(lab, "live.ipynb", ["%load_ext ipyagent", "x = 1", PROBE])
    open_notebook(page, lab, name)
    run_cell(page, 0)
    wait_cell_done(page, 0)
    run_cell(page, 2)

    # While the probe runs, the user types into cell 1 (and does not save).
    editor = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".cm-content")
    editor.click()
    page.keyboard.press("End")
    page.keyboard.type(" + 41")
    wait_cell_done(page, 2, timeout=90_000)
    screenshot(page, "live_notebook", "1-read-while-running")

    seen = json.loads(outputs_text(page, 2))
    ids = cell_ids(page)
    assert seen["sources"][1] == "x = 1 + 41"
    assert seen["ids"] == ids
    assert seen["active"] == ids[1], "the cell the user clicked into is the active cell"
    assert seen["running"] == [ids[2]], "the probe saw its own cell running"
    assert seen["dirty"] is True
    assert seen["client"].startswith("JupyterLab 4")
    saved = nbformat.read(str(lab.root / name), as_version=4)
    assert saved.cells[1].source == "x = 1", "the edit was read from the page, not from the file"


# A model that calls read_cells once the test says the user is done typing (the file "live-go"
# appears beside the notebook), then answers.
AGENT_SETUP = """
%load_ext ipyagent
import time
from pathlib import Path
from ipyagent.testing import ScriptedModel, tool_call

def when_the_user_is_done(request):
    deadline = time.monotonic() + 60
    while not Path("live-go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return [tool_call("read_cells", {})]

m = ScriptedModel([when_the_user_is_done, "Read."])
"""


def test_the_agents_read_cells_sees_an_unsaved_edit_and_the_users_cell(page: Any, lab: Lab) -> None:
    name = write_notebook(
        lab,
        "agent-reads.ipynb",
        [
            AGENT_SETUP,
            "x = 1",
            "%%agent -m m -o res --tools notebook\nRead the notebook.",
            "print([b.content for m in res.messages for b in m.tool_results][0])",
        ],
    )
    open_notebook(page, lab, name)
    run_cell(page, 0)
    wait_cell_done(page, 0)
    run_cell(page, 2)
    # While the agent's cell runs, the user types into cell 1 (and does not save).
    editor = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".cm-content")
    editor.click()
    page.keyboard.press("End")
    page.keyboard.type(" + 41")
    (lab.root / "live-go").touch()
    wait_cell_done(page, 2, timeout=90_000)
    screenshot(page, "live_notebook", "4-agent-read-cells")
    run_cell(page, 3)
    wait_cell_done(page, 3)

    ids = cell_ids(page)
    seen = outputs_text(page, 3)
    assert seen.startswith(f"(live document: {name} as the user sees it now in JupyterLab 4"), seen
    assert "with unsaved changes; 4 cells." in seen
    assert f"This agent runs in cell [2] id={ids[2]}." in seen
    assert f"The user is on cell [1] id={ids[1]}." in seen
    assert f"[1] id={ids[1]} code (the user's active cell)\nx = 1 + 41\n" in seen
    assert f"[2] id={ids[2]} code (running; this agent's cell)\n%%agent -m m" in seen
    saved = nbformat.read(str(lab.root / name), as_version=4)
    assert saved.cells[1].source == "x = 1", "the edit was read from the page, not from the file"


def test_a_page_and_a_kernel_of_different_releases_say_what_to_do(page: Any, lab: Lab) -> None:
    # A kernel that imported a newer ipyagent is played by raising this kernel's protocol number
    # before the extension loads; the page runs the extension of this checkout.
    name = write_notebook(
        lab,
        "mismatch.ipynb",
        [
            "import ipyagent.kernel.live_protocol as protocol\nprotocol.PROTOCOL += 1\n%load_ext ipyagent",
            "from ipyagent.kernel.live_notebook import live_document\nlive_document()",
        ],
    )
    open_notebook(page, lab, name)
    run_cell(page, 0)
    wait_cell_done(page, 0)
    toast = page.locator(".jp-Notification-Toast-warning", has_text="ipyagent: Reload the page.")
    toast.wait_for(timeout=30_000)
    screenshot(page, "live_notebook", "2-mismatch")
    run_cell(page, 1)
    wait_cell_done(page, 1)
    error = page.evaluate(
        """() => window.jupyterapp.shell.currentWidget.content.widgets[1].model.outputs.toJSON()
            .filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue).join('')"""
    )
    assert error.startswith("LiveNotebookMismatch: Reload the page. Its ipyagent extension (0.1.0")
    assert page.get_by_role("button", name="Reload page").count() == 1


def test_the_page_finds_the_kernel_after_a_reload_and_after_a_restart(page: Any, lab: Lab) -> None:
    read = (
        "from ipyagent.kernel.live_notebook import live_document\n"
        "doc = live_document()\n"
        "print(doc.path if doc else 'no live document')"
    )
    name = write_notebook(lab, "again.ipynb", ["%load_ext ipyagent", read])
    open_notebook(page, lab, name)
    run_cell(page, 0)
    wait_cell_done(page, 0)

    # A page that connects to a kernel which loaded ipyagent earlier finds its announce comm.
    # It connects a moment after the kernel is idle (a comm_info request, a subshell, a hello and
    # the kernel's welcome): the notebook's node says when.
    page.reload()
    open_notebook(page, lab, name)
    page.wait_for_selector(
        ".jp-NotebookPanel[data-ipyagent-live='connected']", state="attached", timeout=30_000
    )
    run_cell(page, 1)
    wait_cell_done(page, 1)
    assert outputs_text(page, 1).strip() == name

    # A restarted kernel has no ipyagent until %load_ext runs again, which announces it.
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.restartKernel()")
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'",
        timeout=60_000,
    )
    run_cell(page, 1)
    wait_cell_done(page, 1)
    assert outputs_text(page, 1).strip() == "no live document"
    run_cell(page, 0)
    wait_cell_done(page, 0)
    run_cell(page, 1)
    wait_cell_done(page, 1)
    assert outputs_text(page, 1).strip() == name
    screenshot(page, "live_notebook", "3-after-restart")
