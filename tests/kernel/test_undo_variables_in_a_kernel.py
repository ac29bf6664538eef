"""Undo puts the variables back, in a real kernel: an agent run whose code changes a DataFrame in
place, rebinds a name and creates another is undone by ``%agent undo`` where no page shows the
notebook (the cells cannot be undone there, and it says so), and by the page's
``undo_variables`` request after its "Undo run". What cannot be copied, or is over the memory
cap, is said before the code runs. In JupyterLab: tests/browser/test_undo_run_in_lab.py."""

from __future__ import annotations

from pathlib import Path

from conftest import Kernel, text_of
from test_live_notebook import Page

SETUP = (
    "%load_ext ipyagent\n"
    "import ipyagent.kernel.live_notebook as ch\n"
    "ch.CONNECT_GRACE = 0\n"
    "import pandas as pd\n"
    "from ipyagent.testing import ScriptedModel, tool_call\n"
    "df = pd.DataFrame({'a': [1, 2, 3], 'b': [4.0, 5.0, 6.0]})\n"
    "before = df.copy()\n"
    "x = 1\n"
)
CODE = "df.pop('a')\ndf.loc[0, 'b'] = 9.0\nx = 2\ny = 3\nprint('ran')"
AGENT = "%%agent -y -m m --tools python --context none -o res\nTidy df."
CHECK = "print(df.equals(before), x, 'y' in globals())"


def model(code: str) -> str:
    return f"m = ScriptedModel([[tool_call('run_python', {{'code': {code!r}}})], 'Done.'])"


def test_agent_undo_puts_back_a_mutated_frame_a_rebound_name_and_removes_a_new_one(kernel: Kernel) -> None:
    reply, outputs = kernel.run(SETUP + model(CODE))
    assert reply["status"] == "ok", text_of(outputs)
    reply, outputs = kernel.run(AGENT)
    assert reply["status"] == "ok", text_of(outputs)
    assert "An undo of this run cannot put back" not in text_of(outputs), "all of it is covered"
    _, outputs = kernel.run(CHECK + "\nprint(list(df.columns), df.loc[0, 'b'])")
    assert text_of(outputs).splitlines() == ["False 2 True", "['b'] 9.0"]

    reply, outputs = kernel.run("%agent undo")
    assert reply["status"] == "ok", text_of(outputs)
    _, run_id = kernel.run("print(res.run_id)")
    assert text_of(outputs).splitlines() == [
        f"Undid run {text_of(run_id).strip()}'s variables in this kernel.",
        "Variables: put back df, x; removed y (the run created them).",
        "The cells were not undone: %agent undo puts back cells in the notebook open in JupyterLab "
        "or Notebook 7, and no page shows this kernel's notebook.",
    ], text_of(outputs)
    _, outputs = kernel.run(CHECK)
    assert text_of(outputs).strip() == "True 1 False"

    # Nothing is left to undo, and it says so.
    reply, outputs = kernel.run("%agent undo")
    assert reply["status"] == "error"
    assert "Nothing was undone" in text_of(outputs) + reply.get("evalue", "")


def test_what_cannot_be_copied_is_said_before_the_code_runs(kernel: Kernel) -> None:
    setup = SETUP + "gen = (i for i in range(3))\n" + model("first = next(gen)\nprint('ran')")
    reply, outputs = kernel.run(setup)
    assert reply["status"] == "ok", text_of(outputs)
    reply, outputs = kernel.run(AGENT)
    assert reply["status"] == "ok", text_of(outputs)
    said = text_of(outputs)
    assert "An undo of this run cannot put back gen (generator: it cannot be copied" in said, said
    _, outputs = kernel.run("%agent undo")
    assert "removed first (the run created them)" in text_of(outputs)


def test_a_value_over_the_memory_cap_is_said_before_the_code_runs(kernel: Kernel) -> None:
    setup = SETUP + "%config AgentMagics.undo_memory = '100B'\n" + model("df['c'] = 1")
    reply, outputs = kernel.run(setup)
    assert reply["status"] == "ok", text_of(outputs)
    reply, outputs = kernel.run(AGENT)
    assert reply["status"] == "ok", text_of(outputs)
    said = text_of(outputs)
    assert "An undo of this run cannot put back df (pandas.DataFrame, about" in said, said
    assert "over the undo memory cap of 100 bytes" in said


def test_the_pages_undo_variables_request_puts_them_back(jupyter_env: Path) -> None:
    kernel = Kernel(jupyter_env)
    try:
        page = Page(kernel)
        reply, outputs = page.run(SETUP + model(CODE))
        assert reply["status"] == "ok", text_of(outputs)
        page.open()
        page.settle()
        reply, outputs = page.run(AGENT)
        assert reply["status"] == "ok", text_of(outputs)
        _, outputs = page.run("print(res.run_id)")
        run_id = text_of(outputs).strip()
        request = {"kind": "request", "id": "u-1", "method": "undo_variables", "params": {"run": run_id}}
        page.send_shell("comm_msg", {"comm_id": page.comm_id, "data": request})
        answers: list[dict[str, object]] = []
        for _ in range(20):
            page.settle()
            answers = [d for d in page.received if d.get("kind") == "response" and d.get("id") == "u-1"]
            if answers:
                break
        _, outputs = page.run(CHECK)
    finally:
        kernel.close()
    assert answers == [
        {
            "kind": "response",
            "id": "u-1",
            "ok": True,
            "result": {"run": run_id, "restored": ["df", "x"], "removed": ["y"], "kept": [], "refused": ""},
        }
    ]
    assert text_of(outputs).strip() == "True 1 False"


def test_agent_undo_with_a_page_puts_back_the_cells_there_and_the_variables_here(jupyter_env: Path) -> None:
    kernel = Kernel(jupyter_env)
    try:
        page = Page(kernel)
        page.run(SETUP + model(CODE))
        page.open()
        page.settle()
        reply, outputs = page.run(AGENT)
        assert reply["status"] == "ok", text_of(outputs)
        _, outputs = page.run("print(res.run_id)")
        first = text_of(outputs).strip()
        # A later run that changes only variables: the page knows no cells of it.
        page.run("m.add([tool_call('run_python', {'code': 'z = 1'})], 'Done.')")
        page.run(AGENT)
        _, outputs = page.run("print(res.run_id)")
        later = text_of(outputs).strip()
        page.answers["undo_run"] = {"run": first, "undone": [{"cell_id": "c1", "index": 0}], "kept": []}
        reply, outputs = page.run("%agent undo")
        assert reply["status"] == "ok", text_of(outputs)
        _, check = page.run(CHECK + "\nprint(z)")
    finally:
        kernel.close()
    assert [r["params"] for r in page.requests if r["method"] == "undo_run"] == [{"run": None}]
    assert text_of(outputs).splitlines() == [
        f"Undid run {first} in the live notebook: put back 1 cell.",
        "Variables: put back df, x; removed y (the run created them).",
        f"A later run changed variables too ({later}): %agent undo {later} puts them back.",
    ]
    assert text_of(check).splitlines() == ["True 1 False", "1"]


def test_what_a_cell_the_run_ran_changed_is_undone_with_the_run(jupyter_env: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("n += 1\nprint(n)", id="c-count")]
    path = jupyter_env / "counter.ipynb"
    nbformat.write(nb, str(path))
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(path)})
    try:
        setup = (
            SETUP + "n = 1\nm = ScriptedModel([[tool_call('run_cell', {'cell_id': 'c-count'})], 'It ran.'])"
        )
        reply, outputs = kernel.run(setup)
        assert reply["status"] == "ok", text_of(outputs)
        reply, outputs = kernel.run("%%agent -y -m m --tools notebook --context none\nRun the counter.")
        assert reply["status"] == "ok", text_of(outputs)
        _, before = kernel.run("print(n)")
        _, said = kernel.run("%agent undo")
        _, after = kernel.run("print(n)")
    finally:
        kernel.close()
    assert text_of(before).strip() == "2"
    assert "Variables: put back n." in text_of(said), text_of(said)
    assert text_of(after).strip() == "1"
