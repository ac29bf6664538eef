"""Notebook 7 loads ipyagent's extension, and the kernel reads the open notebook there, unsaved
edit included. Skipped, with the reason, where the notebook package is not installed."""

from __future__ import annotations

import json
from typing import Any

from conftest import Lab, write_notebook


def test_the_extension_loads_in_notebook_7_and_read_cells_sees_an_unsaved_edit(
    page: Any, notebook7: Lab
) -> None:
    name = write_notebook(notebook7, "nb7.ipynb", ["%load_ext ipyagent", "x = 1", ""])
    page.goto(f"{notebook7.url}/notebooks/{name}?token={notebook7.token}")
    page.wait_for_function(
        """() => {
            const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
            const session = w && w.sessionContext && w.sessionContext.session;
            return session && session.kernel && session.kernel.status === 'idle';
        }""",
        timeout=60_000,
    )
    assert page.evaluate("() => window.jupyterapp.name").startswith("Jupyter Notebook")
    # The user edits cell 1 and does not save; the kernel loads ipyagent and reads.
    page.evaluate(
        """() => {
            const nb = window.jupyterapp.shell.currentWidget.content;
            nb.model.sharedModel.getCell(1).setSource('x = 2  # not saved');
            nb.model.sharedModel.getCell(2).setSource(
                'from ipyagent.kernel.live_notebook import live_document\\n'
                + 'print(live_document().cells[1].source, "|", live_document().client)');
        }"""
    )
    for index in (0, 2):
        page.evaluate(
            f"""() => {{
                window.jupyterapp.shell.currentWidget.content.activeCellIndex = {index};
                window.jupyterapp.commands.execute('notebook:run-cell');
            }}"""
        )
        page.wait_for_function(
            f"""() => {{
                const m = window.jupyterapp.shell.currentWidget.content.widgets[{index}].model;
                return m.executionState === 'idle' && m.executionCount !== null;
            }}""",
            timeout=60_000,
        )
    # The page connects a moment after %load_ext announces the kernel: its node says when.
    page.wait_for_selector("[data-ipyagent-live='connected']", state="attached", timeout=30_000)
    printed = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.widgets[2].model.outputs.toJSON()"
        ".map(o => o.text ? [].concat(o.text).join('') : JSON.stringify(o)).join('')"
    )
    source, client = printed.strip().split(" | ")
    assert source == "x = 2  # not saved", json.dumps(printed)
    assert client.startswith("Jupyter Notebook"), client
