"""`python -m ipyagent run NOTEBOOK`: the main job's headless runner."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat


def write(path: Path, cells: list[str], **metadata: object) -> None:
    nb = nbformat.v4.new_notebook(metadata=metadata)
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, str(path))


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JPY_SESSION_NAME", "IPYAGENT_REPLAY")}
    return subprocess.run(
        [sys.executable, "-m", "ipyagent", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_run_prints_each_agent_cell_and_saves_the_executed_notebook(tmp_path: Path) -> None:
    notebook = tmp_path / "demo.ipynb"
    write(
        notebook,
        [
            "%load_ext ipyagent",
            "from ipyagent.testing import ScriptedModel, tool_call\n"
            "m = ScriptedModel([tool_call('list_variables'), 'There is one variable, m.'])",
            "%%agent -m m --new\nWhat variables are there?",
        ],
        # as saved by an earlier run that kept its views' state
        widgets={"application/vnd.jupyter.widget-state+json": {"state": {"x": {}}, "version_major": 2}},
    )
    done = run(["run", str(notebook), "--output", str(tmp_path / "out.ipynb")], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "━━ %%agent -m m --new" in done.stdout
    assert "» What variables are there?" in done.stdout
    assert "There is one variable, m." in done.stdout
    assert "→ list_variables() ✓" in done.stdout
    executed = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4)
    assert all(cell.execution_count for cell in executed.cells)
    assert "widgets" not in executed.metadata  # no front-end bundle per view in the saved file
    assert (tmp_path / "demo.agent.jsonl").exists(), "the conversation is saved beside the notebook"


def test_a_failing_cell_fails_the_command(tmp_path: Path) -> None:
    notebook = tmp_path / "broken.ipynb"
    write(notebook, ["%load_ext ipyagent", "%%agent -m nowhere/model\nhello"])
    done = run(["run", str(notebook)], tmp_path)
    assert done.returncode == 1
    assert "Unknown endpoint" in done.stderr + done.stdout


def test_record_saves_the_notebook_with_its_cassette_and_keeps_both_when_a_cell_fails(
    tmp_path: Path,
) -> None:
    notebook = tmp_path / "demo.ipynb"
    setup = "%load_ext ipyagent\nfrom ipyagent.testing import ScriptedModel\nm = ScriptedModel(['Hi there.'])"
    write(notebook, [setup, "%%agent -m m --quiet -o r\nSay hi.", "print(r.text)"])
    done = run(["run", str(notebook), "--record"], tmp_path)
    assert done.returncode == 0, done.stderr
    executed = nbformat.read(str(notebook), as_version=4)  # saved in place, with its outputs
    assert executed.cells[2].outputs[0]["text"] == "Hi there.\n"
    cassette = tmp_path / "demo.cassette.jsonl"
    recorded = cassette.read_text()
    assert '"Say hi."' in recorded and '"Hi t"' in recorded, recorded[-900:]

    write(notebook, [setup, "%%agent -m m --quiet -o r\nSay hello.", "1 / 0"])
    done = run(["run", str(notebook), "--record"], tmp_path)
    assert done.returncode == 1
    assert "stay as they were" in done.stderr
    assert cassette.read_text() == recorded
    assert not nbformat.read(str(notebook), as_version=4).cells[2].outputs


def test_a_cell_that_times_out_fails_the_command_cleanly(tmp_path: Path) -> None:
    notebook = tmp_path / "slow.ipynb"
    write(notebook, ["import time\ntime.sleep(30)"])
    done = run(["run", str(notebook), "--timeout", "2", "--record"], tmp_path)
    assert done.returncode == 1
    assert "_async_handle_timeout" not in done.stderr  # reported, not an unhandled traceback
    assert "timed out" in done.stdout
    assert "Traceback" not in done.stderr, "the kernel is stopped while busy, not asked more"
    assert "stay as they were" in done.stderr
    assert not nbformat.read(str(notebook), as_version=4).cells[0].outputs


def saved_outputs(cell: nbformat.NotebookNode, text: str) -> None:
    """As an earlier run would have left them in the file."""
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    cell.execution_count = 9


def test_a_cell_that_did_not_run_says_so_and_shows_nothing_from_the_file(tmp_path: Path) -> None:
    notebook = tmp_path / "broken.ipynb"
    setup = "%load_ext ipyagent\nfrom ipyagent.testing import ScriptedModel\nm = ScriptedModel(['Hi there.'])"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in [setup, "%%agent -m m --new\nSay hi.", "1 / 0"]]
    nb.cells.append(nbformat.v4.new_code_cell("%%agent -m m\nAnd then?"))
    nb.cells.append(nbformat.v4.new_code_cell("print('after')"))
    saved_outputs(nb.cells[3], "AN ANSWER FROM AN EARLIER RUN")
    saved_outputs(nb.cells[4], "after")
    nbformat.write(nb, str(notebook))

    done = run(["run", str(notebook), "--output", str(tmp_path / "out.ipynb")], tmp_path)

    assert done.returncode == 1
    assert "Hi there." in done.stdout
    assert "AN ANSWER FROM AN EARLIER RUN" not in done.stdout
    assert "» And then?\n  (not run: an earlier cell failed)" in done.stdout
    # the error is readable in a log: the traceback's text without the terminal's colour codes
    assert "━━ cell 3 failed:\n  │ 1 / 0" in done.stdout
    assert "ZeroDivisionError: division by zero" in done.stdout
    assert "\x1b[" not in done.stdout + done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(
        r"✗ .*broken\.ipynb: 3 of 5 cells run \(cell 3 failed\), 2 agent cells, "
        r"model scripted/script, \d+\.\d s",
        summary,
    ), summary
    executed = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4)
    assert [c.execution_count for c in executed.cells] == [1, 2, 3, None, None]
    assert not executed.cells[3].outputs and not executed.cells[4].outputs


def test_several_notebooks_or_a_folder_run_in_parallel_and_any_failure_fails_the_command(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / ".ipynb_checkpoints").mkdir()
    setup = "%load_ext ipyagent\nfrom ipyagent.testing import ScriptedModel\nm = ScriptedModel(['Fine.'])"
    write(folder / "a.ipynb", [setup, "%%agent -m m --new\nHow are you?"])
    write(folder / "b.ipynb", [setup, "raise ValueError('b is broken')"])
    write(folder / ".ipynb_checkpoints" / "a-checkpoint.ipynb", ["raise ValueError('a checkpoint')"])

    done = run(["run", str(folder), "--jobs", "2"], tmp_path)

    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(
        re.fullmatch(r"✓ .*a\.ipynb: 2 of 2 cells run, 1 agent cell, model scripted/script, .*", x)
        for x in lines
    )
    assert any(
        re.fullmatch(r"✗ .*b\.ipynb: 2 of 2 cells run \(cell 2 failed\), 0 agent cells, no model used, .*", x)
        for x in lines
    )
    assert "ValueError: b is broken" in done.stdout
    assert "a checkpoint" not in done.stdout
    assert re.search(r"^2 notebooks: 1 passed, 1 failed, .* \(--jobs 2\)$", done.stdout, re.MULTILINE)

    (folder / "b.ipynb").unlink()
    done = run(["run", str(folder / "a.ipynb"), str(folder / "a.ipynb")], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("✓") == 1, "a notebook named twice runs once"
