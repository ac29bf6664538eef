"""The agent's edits of the open notebook in a real JupyterLab: inserts, edits, moves and deletes
show at once, addressed by cell id; an edit based on a source the user has changed since is
refused with the document untouched; each edit is one undo step; undoing an edit leaves the
user's later work alone; changed cells say which session, run and call changed them.
Screenshots go to tests/browser/screenshots/live_edits/."""

from __future__ import annotations

import json
from typing import Any

import nbformat
from conftest import (
    Lab,
    document,
    index_of,
    open_notebook,
    output_of,
    run_by_id,
    run_cell,
    screenshot,
    sources,
    type_into,
    undo_in_lab,
    wait_done,
    write_cells,
)

# One turn of the agent: an edit, an insert, a move and a delete, each its own tool call.
EDITING_AGENT = """
%load_ext ipyagent
from ipyagent.testing import ScriptedModel, tool_call

m = ScriptedModel([
    [
        tool_call("edit_cell", {"cell_id": "c-total", "old_source": "total = 1 + 1",
                                "new_source": "total = 2"}),
        tool_call("insert_cell", {"source": "total * 2"}),
        tool_call("move_cell", {"cell_id": "c-import", "to_index": 0}),
        tool_call("delete_cell", {"cell_id": "c-print", "old_source": "print(total)"}),
    ],
    "Done.",
])
"""
SHOW = """
from ipyagent.kernel.live_notebook import live_document
results = [b.content for m in res.messages for b in m.tool_results]
calls = [b.id for m in res.messages for b in m.tool_calls]
seen = live_document().cell('c-total').provenance.model_dump()
print(json.dumps({'results': results, 'run': res.run_id, 'calls': calls, 'seen': seen}))
"""


def test_the_agent_inserts_edits_moves_and_deletes_cells_of_the_open_notebook(page: Any, lab: Lab) -> None:
    name = write_cells(
        lab,
        "edits.ipynb",
        [
            ("c-setup", EDITING_AGENT),
            ("c-total", "total = 1 + 1"),
            ("c-print", "print(total)"),
            ("c-import", "import math"),
            ("c-agent", "%%agent -m m --yes -o res --tools notebook\nTidy up my notebook."),
            ("c-show", "import json" + SHOW),
        ],
    )
    open_notebook(page, lab, name)
    run_by_id(page, "c-setup")
    run_by_id(page, "c-agent")
    screenshot(page, "live_edits", "1-agent-edited")

    cells = document(page)
    new_id = next(c["id"] for c in cells if c["source"] == "total * 2")
    assert [(c["id"], c["source"]) for c in cells] == [
        ("c-import", "import math"),
        ("c-setup", EDITING_AGENT),
        ("c-total", "total = 2"),
        ("c-agent", "%%agent -m m --yes -o res --tools notebook\nTidy up my notebook."),
        (new_id, "total * 2"),
        ("c-show", "import json" + SHOW),
    ], "the insert goes below the agent's cell; the move and the delete name cells by id"
    saved = nbformat.read(str(lab.root / name), as_version=4)
    assert [c.id for c in saved.cells][:3] == ["c-setup", "c-total", "c-print"], "the file was not written"

    run_by_id(page, "c-show")
    shown = json.loads(output_of(page, "c-show"))
    results = shown["results"]
    assert results[0] == "Edited cell c-total (at index 1) in the live notebook " + (
        "(the open document the user sees, changed at once; not saved yet)."
    )
    assert results[1].startswith(f"Inserted a code cell with id {new_id} at index 5 of the live notebook")
    assert results[2].startswith("Moved cell c-import to index 0 (at the top) of the live notebook")
    assert results[3].startswith("Deleted cell c-print from the live notebook")
    # Provenance: the conversation's file, the run and the call that changed the cell.
    by_id = {c["id"]: c for c in document(page)}
    stamp = {"session": "edits.agent.jsonl", "run": shown["run"]}
    assert by_id["c-total"]["ipyagent"] == {**stamp, "call": shown["calls"][0]}
    assert by_id[new_id]["ipyagent"] == {**stamp, "call": shown["calls"][1]}
    assert by_id["c-import"]["ipyagent"] is None, "a moved cell is not changed"
    assert shown["seen"] == by_id["c-total"]["ipyagent"], "a later read sees who changed the cell"

    # Each edit is one undo step: the delete, then the move, come back one at a time.
    undo_in_lab(page)
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells"
        ".some(c => c.id === 'c-print')"
    )
    after_one = [cell_id for cell_id, _ in sources(page)]
    assert after_one == ["c-import", "c-setup", "c-total", "c-print", "c-agent", new_id, "c-show"]
    undo_in_lab(page)
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells[0].id === 'c-setup'"
    )
    assert [cell_id for cell_id, _ in sources(page)][:4] == ["c-setup", "c-total", "c-print", "c-import"]
    assert dict(sources(page))["c-total"] == "total = 2", "one undo step undid one edit only"
    screenshot(page, "live_edits", "2-undone-twice")
    assert page.locator(".jp-ipyagent-review").count() == 2, "the edited and the inserted cell"

    # Two more: the insert, then the edit; their reviews go with them.
    undo_in_lab(page)
    undo_in_lab(page)
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells"
        ".find(c => c.id === 'c-total').getSource() === 'total = 1 + 1'"
    )
    assert new_id not in dict(sources(page))
    page.locator(".jp-ipyagent-review").first.wait_for(state="detached", timeout=10_000)
    assert page.locator(".jp-ipyagent-review").count() == 0


# The agent edits cell c-total from what it read; the user types into that cell first.
STALE_AGENT = """
%load_ext ipyagent
import time
from pathlib import Path
from ipyagent.testing import ScriptedModel, tool_call

def once_the_user_typed(request):
    deadline = time.monotonic() + 60
    while not Path("edits-go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return [tool_call("edit_cell", {"cell_id": "c-total", "old_source": "total = 1 + 1",
                                    "new_source": "total = 2"})]

m = ScriptedModel([once_the_user_typed, "Stopped."])
"""


def test_an_edit_of_a_cell_the_user_changed_meanwhile_is_refused(page: Any, lab: Lab) -> None:
    name = write_cells(
        lab,
        "stale.ipynb",
        [
            ("c-setup", STALE_AGENT),
            ("c-total", "total = 1 + 1"),
            ("c-agent", "%%agent -m m --yes -o res --tools notebook\nSimplify."),
            ("c-show", "print([b.content for m in res.messages for b in m.tool_results][0])"),
        ],
    )
    open_notebook(page, lab, name)
    run_by_id(page, "c-setup")
    run_cell(page, index_of(page, "c-agent"))
    type_into(page, "c-total", " + 40")
    (lab.root / "edits-go").touch()
    wait_done(page, "c-agent")
    run_by_id(page, "c-show")
    screenshot(page, "live_edits", "3-stale-refused")

    assert dict(sources(page))["c-total"] == "total = 1 + 1 + 40", "the user's edit is kept"
    assert {c["id"]: c["ipyagent"] for c in document(page)}["c-total"] is None
    refused = output_of(page, "c-show")
    assert refused.startswith("`edit_cell` raised WorkspaceError: Nothing was changed in the live notebook")
    assert "Cell c-total (now [1]) holds:\ntotal = 1 + 1 + 40\n" in refused
    assert "Call read_cells again" in refused


EDIT_AND_REMEMBER = """
%load_ext ipyagent
from ipyagent.kernel.extension import kernel_state
live = kernel_state(get_ipython()).live
stamp = {"session": "s.agent.jsonl", "run": "r-1", "call": "call-1"}
ops = [
    {"op": "replace", "cell_id": "c-a", "expect": "a = 1", "source": "a = 10"},
    {"op": "replace", "cell_id": "c-b", "expect": "b = 2", "source": "b = 20"},
    {"op": "insert", "after_id": "c-b", "cell_type": "markdown", "source": "Two changes.",
     "cell_id": "c-note"},
]
first = live.edit(ops, provenance=stamp, edit_id="e-once")
again = live.edit(ops, provenance=stamp, edit_id="e-once")
print(first == again, first.applied, [(c.cell_id, c.index) for c in first.cells])
"""
UNDO = """
answer = live.undo_edit("e-once")
print(json.dumps(answer.model_dump(mode="json")))
"""


def test_undoing_an_edit_keeps_what_the_user_did_since(page: Any, lab: Lab) -> None:
    name = write_cells(
        lab,
        "undo.ipynb",
        [
            ("c-edit", EDIT_AND_REMEMBER),
            ("c-a", "a = 1"),
            ("c-b", "b = 2"),
            ("c-c", "c = 3"),
            ("c-undo", "import json" + UNDO),
        ],
    )
    open_notebook(page, lab, name)
    run_by_id(page, "c-edit")
    assert output_of(page, "c-edit").strip() == "True True [('c-a', 1), ('c-b', 2), ('c-note', 3)]"
    assert [s for _, s in sources(page)][1:4] == ["a = 10", "b = 20", "Two changes."], "applied once"

    # The user changes a cell the edit wrote, and another one.
    type_into(page, "c-b", "0")
    type_into(page, "c-c", " + 3")
    run_by_id(page, "c-undo")
    screenshot(page, "live_edits", "4-undo-keeps-the-users-work")

    answer = json.loads(output_of(page, "c-undo"))
    assert answer["undone"] == [
        {"cell_id": "c-note", "index": None, "why": "", "source": None},
        {"cell_id": "c-a", "index": 1, "why": "", "source": None},
    ]
    assert answer["kept"] == [
        {"cell_id": "c-b", "index": 2, "why": "it was changed since", "source": "b = 200"}
    ]
    assert sources(page)[1:4] == [("c-a", "a = 1"), ("c-b", "b = 200"), ("c-c", "c = 3 + 3")]
    assert {c["id"]: c["ipyagent"] for c in document(page)}["c-a"] is None, "the stamp went with the edit"


REVIEWED_EDIT = """
%load_ext ipyagent
from ipyagent.kernel.extension import kernel_state
live = kernel_state(get_ipython()).live
ops = [
    {"op": "replace", "cell_id": "c-a", "expect": "a = 1", "source": "a = 10\\nprint(a)"},
    {"op": "replace", "cell_id": "c-b", "expect": "b = 2", "source": "b = 20"},
    {"op": "insert", "after_id": "c-b", "cell_type": "code", "source": "a + b", "cell_id": "c-sum"},
]
print(live.edit(ops, provenance={"session": None, "run": "r-1", "call": "call-1"}).applied)
"""


def review_of(page: Any, cell_id: str) -> Any:
    return page.locator(".jp-Notebook .jp-Cell").nth(index_of(page, cell_id)).locator(".jp-ipyagent-review")


def test_each_changed_cell_shows_its_diff_with_keep_and_undo(page: Any, lab: Lab) -> None:
    name = write_cells(lab, "review.ipynb", [("c-edit", REVIEWED_EDIT), ("c-a", "a = 1"), ("c-b", "b = 2")])
    open_notebook(page, lab, name)
    run_by_id(page, "c-edit")
    assert output_of(page, "c-edit").strip() == "True"
    page.locator(".jp-ipyagent-review").nth(2).wait_for(timeout=10_000)
    screenshot(page, "live_edits", "5-review")

    review = review_of(page, "c-a")
    assert review.locator(".jp-ipyagent-review-title").inner_text() == "ipyagent changed this cell"
    assert review.locator(".jp-ipyagent-review-removed").all_inner_texts() == ["- a = 1"]
    assert review.locator(".jp-ipyagent-review-added").all_inner_texts() == ["+ a = 10", "+ print(a)"]
    inserted = review_of(page, "c-sum")
    assert inserted.locator(".jp-ipyagent-review-title").inner_text() == "ipyagent inserted this cell"
    assert inserted.locator(".jp-ipyagent-review-added").all_inner_texts() == ["+ a + b"]

    # Keep one cell of the edit, undo another: only that one goes back.
    review.get_by_role("button", name="Keep").click()
    review_of(page, "c-a").wait_for(state="detached", timeout=10_000)
    review_of(page, "c-b").get_by_role("button", name="Undo").click()
    review_of(page, "c-b").wait_for(state="detached", timeout=10_000)
    assert dict(sources(page)) == {
        "c-edit": REVIEWED_EDIT,
        "c-a": "a = 10\nprint(a)",
        "c-b": "b = 2",
        "c-sum": "a + b",
    }

    # The user changes the inserted cell; its Undo leaves it alone and says why.
    type_into(page, "c-sum", " + 1")
    review_of(page, "c-sum").get_by_role("button", name="Undo").click()
    note = review_of(page, "c-sum").locator(".jp-ipyagent-review-note")
    note.wait_for(timeout=10_000)
    assert note.inner_text() == "Not undone: it was changed since, so your work there is kept."
    assert dict(sources(page))["c-sum"] == "a + b + 1"
    screenshot(page, "live_edits", "6-review-undo-kept")
    review_of(page, "c-sum").get_by_role("button", name="Keep").click()
    page.locator(".jp-ipyagent-review").first.wait_for(state="detached", timeout=10_000)
    assert page.locator(".jp-ipyagent-review").count() == 0
