"""The notebook tools' edits with a page played by a Jupyter client: what only a fake page can
show. Permissions stay in the kernel (a read-only run sends the page nothing), a page that does
not answer leaves the agent told to re-read, and a page of another release gets the saved file
with a first line saying what to do. The edits themselves, in a real JupyterLab:
tests/browser/test_live_edits_in_lab.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
from conftest import Kernel, text_of
from test_live_notebook import SNAPSHOT, Page

from ipyagent.kernel.live_protocol import PROTOCOL

#: A model that edits cell c2 of the notebook, as read_cells showed it.
EDITING_MODEL = (
    "%load_ext ipyagent\n"
    "from ipyagent.testing import ScriptedModel, tool_call\n"
    "m = ScriptedModel([[tool_call('edit_cell', {'cell_id': 'c2', 'old_source': 'total = 1 + 1', "
    "'new_source': 'total = 2'})], 'Done.'])"
)
SHOW_RESULT = "print([b.content for m in res.messages for b in m.tool_results][0])"


def saved_notebook(folder: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Sales", id="c1"),
        nbformat.v4.new_code_cell("total = 1 + 1", id="c2"),
    ]
    path = folder / "analysis.ipynb"
    nbformat.write(nb, str(path))
    return path


def run_agent(page: Page, options: str) -> str:
    reply, outputs = page.run(f"%%agent -m m --quiet -o res --tools notebook {options}\nEdit.", cell_id="c3")
    assert reply["status"] == "ok", text_of(outputs)
    _, outputs = page.run(SHOW_RESULT)
    return text_of(outputs).rstrip("\n")


def edits(page: Page) -> list[dict[str, Any]]:
    return [r for r in page.requests if r["method"] == "edit"]


def test_a_read_only_run_sends_the_page_no_edit(jupyter_env: Path) -> None:
    saved_notebook(jupyter_env)
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(jupyter_env / "analysis.ipynb")})
    try:
        page = Page(kernel)
        page.run(EDITING_MODEL)
        page.open()
        page.settle()
        result = run_agent(page, "--read-only")
        assert result.startswith("Refused: `edit_cell` changes things")
        assert edits(page) == []
        # Without --yes and with nobody to answer (no widget front end here), it is denied.
        page.run(EDITING_MODEL.split("\n", 1)[1])
        assert run_agent(page, "").startswith("Denied: `edit_cell` changes things")
        assert edits(page) == []
    finally:
        kernel.close()


def test_a_silent_page_leaves_the_agent_told_to_re_read(jupyter_env: Path) -> None:
    path = saved_notebook(jupyter_env)
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(path)})
    try:
        page = Page(kernel)
        page.run(EDITING_MODEL + "\nimport ipyagent.kernel.live_notebook as ch\nch.EDIT_TIMEOUT = 0.5")
        page.open()
        page.settle()
        page.answer = None
        result = run_agent(page, "--yes")
    finally:
        kernel.close()
    assert "The page (TestLab 4) did not answer within 0.5 s." in result
    assert "It is not known whether the edit was applied" in result
    assert "call read_cells to see the cells as they are now before editing again" in result
    [request] = edits(page)
    params = request["params"]
    assert params["ops"] == [
        {"op": "replace", "cell_id": "c2", "expect": "total = 1 + 1", "source": "total = 2"}
    ]
    assert params["edit_id"].startswith("e-")
    assert params["provenance"]["session"] == "analysis.agent.jsonl"
    assert params["provenance"]["run"] and params["provenance"]["call"]
    assert nbformat.read(str(path), as_version=4).cells[1].source == "total = 1 + 1", "the file is untouched"


def test_a_page_of_another_release_gets_the_saved_file_edited_and_the_reason(jupyter_env: Path) -> None:
    path = saved_notebook(jupyter_env)
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(path)})
    try:
        page = Page(kernel)
        page.answer = SNAPSHOT
        page.run(EDITING_MODEL)
        page.open(protocol=PROTOCOL - 1, version="0.0.1")
        page.settle()
        result = run_agent(page, "--yes")
    finally:
        kernel.close()
    note, rest = result.split("\n\n", 1)
    assert note.startswith("(saved file, not the live notebook: Reload the page.")
    assert rest == "Edited cell c2 in the saved file analysis.ipynb."
    assert page.requests == []
    assert nbformat.read(str(path), as_version=4).cells[1].source == "total = 2"


def test_the_tools_schemas_do_not_show_the_run_context() -> None:
    # Recorded conversations hold the tools' schemas: the run context (for the provenance) is the
    # agent's to fill in, never a parameter the model sees.
    from ipyagent.kernel.tools.notebook import notebook_tools

    tools = {t.name: t for t in notebook_tools(None, None, Path("a.ipynb"))}  # type: ignore[arg-type]
    for name in ("insert_cell", "edit_cell", "delete_cell", "move_cell"):
        assert "run" not in tools[name].spec.parameters["properties"]
        assert not tools[name].read_only, f"{name} changes the notebook: it asks first"
    edit = tools["edit_cell"].spec.parameters["properties"]
    assert list(edit) == ["cell_id", "old_source", "new_source", "path"]


def test_agent_undo_asks_the_page_to_undo_the_latest_run_and_says_what_stayed(jupyter_env: Path) -> None:
    path = saved_notebook(jupyter_env)
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(path)})
    try:
        page = Page(kernel)
        page.answers["undo_run"] = {
            "run": "r-7",
            "undone": [{"cell_id": "n1", "index": None}, {"cell_id": "c1", "index": 0}],
            "kept": [{"cell_id": "c2", "index": 1, "why": "it was changed since", "source": "total = 3"}],
        }
        page.run("%load_ext ipyagent")
        page.open()
        page.settle()
        reply, outputs = page.run("%agent undo")
        assert reply["status"] == "ok", text_of(outputs)
        _, named = page.run("%agent undo r-7")
    finally:
        kernel.close()
    assert [(r["method"], r["params"]) for r in page.requests] == [
        ("undo_run", {"run": None}),
        ("undo_run", {"run": "r-7"}),
    ]
    assert text_of(outputs).splitlines() == [
        "Undid run r-7 in the live notebook: put back 2 cells.",
        "Left as they are:",
        "  cell [1] (c2): it was changed since",
    ], "a run this kernel knows no variables of says nothing about them"
    assert text_of(named) == text_of(outputs)


def test_agent_undo_without_a_page_says_where_it_works(jupyter_env: Path) -> None:
    kernel = Kernel(jupyter_env)
    try:
        page = Page(kernel)
        page.run("%load_ext ipyagent\nimport ipyagent.kernel.live_notebook as ch\nch.CONNECT_GRACE = 0")
        _, outputs = page.run("%agent undo")
    finally:
        kernel.close()
    assert (
        "Nothing was undone: %agent undo puts back cells in the notebook open in JupyterLab or "
        "Notebook 7, and no page shows this kernel's notebook." in text_of(outputs)
    )
