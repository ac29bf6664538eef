"""`python -m ipyagent run NOTEBOOK`: the main job's headless runner."""

from __future__ import annotations

import os
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
    assert "timed out" in done.stderr
    assert "stay as they were" in done.stderr
    assert not nbformat.read(str(notebook), as_version=4).cells[0].outputs
