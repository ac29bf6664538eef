"""The notebooks in notebooks/ are committed executed, each with the cassette its %%agent cells
replay from: a notebook saved without outputs would pass nbval without testing anything.

scripts/check then runs them under strict nbval, offline, from those cassettes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def agent_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "code" and c.source.lstrip().startswith("%%agent")]


def asks_the_model(nb: nbformat.NotebookNode) -> bool:
    """A %%agent cell or a chat, not the text of one inside a string (as 05 writes a notebook)."""
    chat = re.compile(r"^(\w+\s*=\s*)?%agent chat\b", re.MULTILINE)
    return bool(agent_cells(nb)) or any(c.cell_type == "code" and chat.search(c.source) for c in nb.cells)


def test_the_showcase_is_there() -> None:
    names = [path.stem for path in NOTEBOOKS]
    assert names == [
        "01-quickstart",
        "02-data-analysis",
        "03-tools-and-permissions",
        "04-chat-widget",
        "05-regression-testing",
        "06-live-notebook",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_each_notebook_was_run_from_the_top_and_kept_its_outputs(path: Path) -> None:
    nb = nbformat.read(str(path), as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    counts = [cell.execution_count for cell in code]
    assert counts == list(range(1, len(code) + 1)), f"{path.name}: run it with Restart & Run All"
    # An error is part of the story only where the cell says it is (06 shows %agent fix).
    expected = [cell for cell in code if "raises-exception" in cell.metadata.get("tags", [])]
    errors = [o for cell in code if cell not in expected for o in cell.outputs if o.output_type == "error"]
    assert not errors, f"{path.name} was saved with an error: {errors[0].ename}: {errors[0].evalue}"
    for cell in expected:
        assert [o for o in cell.outputs if o.output_type == "error"], (
            f"{path.name}: a raises-exception cell did not"
        )
    assert sum(len(cell.outputs) for cell in code) >= len(code) // 2, f"{path.name} has few outputs"
    for cell in agent_cells(nb):
        shown = [o for o in cell.outputs if o.output_type in ("display_data", "stream", "execute_result")]
        assert shown, f"{path.name}: a %%agent cell has no output:\n{cell.source}"
    # Each view's saved state carries the whole front-end bundle: hundreds of KB of noise in a diff.
    assert "widgets" not in nb.metadata, f"{path.name} keeps widget state: save it without (or run it)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_each_agent_notebook_has_its_cassette(path: Path) -> None:
    nb = nbformat.read(str(path), as_version=4)
    cells = agent_cells(nb)
    cassette = path.with_name(f"{path.stem}.cassette.jsonl")
    if not asks_the_model(nb):
        assert not cassette.exists(), f"{cassette.name} belongs to no cell that asks the model"
        return
    assert cassette.exists(), f"record it: python -m ipyagent run {path.name} --record"
    header, *requests = [json.loads(line) for line in cassette.read_text().splitlines()]
    assert header["format"] == "ipyagent-cassette"
    assert len(requests) >= len(cells), "each %%agent cell asks the model at least once"
    # Recorded from the embedded model: the showcase is real output, and replays need no key.
    assert {r["model_id"] for r in requests} == {"local/default"}
    assert all(r["error"] is None and not r["cancelled"] for r in requests)
