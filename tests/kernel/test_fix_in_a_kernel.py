"""``%agent fix`` in a real kernel (ipykernel via jupyter_client), driven by a scripted model and
with no page connected: the model is sent the error and the failing cell, may edit only that
cell, and its fix is shown as a diff and proposed below (``set_next_input``). The live mode, where
the fix lands on the cell with Keep and Undo, is tested in tests/browser/test_fix_in_lab.py."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Kernel, text_of
from test_live_notebook import SNAPSHOT, Page

SETUP = """
%load_ext ipyagent
from ipyagent.testing import ScriptedModel, text, tool_call
"""
FAILING = "total = 1 + 1\nprint(totl)"
FIXED = "total = 1 + 1\nprint(total)"
FENCED = f"```python\n{FIXED}\n```"


#: A model that first gives the source back unchanged (refused), then the fix in a code fence
#: (taken without it).
SCRIPT = f"""
m = ScriptedModel([
    [text('The name totl is a typo of total.'), tool_call('fix_cell', {{'new_source': {FAILING!r}}})],
    [tool_call('fix_cell', {{'new_source': {FENCED!r}}})],
    'Fixed.',
])
"""


def test_fix_sends_the_error_and_the_cell_and_proposes_the_edit_on_that_cell(kernel: Kernel) -> None:
    reply, _ = kernel.run(SETUP + SCRIPT)
    assert reply["status"] == "ok", reply
    # The failing cell, run as a notebook page runs it (its request names the cell: test-cell).
    reply, _ = kernel.run(FAILING, as_page=True)
    assert reply["status"] == "error" and reply["ename"] == "NameError"
    reply, outputs = kernel.run("%agent fix -m m")
    assert reply["status"] == "ok", reply
    shown = text_of(outputs)
    assert "The name totl is a typo of total." in shown
    assert "Proposed fix for cell test-cell:" in shown, shown
    assert "-print(totl)\n+print(total)" in shown, shown
    assert "No front end shows this run: the notebook file is not changed" in shown
    assert "running it needs JupyterLab or Notebook 7 with ipyagent's extension" in shown
    assert not [p for p in reply.get("payload", []) if p.get("source") == "set_next_input"]

    _, outputs = kernel.run(
        "import json\n"
        "first = m.requests[0]\n"
        "results = [b.content for r in m.requests[1:] for b in r.messages[-1].tool_results]\n"
        "print(json.dumps({'prompt': first.messages[-1].text, 'tools': sorted(t.name for t in first.tools),"
        " 'results': results}))"
    )
    seen = json.loads(text_of(outputs))
    prompt = seen["prompt"]
    assert "Cell id: test-cell" in prompt
    assert "NameError: name 'totl' is not defined" in prompt
    assert "Traceback" in prompt and "line 2" in prompt, prompt
    assert f"```python\n{FAILING}\n```" in prompt
    # Read tools and the fix of that cell; never run_python, run_cell or another edit.
    assert seen["tools"] == ["describe_variable", "fix_cell", "list_variables", "read_cells", "read_history"]
    refused, accepted = seen["results"]
    assert "That is the cell's source as it is: nothing was proposed" in refused
    assert accepted.startswith("Proposed the fix for cell test-cell")


def test_in_a_page_without_the_extension_the_fixed_cell_is_proposed_below(kernel: Kernel) -> None:
    kernel.run(SETUP + SCRIPT)
    kernel.run(FAILING, as_page=True, cell_id="c-fail")
    # As VS Code or a page without ipyagent's extension runs a cell: input allowed, a cell id.
    reply, outputs = kernel.run("%agent fix -m m", as_page=True, cell_id="c-fix")
    assert reply["status"] == "ok", reply
    shown = text_of(outputs)
    assert "-print(totl)\n+print(total)" in shown, shown
    assert "The fixed cell is proposed below: run it to try the fix." in shown
    assert "needs JupyterLab (or Notebook 7) with ipyagent's extension" in shown
    proposed = [p for p in reply.get("payload", []) if p.get("source") == "set_next_input"]
    assert [p["text"] for p in proposed] == [FIXED]


def test_a_cell_that_failed_before_the_extension_was_loaded_is_found_too(kernel: Kernel) -> None:
    reply, _ = kernel.run(FAILING)
    assert reply["status"] == "error"
    kernel.run(SETUP + SCRIPT)
    reply, outputs = kernel.run("%agent fix -m m")
    assert reply["status"] == "ok", text_of(outputs)
    assert "-print(totl)\n+print(total)" in text_of(outputs)
    _, outputs = kernel.run("print(m.requests[0].messages[-1].text)")
    prompt = text_of(outputs)
    assert "NameError: name 'totl' is not defined" in prompt and f"```python\n{FAILING}\n```" in prompt


def test_with_no_error_it_says_there_is_nothing_to_fix(kernel: Kernel) -> None:
    kernel.run(SETUP + "m = ScriptedModel(['never asked'])")
    kernel.run("x = 1")
    reply, outputs = kernel.run("%agent fix -m m")
    assert reply["status"] == "error"
    shown = text_of(outputs)
    assert "Nothing to fix: no cell has raised an error in this kernel" in shown, shown
    assert "%agent fix CELL_ID" in shown
    # A failed %agent fix is not itself an error to fix; nor is a cell named that never failed.
    reply, outputs = kernel.run("%agent fix -m m")
    assert "Nothing to fix" in text_of(outputs)
    reply, outputs = kernel.run("%agent fix some-cell -m m")
    assert "Cell some-cell has not raised an error in this kernel" in text_of(outputs)
    _, outputs = kernel.run("print(len(m.requests))")
    assert text_of(outputs).strip() == "0", "the model is not asked when there is nothing to fix"


def test_with_a_page_the_fix_is_an_edit_of_the_open_document_marked_as_a_fix(jupyter_env: Path) -> None:
    # The page shows c2 failed (in an earlier kernel: this one has no record of it), with a
    # source the user typed and did not save.
    live_source = SNAPSHOT["cells"][1]["source"]
    kernel = Kernel(jupyter_env)
    try:
        page = Page(kernel)
        fix = {"new_source": "total = 2"}
        page.run(
            SETUP
            + f"m = ScriptedModel([[text('x was never defined.'), tool_call('fix_cell', {fix!r})], 'Done.'])"
        )
        page.open()
        page.settle()
        page.answers["edit"] = {"applied": True, "cells": [{"cell_id": "c2", "index": 1}]}
        reply, outputs = page.run("%agent fix -m m", cell_id="c3")
        assert reply["status"] == "ok", text_of(outputs)
        assert "The fix is shown on cell [1] c2 as a diff: Keep runs the cell with the fix" in text_of(
            outputs
        )
        [edit] = [r for r in page.requests if r["method"] == "edit"]
        params = edit["params"]
        assert params["ops"] == [
            {"op": "replace", "cell_id": "c2", "expect": live_source, "source": "total = 2"}
        ]
        assert params["provenance"]["fix"] is True and params["provenance"]["run"].startswith("run_")
        _, outputs = page.run("print(m.requests[0].messages[-1].text)")
        prompt = text_of(outputs)
        assert "Cell id: c2" in prompt and "It raised NameError: x" in prompt
        assert f"```python\n{live_source}\n```" in prompt, "the open document's source, not the file's"

        # A cell that shows no error has nothing to fix; the model is not asked.
        reply, outputs = page.run("%agent fix c1 -m m", cell_id="c3")
        assert reply["status"] == "error"
        assert "Cell [0] c1 shows no error" in text_of(outputs)
        reply, outputs = page.run("%agent fix nope -m m", cell_id="c3")
        assert "No cell nope in the open notebook" in text_of(outputs)
        # An agent's failed cell is not code to fix.
        agent_cell = {**SNAPSHOT["cells"][1], "source": "%%agent -m m\nTidy up."}
        page.answer = {**SNAPSHOT, "cells": [SNAPSHOT["cells"][0], agent_cell, SNAPSHOT["cells"][2]]}
        reply, outputs = page.run("%agent fix -m m", cell_id="c3")
        assert "Cell [1] c2 runs an agent" in text_of(outputs), text_of(outputs)
        _, outputs = page.run("print(len(m.requests))")
        assert text_of(outputs).strip() == "2", "the model was asked for the one fix only"
    finally:
        kernel.close()
