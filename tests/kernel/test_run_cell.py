"""``run_cell`` in a real kernel with no page: the cell's saved source runs in the user's
namespace, from inside a blocking ``%%agent`` cell; the agent reads its output, result and error;
each cell takes the next execution count and joins ``In``, and the ``%%agent`` cell's count comes
after theirs. A cell past its timeout is interrupted and its partial output read."""

from __future__ import annotations

from pathlib import Path

import nbformat
from conftest import Kernel, text_of

CELLS = [
    nbformat.v4.new_code_cell("total = sum(range(10))\nprint('total is', total)\ntotal * 2", id="sum"),
    nbformat.v4.new_code_cell("{'a': 1}['b']", id="fails"),
    nbformat.v4.new_markdown_cell("# Notes", id="notes"),
    nbformat.v4.new_code_cell("%%agent\nhello", id="agent"),
    nbformat.v4.new_code_cell("import time\nprint('started', flush=True)\ntime.sleep(30)", id="slow"),
]

SCRIPT = """
from ipyagent.testing import ScriptedModel, tool_call
m = ScriptedModel([
    [tool_call('run_cell', {'cell_id': 'sum'})],
    [tool_call('run_cell', {'cell_id': 'fails'})],
    [tool_call('run_cell', {'cell_id': 'notes'})],
    [tool_call('run_cell', {'cell_id': 'agent'})],
    [tool_call('run_cell', {'cell_id': 'slow', 'timeout': 1})],
    'Done.',
])
"""


def test_run_cell_runs_saved_cells_in_the_namespace_and_reports_them(jupyter_env: Path) -> None:
    notebook = jupyter_env / "analysis.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = CELLS
    nbformat.write(nb, notebook)
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(notebook)})
    try:
        kernel.run("%load_ext ipyagent")
        kernel.run(SCRIPT)
        reply, outputs = kernel.run("%%agent -m m --yes -o res\nRun the cells.")
        assert reply["status"] == "ok", text_of(outputs)
        _, shown = kernel.run(
            "for m_ in res.messages:\n"
            "    for r in m_.tool_results:\n"
            "        print('---', r.is_error)\n        print(r.content)\n"
            "print('===', total, Out[min(Out)] if Out else None)"
        )
        results = text_of(shown).split("--- ")[1:]
        assert len(results) == 5
        ran, failed, markdown, agent, slow = results
        assert ran.startswith("False") and "ran from the saved file analysis.ipynb" in ran
        assert "[stdout]\ntotal is 45" in ran and "[result]\n90" in ran
        assert failed.startswith("True") and "KeyError: 'b'" in failed
        assert "is a markdown cell: only code cells run" in markdown
        assert "runs an agent" in agent
        assert slow.startswith("True") and "started" in slow and "interrupted" in slow
        # The namespace has the cell's variable; Out its result.
        assert text_of(shown).split("=== ")[1].split()[:2] == ["45", "90"]
        # Each cell that ran took a count; the %%agent cell's comes after theirs.
        counts = [
            int(line.split()[-1].rstrip(")"))
            for line in text_of(shown).split("\n")
            if "(execution count" in line
        ]
        assert len(counts) == 3 and counts == sorted(counts)
        assert reply["execution_count"] == counts[-1] + 1
        _, history = kernel.run(f"print(repr(In[{counts[0]}]))\nprint(In[{reply['execution_count']}][:7])")
        assert text_of(history).split("\n")[:2] == [repr(CELLS[0].source), "%%agent"]
    finally:
        kernel.close()


def test_stopping_the_run_ends_a_long_cell_it_runs(jupyter_env: Path) -> None:
    """Stop in the run view cancels the run (``agent.cancel()``, as here from another thread):
    the cell the agent runs is interrupted at once instead of sleeping on for nobody."""
    notebook = jupyter_env / "long.ipynb"
    nb = nbformat.v4.new_notebook()
    source = "import pathlib, time\npathlib.Path('started').touch()\ntime.sleep(600)"
    nb.cells = [nbformat.v4.new_code_cell(source, id="slow")]
    nbformat.write(nb, notebook)
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(notebook)})
    try:
        kernel.run("%load_ext ipyagent")
        kernel.run(
            "import os, threading\n"
            "from ipyagent.kernel.extension import kernel_state\n"
            "from ipyagent.testing import ScriptedModel, tool_call\n"
            "m = ScriptedModel([[tool_call('run_cell', {'cell_id': 'slow'})], 'Never.'])\n"
            "def stop_when_running():\n"
            "    while not os.path.exists('started'):  # the cell is running\n"
            "        time.sleep(0.05)\n"
            "    agents = kernel_state(get_ipython()).agents\n"
            "    next(iter(agents.values())).cancel()  # what Stop in the run view does\n"
            "import time\nthreading.Thread(target=stop_when_running, daemon=True).start()"
        )
        reply, outputs = kernel.run("%%agent -m m --yes -o res\nRun it.", timeout=60)
        # A stopped run, not the kernel's interrupt: the cell ends quietly (Run All goes on).
        assert reply["status"] == "ok", text_of(outputs)
        assert "Run cancelled" in text_of(outputs)
        _, shown = kernel.run("print(res.status)\nprint(In[-3])")  # then the %%agent cell, then this one
        status, ran = text_of(shown).strip().split("\n", 1)
        assert status == "cancelled" and ran.startswith("import pathlib")
    finally:
        kernel.close()


def test_with_cells_the_agents_code_runs_as_cells_and_run_python_is_not_offered(kernel: Kernel) -> None:
    kernel.run(
        "%load_ext ipyagent\nfrom ipyagent.testing import ScriptedModel, tool_call\n"
        "m = ScriptedModel([[tool_call('run_new_cell', {'code': 'x = 41 + 1\\nx'})], 'x is 42.'])"
    )
    reply, outputs = kernel.run("%%agent -m m --yes --cells -o res\nCompute x.")
    assert reply["status"] == "ok", text_of(outputs)
    _, shown = kernel.run(
        "print(x)\nprint(sorted(t.name for t in m.requests[0].tools if 'run' in t.name))\n"
        "print(res.messages[-2].tool_results[0].content)"
    )
    value, offered, result = text_of(shown).split("\n", 2)
    assert value == "42"
    assert offered == "['run_cell', 'run_new_cell']"  # no hidden run_python
    assert "no page shows the notebook live, so no cell was added" in result and "[result]\n42" in result
