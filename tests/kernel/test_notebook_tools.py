"""The notebook document tools on a real .ipynb written with nbformat, driven through a real
Agent; proposals below the running cell go to a recording stand-in for the shell."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import nbformat
import pytest

from ipyagent import Agent
from ipyagent.agentlib.messages import ToolResultBlock
from ipyagent.kernel.runner import MainThread
from ipyagent.kernel.tools.files import WorkspaceError
from ipyagent.kernel.tools.notebook import notebook_tools
from ipyagent.testing import ScriptedModel, tool_call


class RecordingShell:
    """Just what the notebook tools use of an IPython shell: ``set_next_input``."""

    def __init__(self) -> None:
        self.proposed: list[tuple[str, bool]] = []

    def set_next_input(self, text: str, replace: bool = False) -> None:
        self.proposed.append((text, replace))


async def call_all(
    notebook: Path | None,
    calls: list[tuple[str, dict[str, Any]]],
    shell: RecordingShell | None = None,
    *,
    headless: bool = False,
) -> list[ToolResultBlock]:
    """Each call in its own model turn, with one set of tools (as within one ``%%agent`` run)."""
    tools = notebook_tools(shell or RecordingShell(), MainThread(), notebook, headless=headless)
    script: list[Any] = [[tool_call(name, arguments)] for name, arguments in calls]
    agent = Agent(model=ScriptedModel([*script, "done"]), tools=tools, auto_approve=True)
    result = await agent.run("go")
    return [m.tool_results[0] for m in result.messages if m.tool_results]


async def call(notebook: Path | None, name: str, arguments: dict[str, Any]) -> ToolResultBlock:
    return (await call_all(notebook, [(name, arguments)]))[0]


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    title = nbformat.v4.new_markdown_cell("# Sales", id="title")
    load = nbformat.v4.new_code_cell("df = load()\ndf.head()", id="load", execution_count=3)
    load.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="loading...\n"),
        nbformat.v4.new_output("execute_result", data={"text/plain": "   a\n0  1"}, execution_count=3),
        nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo="}),
    ]
    noisy = nbformat.v4.new_code_cell("print('x' * 5000)", id="noisy", execution_count=4)
    noisy.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 5000 + "\n")]
    broken = nbformat.v4.new_code_cell("1 / 0", id="broken", execution_count=5)
    broken.outputs = [
        nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="division by zero", traceback=[])
    ]
    nb.cells = [title, load, noisy, broken]
    path = tmp_path / "analysis.ipynb"
    nbformat.write(nb, str(path))
    return path


def saved(path: Path) -> bytes:
    return path.read_bytes()


def cells(path: Path) -> list[tuple[str, str, str]]:
    """(id, type, source) of each cell of the saved file, which must validate."""
    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)
    return [(c.id, c.cell_type, c.source) for c in nb.cells]


async def test_read_cells_shows_ids_types_sources_and_trimmed_outputs(notebook: Path) -> None:
    block = await call(notebook, "read_cells", {})
    assert not block.is_error
    text = block.content
    assert text.startswith("[0] id=title markdown\n# Sales\n\n[1] id=load code (ran as In [3])\n")
    assert "df = load()\ndf.head()\n--- output ---\nloading...\n   a\n0  1\n(image/png)" in text
    assert "[2] id=noisy code (ran as In [4])" in text
    assert "x" * 1500 + "\n… (output truncated)" in text
    assert "x" * 1501 not in text
    assert text.endswith(
        "[3] id=broken code (ran as In [5])\n1 / 0\n--- output ---\nZeroDivisionError: division by zero"
    )


async def test_read_cells_of_another_notebook_by_path(notebook: Path) -> None:
    other = notebook.parent / "other.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1", id="only")])
    nbformat.write(nb, str(other))
    block = await call(notebook, "read_cells", {"path": "other.ipynb"})
    assert block.content == "[0] id=only code\nx = 1"


async def test_without_a_known_notebook_the_error_says_to_pass_a_path() -> None:
    block = await call(None, "read_cells", {})
    assert block.is_error
    assert "does not know its notebook" in block.content
    assert "pass the notebook's path" in block.content


@pytest.fixture
def other(notebook: Path) -> Path:
    """A copy of ``notebook`` beside it: another notebook than the kernel's own."""
    copy = notebook.with_name("other.ipynb")
    copy.write_bytes(notebook.read_bytes())
    return copy


async def test_insert_into_another_notebook_at_an_index(notebook: Path, other: Path) -> None:
    block = await call(
        notebook, "insert_cell", {"source": "df.describe()", "index": 1, "path": "other.ipynb"}
    )
    assert not block.is_error
    ids = [c[0] for c in cells(other)]
    assert ids[0] == "title" and ids[2:] == ["load", "noisy", "broken"]
    assert cells(other)[1][1:] == ("code", "df.describe()")
    assert block.content == f"Inserted a code cell with id {ids[1]} at index 1 of other.ipynb."


async def test_insert_a_markdown_cell_past_the_end_appends_it(notebook: Path, other: Path) -> None:
    arguments = {"source": "## Notes", "cell_type": "markdown", "index": 99, "path": "other.ipynb"}
    block = await call(notebook, "insert_cell", arguments)
    assert "at index 4" in block.content
    assert cells(other)[-1][1:] == ("markdown", "## Notes")


async def test_an_index_into_this_notebook_is_still_a_proposal_below(notebook: Path) -> None:
    # Written to the file, the cell would sit where the user does not look, unseen until reload.
    shell = RecordingShell()
    before = saved(notebook)
    calls = [
        ("insert_cell", {"source": "df.describe()", "index": 1}),
        ("insert_cell", {"source": "df.plot()", "index": 0, "path": "analysis.ipynb"}),
    ]
    blocks = await call_all(notebook, calls, shell)
    assert all(b.content.startswith("Proposed the cell below the current one;") for b in blocks)
    assert shell.proposed[-1] == ("df.describe()\n\ndf.plot()", False)
    assert saved(notebook) == before


async def test_an_unknown_cell_type_is_refused(notebook: Path) -> None:
    before = saved(notebook)
    block = await call(notebook, "insert_cell", {"source": "x", "cell_type": "raw"})
    assert block.is_error
    assert 'cell_type must be "code" or "markdown"' in block.content
    assert saved(notebook) == before


async def test_edit_is_refused_when_the_cell_changed(notebook: Path) -> None:
    before = saved(notebook)
    arguments = {"cell_id": "load", "old_source": "df = load()", "new_source": "df = load(fresh=True)"}
    block = await call(notebook, "edit_cell", arguments)
    assert block.is_error
    assert "Cell load changed since you read it; nothing was edited." in block.content
    assert "df = load()\ndf.head()" in block.content  # its source now, to retry with
    assert saved(notebook) == before


async def test_edit_applies_when_the_source_matches_and_clears_outputs(notebook: Path) -> None:
    arguments = {"cell_id": "load", "old_source": "df = load()\ndf.head()", "new_source": "df = load(2)"}
    block = await call(notebook, "edit_cell", arguments)
    assert block.content == "Edited cell load in the saved file analysis.ipynb."
    cell = nbformat.read(str(notebook), as_version=4).cells[1]
    assert (cell.id, cell.source, cell.outputs, cell.execution_count) == ("load", "df = load(2)", [], None)
    assert [c[0] for c in cells(notebook)] == ["title", "load", "noisy", "broken"]


async def test_an_unknown_cell_id_lists_the_ids(notebook: Path) -> None:
    block = await call(notebook, "edit_cell", {"cell_id": "nope", "old_source": "", "new_source": "x"})
    assert block.is_error
    assert "No cell with id 'nope'. Cell ids: title, load, noisy, broken." in block.content


async def test_delete_is_guarded_by_the_old_source(notebook: Path) -> None:
    before = saved(notebook)
    block = await call(notebook, "delete_cell", {"cell_id": "broken", "old_source": "2 / 0"})
    assert block.is_error
    assert "nothing was deleted" in block.content
    assert saved(notebook) == before
    block = await call(notebook, "delete_cell", {"cell_id": "broken", "old_source": "1 / 0"})
    assert block.content == "Deleted cell broken (it was at index 3) from the saved file analysis.ipynb."
    assert [c[0] for c in cells(notebook)] == ["title", "load", "noisy"]


@pytest.mark.parametrize(
    ("to_index", "order"),
    [
        (0, ["broken", "title", "load", "noisy"]),
        (2, ["title", "load", "broken", "noisy"]),
        (-5, ["broken", "title", "load", "noisy"]),
        (99, ["title", "load", "noisy", "broken"]),
    ],
)
async def test_move(notebook: Path, to_index: int, order: list[str]) -> None:
    block = await call(notebook, "move_cell", {"cell_id": "broken", "to_index": to_index})
    assert not block.is_error
    assert [c[0] for c in cells(notebook)] == order


async def test_saved_file_keeps_the_other_cells_outputs(notebook: Path) -> None:
    await call(notebook, "move_cell", {"cell_id": "title", "to_index": 3})
    nb = nbformat.read(str(notebook), as_version=4)
    nbformat.validate(nb)
    assert [o.output_type for o in nb.cells[0].outputs] == ["stream", "execute_result", "display_data"]
    assert nb.cells[0].execution_count == 3


# -- proposals below the running cell --------------------------------------------------------------


async def test_insert_without_an_index_proposes_through_set_next_input(notebook: Path) -> None:
    shell = RecordingShell()
    before = saved(notebook)
    [block] = await call_all(notebook, [("insert_cell", {"source": "df.plot()"})], shell)
    assert not block.is_error
    assert "Proposed the cell below the current one" in block.content
    assert shell.proposed == [("df.plot()", False)]
    assert saved(notebook) == before


async def test_several_proposals_are_joined_into_one_cell(notebook: Path) -> None:
    shell = RecordingShell()
    calls = [
        ("insert_cell", {"source": "df.plot()"}),
        ("insert_cell", {"source": "Plots **below**.", "cell_type": "markdown"}),
    ]
    await call_all(notebook, calls, shell)
    assert shell.proposed == [
        ("df.plot()", False),
        ("df.plot()\n\n%%markdown\nPlots **below**.", False),
    ]


async def test_proposals_need_no_known_notebook() -> None:
    shell = RecordingShell()
    [block] = await call_all(None, [("insert_cell", {"source": "x = 1"})], shell)
    assert not block.is_error
    assert shell.proposed == [("x = 1", False)]


# -- a notebook run headless (python -m ipyagent run, nbval) ---------------------------------------


async def test_headless_an_insert_into_this_notebook_says_the_file_is_not_changed(notebook: Path) -> None:
    shell = RecordingShell()
    before = saved(notebook)
    calls = [
        ("insert_cell", {"source": "df.describe()", "index": 1}),
        ("insert_cell", {"source": "## Notes", "cell_type": "markdown", "path": "analysis.ipynb"}),
    ]
    blocks = await call_all(notebook, calls, shell, headless=True)
    assert [b.is_error for b in blocks] == [False, False]
    assert "the notebook file is not changed" in blocks[0].content
    assert shell.proposed[-1] == ("df.describe()\n\n%%markdown\n## Notes", False)
    assert saved(notebook) == before


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("edit_cell", {"cell_id": "load", "old_source": "df = load()\ndf.head()", "new_source": "x"}),
        ("delete_cell", {"cell_id": "broken", "old_source": "1 / 0"}),
        ("move_cell", {"cell_id": "broken", "to_index": 0}),
    ],
)
async def test_headless_this_notebook_is_not_edited(
    notebook: Path, name: str, arguments: dict[str, Any]
) -> None:
    before = saved(notebook)
    [block] = await call_all(notebook, [(name, arguments)], headless=True)
    assert block.is_error
    assert "run headless" in block.content and "with insert_cell instead" in block.content
    assert saved(notebook) == before


async def test_headless_other_notebooks_are_still_edited(notebook: Path) -> None:
    other = notebook.parent / "other.ipynb"
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1", id="only")]), str(other)
    )
    [block] = await call_all(
        notebook, [("insert_cell", {"source": "y = 2", "index": 1, "path": "other.ipynb"})], headless=True
    )
    assert not block.is_error
    assert [c[2] for c in cells(other)] == ["x = 1", "y = 2"]


async def test_headless_reading_this_notebook_leaves_out_outputs_of_an_earlier_run(notebook: Path) -> None:
    [block] = await call_all(notebook, [("read_cells", {})], headless=True)
    assert "Saved outputs are left out" in block.content
    assert "df = load()\ndf.head()" in block.content
    assert "loading..." not in block.content and "--- output ---" not in block.content


# -- permissions ---------------------------------------------------------------------------------


def test_reading_is_read_only_and_every_edit_is_mutating(tmp_path: Path) -> None:
    flags = {
        t.name: t.read_only for t in notebook_tools(RecordingShell(), MainThread(), tmp_path / "a.ipynb")
    }
    assert flags == {
        "read_cells": True,
        "insert_cell": False,
        "edit_cell": False,
        "delete_cell": False,
        "move_cell": False,
    }


# -- concurrent edits, old notebooks, long notebooks ---------------------------------------------


def numbered(path: Path, count: int) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"x = {i}", id=f"c{i}") for i in range(count)]
    nbformat.write(nb, str(path))


def test_concurrent_edits_of_different_cells_are_all_kept(tmp_path: Path) -> None:
    path = tmp_path / "a.ipynb"
    numbered(path, 40)
    tools = {t.name: t.function for t in notebook_tools(RecordingShell(), MainThread(), path)}

    def edit(i: int) -> str:
        return str(tools["edit_cell"](cell_id=f"c{i}", old_source=f"x = {i}", new_source=f"y = {i}"))

    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(edit, range(40)))
    assert all(r.startswith("Edited cell") for r in replies), replies
    assert [source for _, _, source in cells(path)] == [f"y = {i}" for i in range(40)]


EDITOR = """
import sys
from pathlib import Path
from ipyagent.kernel.runner import MainThread
from ipyagent.kernel.tools.files import WorkspaceError
from ipyagent.kernel.tools.notebook import notebook_tools

path, first = Path(sys.argv[1]), int(sys.argv[2])
edit = {t.name: t.function for t in notebook_tools(None, MainThread(), path)}["edit_cell"]
print("ready", flush=True)
sys.stdin.readline()
for i in range(first, 40, 2):
    edit(cell_id=f"c{i}", old_source=f"x = {i}", new_source=f"y = {i}")
"""


def test_two_processes_editing_one_notebook_keep_every_edit(tmp_path: Path) -> None:
    path = tmp_path / "a.ipynb"
    numbered(path, 40)
    editors = [
        subprocess.Popen(
            [sys.executable, "-c", EDITOR, str(path), str(first)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for first in (0, 1)
    ]
    for editor in editors:  # both loaded, then both go at once
        assert editor.stdout is not None and editor.stdout.readline().strip() == "ready"
    for editor in editors:
        assert editor.stdin is not None
        editor.stdin.write("go\n")
        editor.stdin.flush()
    for editor in editors:
        editor.communicate(timeout=60)
        assert editor.returncode == 0
    assert [source for _, _, source in cells(path)] == [f"y = {i}" for i in range(40)]


OLD_NOTEBOOK = {  # nbformat 4.4: cells have no ids
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Old"]},
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": ["a = 1"]},
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": ["b = 2"]},
    ],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 4,
}


async def test_a_notebook_without_cell_ids_gets_stable_ones_and_can_be_edited(tmp_path: Path) -> None:
    path = tmp_path / "old.ipynb"
    path.write_text(json.dumps(OLD_NOTEBOOK))
    first = (await call(path, "read_cells", {})).content
    assert "id=?" not in first
    assert (await call(path, "read_cells", {})).content == first  # the same ids every time
    ids = re.findall(r"id=(\S+)", first)
    assert len(set(ids)) == 3
    edited = await call(path, "edit_cell", {"cell_id": ids[2], "old_source": "b = 2", "new_source": "b = 3"})
    assert not edited.is_error, edited.content
    # Saved as nbformat 4.5 with the ids the model was shown, so later edits find them too.
    assert cells(path) == [
        (ids[0], "markdown", "# Old"),
        (ids[1], "code", "a = 1"),
        (ids[2], "code", "b = 3"),
    ]
    moved = await call(path, "move_cell", {"cell_id": ids[0], "to_index": 2})
    assert not moved.is_error, moved.content


async def test_read_cells_pages_through_a_long_notebook(tmp_path: Path) -> None:
    path = tmp_path / "long.ipynb"
    nb = nbformat.v4.new_notebook()
    # About 130k characters: several pages.
    nb.cells = [nbformat.v4.new_code_cell(f"value_{i} = {i}  # " + "z" * 80, id=f"c{i}") for i in range(1200)]
    nbformat.write(nb, str(path))
    seen: list[int] = []
    arguments: dict[str, Any] = {}
    for _ in range(100):
        text = (await call(path, "read_cells", arguments)).content
        assert "[truncated:" not in text  # each page fits what the model is sent
        seen += [int(i) for i in re.findall(r"^\[(\d+)\] id=", text, flags=re.MULTILINE)]
        more = re.search(r"read_cells\(start=(\d+)\)", text)
        if more is None:
            break
        assert "of 1200 cells" in text
        arguments = {"start": int(more.group(1))}
    assert seen == list(range(1200))
    page = (await call(path, "read_cells", {"start": 10, "limit": 3})).content
    assert re.findall(r"^\[(\d+)\]", page, flags=re.MULTILINE) == ["10", "11", "12"]
    assert "read_cells(start=13)" in page


def test_a_named_pipe_in_place_of_a_notebook_is_refused_without_blocking(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe.ipynb"
    os.mkfifo(pipe)
    tools = {t.name: t.function for t in notebook_tools(RecordingShell(), MainThread(), tmp_path / "a.ipynb")}
    with ThreadPoolExecutor(max_workers=1) as pool:  # a blocked open would never return
        reading = pool.submit(tools["read_cells"], path="pipe.ipynb")
        editing = pool.submit(
            tools["edit_cell"], path="pipe.ipynb", cell_id="c", old_source="", new_source="x"
        )
        for pending in (reading, editing):
            with pytest.raises(WorkspaceError, match="not a regular file"):
                pending.result(timeout=30)


async def test_a_saved_cell_changed_by_ipyagent_says_so(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    stamp = {"session": "a.agent.jsonl", "run": "r-7", "call": "call_1"}
    nb.cells = [
        nbformat.v4.new_code_cell("total = 2", id="c1", execution_count=3, metadata={"ipyagent": stamp})
    ]
    path = tmp_path / "a.ipynb"
    nbformat.write(nb, str(path))
    block = await call(path, "read_cells", {})
    assert block.content == "[0] id=c1 code (ran as In [3]; changed by ipyagent, run r-7)\ntotal = 2"
