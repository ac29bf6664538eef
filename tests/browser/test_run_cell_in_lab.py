"""``run_cell`` in a real JupyterLab: from a blocking ``%%agent`` cell, the agent runs other cells
of the open notebook; each target cell shows ``[*]``, its output as it streams, its result or
error, and the next execution count, while the ``%%agent`` cell's count comes after theirs;
the kernel's interrupt (■) ends a long cell the agent runs, and the cell says so. Screenshots go to
tests/browser/screenshots/run_cell/."""

from __future__ import annotations

import json
from typing import Any

from conftest import (
    Lab,
    document,
    open_notebook,
    output_of,
    run_by_id,
    run_cell,
    screenshot,
    wait_done,
    write_cells,
)

AGENT = """
%load_ext ipyagent
from ipyagent.testing import ScriptedModel, tool_call
m = ScriptedModel([
    [tool_call("run_cell", {"cell_id": "c-steps"})],
    [tool_call("run_cell", {"cell_id": "c-fails"})],
    "Both ran.",
    [tool_call("run_cell", {"cell_id": "c-long"})],
    "Never.",
])
"""
STEPS = """
import os, time
print("step 1", flush=True)
while not os.path.exists("steps-go"):
    time.sleep(0.05)
print("step 2")
sum(range(10))
"""
LONG = "import time\nprint('waiting', flush=True)\ntime.sleep(600)"


def cell_state(page: Any, cell_id: str) -> dict[str, Any]:
    state: dict[str, Any] = page.evaluate(
        f"""() => {{
            const view = window.jupyterapp.shell.currentWidget.content;
            const cell = view.widgets.find(w => w.model.id === {json.dumps(cell_id)});
            return {{count: cell.model.executionCount, state: cell.model.executionState,
                     prompt: cell.node.querySelector('.jp-InputPrompt').textContent,
                     outputs: cell.model.outputs.toJSON()}};
        }}"""
    )
    return state


def wait_for(page: Any, cell_id: str, condition: str) -> None:
    """Until ``condition`` (JS over ``cell``, the cell's model) holds for the cell."""
    page.wait_for_function(
        f"""() => {{
            const view = window.jupyterapp.shell.currentWidget.content;
            const widget = view.widgets.find(w => w.model.id === {json.dumps(cell_id)});
            const cell = widget && widget.model;
            return Boolean(cell) && ({condition});
        }}""",
        timeout=60_000,
    )


def test_the_agent_runs_cells_whose_outputs_land_in_them(page: Any, lab: Lab) -> None:
    name = write_cells(
        lab,
        "run-cells.ipynb",
        [
            ("c-setup", AGENT),
            ("c-agent", "%%agent -m m --yes --tools notebook\nRun my cells."),
            ("c-steps", STEPS),
            ("c-fails", "{'a': 1}['b']"),
        ],
    )
    open_notebook(page, lab, name)
    run_by_id(page, "c-setup")
    page.wait_for_selector(
        ".jp-NotebookPanel[data-ipyagent-live='connected']", state="attached", timeout=30_000
    )
    run_cell(page, 1)

    # The cell runs: [*], and its first line is there before the cell ends.
    wait_for(page, "c-steps", "cell.executionState === 'running' && cell.outputs.length > 0")
    running = cell_state(page, "c-steps")
    assert running["prompt"].strip() == "[*]:"
    assert running["outputs"] == [{"output_type": "stream", "name": "stdout", "text": "step 1\n"}]
    screenshot(page, "run_cell", "1-streaming")
    (lab.root / "steps-go").touch()

    wait_done(page, "c-agent")
    steps, fails, agent = (cell_state(page, c) for c in ("c-steps", "c-fails", "c-agent"))
    assert [o["output_type"] for o in steps["outputs"]] == ["stream", "execute_result"]
    assert steps["outputs"][0]["text"] == "step 1\nstep 2\n"
    assert steps["outputs"][1]["data"]["text/plain"] == "45"
    assert [o["output_type"] for o in fails["outputs"]] == ["error"]
    assert fails["outputs"][0]["ename"] == "KeyError"
    # Counts in the order things finished, each once: the cells, then the agent's cell.
    setup = cell_state(page, "c-setup")["count"]
    assert (steps["count"], fails["count"], agent["count"]) == (setup + 2, setup + 3, setup + 4)
    assert "step 2" not in output_of(page, "c-agent")  # the outputs went to their cells
    answer = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".ipyagent-block[data-kind=text]").last
    assert answer.inner_text().strip() == "Both ran."
    screenshot(page, "run_cell", "2-done")


def test_the_kernel_interrupt_ends_a_long_cell_the_agent_runs(page: Any, lab: Lab) -> None:
    name = write_cells(
        lab,
        "run-long.ipynb",
        [
            ("c-setup", AGENT.replace('"c-steps"', '"c-long"', 1)),
            ("c-agent", "%%agent -m m --yes --tools notebook\nRun the long cell."),
            ("c-long", LONG),
        ],
    )
    open_notebook(page, lab, name)
    run_by_id(page, "c-setup")
    page.wait_for_selector(
        ".jp-NotebookPanel[data-ipyagent-live='connected']", state="attached", timeout=30_000
    )
    run_cell(page, 1)
    wait_for(page, "c-long", "cell.executionState === 'running' && cell.outputs.length > 0")
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:interrupt-kernel')")
    wait_done(page, "c-agent")
    long = cell_state(page, "c-long")
    assert long["state"] == "idle" and long["count"] is not None
    assert [o.get("ename") for o in long["outputs"] if o["output_type"] == "error"] == ["KeyboardInterrupt"]
    assert "KeyboardInterrupt" in output_of(page, "c-agent")  # the agent's cell stops too (Run All halts)
    assert [c["id"] for c in document(page)] == ["c-setup", "c-agent", "c-long"]
    screenshot(page, "run_cell", "3-interrupted")


CELLS_AGENT = """
%load_ext ipyagent
from ipyagent.testing import ScriptedModel, tool_call
m = ScriptedModel([
    [tool_call("run_new_cell", {"code": "total = sum(range(5))\\nprint('adding up')\\ntotal"})],
    [tool_call("run_new_cell", {"code": "total * 2"})],
    "Twice the total is 20.",
])
"""


def test_with_cells_the_agents_code_becomes_cells_below_its_own(page: Any, lab: Lab) -> None:
    name = write_cells(
        lab,
        "code-in-cells.ipynb",
        [
            ("c-setup", CELLS_AGENT),
            ("c-agent", "%%agent -m m --yes --cells\nDouble the total."),
            ("c-end", ""),
        ],
    )
    open_notebook(page, lab, name)
    run_by_id(page, "c-setup")
    page.wait_for_selector(
        ".jp-NotebookPanel[data-ipyagent-live='connected']", state="attached", timeout=30_000
    )
    run_by_id(page, "c-agent")
    cells = document(page)
    assert [c["id"] for c in cells][:2] == ["c-setup", "c-agent"] and cells[-1]["id"] == "c-end"
    first, second = cells[2], cells[3]
    assert first["source"] == "total = sum(range(5))\nprint('adding up')\ntotal"
    assert second["source"] == "total * 2"
    assert first["ipyagent"]["run"] == second["ipyagent"]["run"]  # provenance: made by this run
    made = [cell_state(page, c["id"]) for c in (first, second)]
    assert [o["output_type"] for o in made[0]["outputs"]] == ["stream", "execute_result"]
    assert made[1]["outputs"][0]["data"]["text/plain"] == "20"
    setup = cell_state(page, "c-setup")["count"]
    assert [m["count"] for m in made] == [setup + 2, setup + 3]
    screenshot(page, "run_cell", "4-code-in-cells")


COUNTING_AGENT = """
%load_ext ipyagent
from ipyagent.testing import ScriptedModel, tool_call
m = ScriptedModel([[tool_call("run_cell", {"cell_id": "c-count"})], "It ran."])
n = 0
"""


def test_undo_of_a_run_puts_back_what_the_cells_it_ran_showed_and_their_variables(
    page: Any, lab: Lab
) -> None:
    name = write_cells(
        lab,
        "run-undo.ipynb",
        [
            ("c-setup", COUNTING_AGENT),
            ("c-count", "n += 1\nprint(n)"),
            ("c-agent", "%%agent -m m --yes --tools notebook\nRun the counter."),
            ("c-undo", "%agent undo"),
            ("c-n", "print(n)"),
        ],
    )
    open_notebook(page, lab, name)
    run_by_id(page, "c-setup")
    run_by_id(page, "c-count")
    before = cell_state(page, "c-count")
    assert output_of(page, "c-count") == "1\n"
    run_by_id(page, "c-agent")
    assert output_of(page, "c-count") == "2\n"
    # A run that only ran cells has nothing to review: no bar, no diff.
    assert page.locator(".jp-ipyagent-run").count() == 0
    assert page.locator(".jp-ipyagent-review").count() == 0

    run_by_id(page, "c-undo")
    said = output_of(page, "c-undo")
    assert "put back 1 cell" in said and "Variables: put back n." in said, said
    after = cell_state(page, "c-count")
    assert (after["outputs"], after["count"]) == (before["outputs"], before["count"])
    run_by_id(page, "c-n")
    assert output_of(page, "c-n") == "1\n", "what the cell the run ran changed is the run's, undone too"
