"""Record and replay in real kernels: a recorded ``%%agent`` cell replays in a new kernel that has
no model at all, a changed prompt fails the cell with a diff, and ``pytest --nbval`` in strict
mode passes offline from the cassette."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import nbformat
import pytest
from conftest import Kernel, text_of
from nbclient import NotebookClient

from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.providers.replay import ReplayModel
from ipyagent.kernel import cassettes
from ipyagent.kernel.cassettes import ReplaySwitch, cassette_path
from ipyagent.testing import ScriptedModel

SETUP = "%load_ext ipyagent\nfrom ipyagent.testing import ScriptedModel, thinking, tool_call\nx = 3\n"
SCRIPT = (
    "m = ScriptedModel([[thinking('Look at x.'), tool_call('describe_variable', {'name': 'x'})], 'x is 3.'])"
)
CELL = "%%agent -o res\nWhat is x?"
# What the run did, whichever way the cell displays it (text, or a widget whose repr varies).
SUMMARY = (
    "print(res.status, repr(res.text))\n"
    "print([(c.name, c.arguments) for m in res.messages for c in m.tool_calls])\n"
    "print([r.content for m in res.messages for r in m.tool_results])"
)


def run(kernel: Kernel, code: str) -> tuple[str | None, str]:
    """The name of the error the cell raised (``None`` if it ran), and what it showed.

    The error comes from the cell's outputs, not from ``Kernel.run``'s reply, which is the next
    reply on the shell channel and not always this cell's."""
    _, outputs = kernel.run(code)
    errors = [o["ename"] for o in outputs if o["type"] == "error"]
    return (errors[0] if errors else None), re.sub(r"0x[0-9a-f]+", "0x…", text_of(outputs))


def run_ok(kernel: Kernel, code: str) -> str:
    error, shown = run(kernel, code)
    assert error is None, shown
    return shown


def run_agent(kernel: Kernel) -> tuple[str, str]:
    """The ``%%agent`` cell's output, and a summary of its result."""
    shown = run_ok(kernel, CELL)
    return shown, run_ok(kernel, SUMMARY)


def test_the_switch_reads_the_environment_and_defaults_beside_the_notebook(tmp_path: Path) -> None:
    switch = ReplaySwitch.from_env(
        {"IPYAGENT_REPLAY": "Replay", "IPYAGENT_CASSETTE": str(tmp_path / "c.jsonl")}
    )
    assert switch.mode == "replay" and switch.cassette_path(None) == tmp_path / "c.jsonl"
    assert ReplaySwitch.from_env({}).mode == "off"
    assert cassette_path(Path("/w/analysis.ipynb")) == Path("/w/analysis.cassette.jsonl")
    assert cassette_path(None) == Path.cwd() / "ipyagent.cassette.jsonl"
    with pytest.raises(UserError, match="IPYAGENT_REPLAY='sometimes' is not a replay mode"):
        ReplaySwitch.from_env({"IPYAGENT_REPLAY": "sometimes"})


def test_off_changes_nothing_and_replay_resolves_no_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a replay needs no key
    notebook = tmp_path / "nb.ipynb"
    switch = ReplaySwitch()
    assert switch.wrap("openai/gpt-4.1", notebook) == "openai/gpt-4.1"
    assert switch.wrap(None, notebook) is None
    switch.set("replay")
    model = switch.wrap("openai/gpt-4.1", notebook)
    assert isinstance(model, ReplayModel) and model.model_id == "openai/gpt-4.1"
    assert switch.wrap("openai/gpt-4.1", notebook) is model  # cells share one position
    assert model.cassette.path == tmp_path / "nb.cassette.jsonl"
    unnamed = switch.wrap(None, notebook)
    assert isinstance(unnamed, ReplayModel)
    with pytest.raises(UserError, match="No cassette at") as info:
        _ = unnamed.model_id  # the recorded model's, read from the cassette
    assert "record" in info.value.hint


def test_the_switch_closes_the_providers_it_resolved_to_record_and_no_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Closable(ScriptedModel):
        closed = 0

        def close(self) -> None:
            self.closed += 1

    resolved, given = Closable(["hi"]), Closable(["hi"])
    monkeypatch.setattr(cassettes, "_resolve", lambda model: resolved)
    switch = ReplaySwitch("record")
    switch.wrap("scripted/a", tmp_path / "nb.ipynb")
    switch.wrap(given, tmp_path / "nb.ipynb")
    switch.set("off")
    assert (resolved.closed, given.closed) == (1, 0)  # the caller's model is the caller's to close
    switch.close()
    assert resolved.closed == 1


async def test_what_differs_between_runners_of_a_notebook_does_not_fail_its_replay(tmp_path: Path) -> None:
    """A cell the agent runs takes the next count, which nbval (``store_history=False``) and
    ``python -m ipyagent run`` number differently, a traceback names the kernel's process and
    where Python is installed, and a DataFrame of strings takes another size with pyarrow."""
    from ipyagent.agentlib.messages import Message, ToolResultBlock
    from ipyagent.agentlib.model import ModelRequest, TextChunk

    def request(count: int, pid: int, memory: int, prefix: str) -> ModelRequest:
        result = (
            f"sales: DataFrame (3, 2)\nmemory: {memory} bytes\n"
            f"(execution count {count})\n\nTraceback (most recent call last):\n"
            f'  File "/tmp/ipykernel_{pid}/2543150158.py", line 1, in <module>\n'
            f'  File "{prefix}/lib/python3.11/site-packages/pandas/core/frame.py", line 4330\n'
            f'  File "{prefix}/lib/python3.11/json/decoder.py", line 337'
        )
        return ModelRequest(
            model="m",
            messages=[
                Message.user("Run it."),
                Message(role="user", content=[ToolResultBlock(tool_call_id="c", content=result)]),
            ],
        )

    switch = ReplaySwitch("record")
    recorder = switch.wrap(ScriptedModel(["Done."]), tmp_path / "nb.ipynb")
    assert isinstance(recorder, ReplayModel)
    [_ async for _ in recorder.stream(request(6, 15809, 341, "/work/main/.venv"))]
    switch.set("replay")
    replayer = switch.wrap(None, tmp_path / "nb.ipynb")
    assert isinstance(replayer, ReplayModel)
    # Raises on a mismatch:
    events = [e async for e in replayer.stream(request(1, 19843, 194, "/tmp/ci/.venv"))]
    assert "".join(e.text for e in events if isinstance(e, TextChunk)) == "Done."
    switch.close()


def test_a_recorded_cell_replays_in_a_kernel_with_no_model(jupyter_env: Path) -> None:
    notebook = jupyter_env / "analysis.ipynb"
    where = {"JPY_SESSION_NAME": str(notebook)}
    recorder = Kernel(jupyter_env, env={**where, "IPYAGENT_REPLAY": "record"})
    try:
        run_ok(recorder, SETUP + SCRIPT)
        run_ok(recorder, "%agent model m")
        recorded = run_agent(recorder)
        assert "completed 'x is 3.'" in recorded[1] and "describe_variable" in recorded[1]
        assert "recording to" in run_ok(recorder, "%agent cassette")
    finally:
        recorder.close()
    assert (jupyter_env / "analysis.cassette.jsonl").exists()  # beside the notebook

    player = Kernel(jupyter_env, env={**where, "IPYAGENT_REPLAY": "replay"})
    try:
        run_ok(player, "%load_ext ipyagent\nx = 3")  # no model, no key: only the cassette
        assert run_agent(player) == recorded
        status = run_ok(player, "%agent cassette")
        assert "analysis.cassette.jsonl (2 of 2 request(s) served)" in status

        run_ok(player, "%agent cassette replay")  # from the first request again, a new conversation
        error, shown = run(player, "%%agent\nWhat is y?")
        assert error == "AgentRunFailed"
        assert "[replay_mismatch]" in shown
        assert "-  text: What is x?\n+  text: What is y?" in shown
        assert "record analysis.cassette.jsonl again" in shown  # the hint says how to re-record
    finally:
        player.close()


def test_the_magic_records_and_replays_after_a_restart(kernel: Kernel, jupyter_env: Path) -> None:
    assert "cassette: off" in run_ok(kernel, "%load_ext ipyagent\n%agent cassette")
    cassette = jupyter_env / "ipyagent.cassette.jsonl"  # the kernel does not know its notebook
    assert f"recording to {cassette}" in run_ok(kernel, "%agent cassette record")
    run_ok(kernel, SETUP + SCRIPT + "\n%agent model m")
    recorded = run_agent(kernel)
    assert "(2 request(s) recorded)" in run_ok(kernel, "%agent cassette")

    kernel.restart()
    run_ok(kernel, "%load_ext ipyagent\nx = 3")
    assert "replaying" in run_ok(kernel, "%agent cassette replay")
    assert run_agent(kernel) == recorded

    error, shown = run(kernel, "%agent cassette rewind")
    assert error == "UserError" and "Usage: %agent cassette" in shown

    # The old spelling still works for one release, and says what replaced it.
    shown = run_ok(kernel, "%agent replay off")
    assert "`%agent replay` is now `%agent cassette`" in shown and "cassette: off" in shown


def _plugin_args() -> list[str]:
    registered = any(ep.value == "ipyagent.testing_plugin" for ep in entry_points(group="pytest11"))
    return [] if registered else ["-p", "ipyagent.testing_plugin"]


def _nbval(notebook: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """Plain ``pytest --nbval NOTEBOOK``: a notebook with a cassette replays it by default."""
    command = [sys.executable, "-m", "pytest", "--nbval", str(notebook), *options]
    command += [*_plugin_args(), "--nbval-kernel-name=ipyagent-test", "-p", "no:cacheprovider", "-q"]
    # As from another notebook's kernel: the inherited name must not decide which cassette is used.
    env = {**os.environ, "JPY_SESSION_NAME": str(notebook.with_name("other.ipynb"))}
    return subprocess.run(command, cwd=notebook.parent, env=env, capture_output=True, text=True, timeout=300)


QUIET = "%%agent --quiet -o res\nWhat is x?"
SHOWN = "%%agent -o res\nWhat is x?"


@pytest.mark.parametrize(
    "cell",
    [
        QUIET,
        SHOWN,
    ],
    ids=["quiet", "live-display"],
)
def test_nbval_strict_passes_offline_from_the_cassette(
    jupyter_env: Path, monkeypatch: pytest.MonkeyPatch, cell: str
) -> None:
    notebook = jupyter_env / "demo.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP + SCRIPT + "\n%agent model m"),
        nbformat.v4.new_code_cell(cell),
        nbformat.v4.new_code_cell("print(res.text, len(res.messages))"),
    ]
    nb.metadata["kernelspec"] = {"name": "ipyagent-test", "display_name": "test", "language": "python"}
    # Record: execute it as `python -m ipyagent run` would, with recording on, and save the outputs.
    monkeypatch.setenv("IPYAGENT_REPLAY", "record")
    monkeypatch.setenv("JPY_SESSION_NAME", str(notebook))
    NotebookClient(
        nb, kernel_name="ipyagent-test", resources={"metadata": {"path": str(jupyter_env)}}
    ).execute()
    nbformat.write(nb, notebook)
    monkeypatch.delenv("IPYAGENT_REPLAY")
    monkeypatch.delenv("JPY_SESSION_NAME")
    assert (jupyter_env / "demo.cassette.jsonl").exists()
    # The notebook really ran. print() writes its parts one by one, and the kernel's stdout may
    # flush between them (it flushes on a timer): one line can arrive as two stream outputs.
    printed = "".join(o["text"] for o in nb.cells[2].outputs if o["output_type"] == "stream")
    assert printed == "x is 3. 4\n"

    result = _nbval(notebook)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout

    nb.cells[1].source = cell.replace("What is x?", "What is x, really?")
    nbformat.write(nb, notebook)
    result = _nbval(notebook)  # which also proves that the cassette, not the script, answered
    assert result.returncode != 0
    assert "replay_mismatch" in result.stdout
    assert "+  text: What is x, really?" in result.stdout


def test_a_notebook_that_asks_the_model_and_has_no_cassette_fails_saying_how_to_record_one(
    jupyter_env: Path,
) -> None:
    notebook = jupyter_env / "new.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP + SCRIPT + "\n%agent model m"),
        nbformat.v4.new_code_cell(QUIET),
        nbformat.v4.new_code_cell("x + 1"),
    ]
    nb.metadata["kernelspec"] = {"name": "ipyagent-test", "display_name": "test", "language": "python"}
    nbformat.write(nb, notebook)

    result = _nbval(notebook)
    assert result.returncode != 0
    assert "new.ipynb asks the model but has no cassette to replay" in result.stdout
    assert f"python -m ipyagent run {notebook} --record" in result.stdout
    assert "2 passed, 1 error" in result.stdout, "only the cell that asks the model fails"
    assert not (jupyter_env / "new.cassette.jsonl").exists(), "replay never records"

    # Opting out: the model (here the notebook's scripted one) answers live, nothing is recorded.
    result = _nbval(notebook, "--ipyagent-replay=live", "--nbval-lax")
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (jupyter_env / "new.cassette.jsonl").exists()


def test_a_notebook_that_does_not_ask_the_model_needs_no_cassette(jupyter_env: Path) -> None:
    notebook = jupyter_env / "plain.ipynb"
    nb = nbformat.v4.new_notebook()
    # A string that holds a %%agent cell's text is not one.
    nb.cells = [nbformat.v4.new_code_cell('text = """\n%%agent\nhello"""\nprint(len(text))')]
    nb.metadata["kernelspec"] = {"name": "ipyagent-test", "display_name": "test", "language": "python"}
    nbformat.write(nb, notebook)
    result = _nbval(notebook, "--nbval-lax")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_a_headless_run_never_edits_the_notebook_it_runs(jupyter_env: Path) -> None:
    # The agent asks to insert a cell at index 0 of its own notebook: in a front end that edits
    # the file; recorded by `run` and replayed by nbval it must not, or testing a notebook would
    # change it.
    notebook = jupyter_env / "cells.ipynb"
    script = "m = ScriptedModel([tool_call('insert_cell', {'source': 'x + 1', 'index': 0}), 'Added.'])"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP + script),
        nbformat.v4.new_code_cell("%%agent -m m --new -y --tools notebook -o res\nPut x + 1 in a cell."),
        nbformat.v4.new_code_cell("print([r.content for m in res.messages for r in m.tool_results])"),
    ]
    nbformat.write(nb, notebook)
    env = {k: v for k, v in os.environ.items() if k not in ("JPY_SESSION_NAME", "IPYAGENT_REPLAY")}
    done = subprocess.run(
        [sys.executable, "-m", "ipyagent", "run", str(notebook), "--record"],
        cwd=jupyter_env, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    recorded = nbformat.read(notebook, as_version=4)
    assert [c.source for c in recorded.cells] == [c.source for c in nb.cells]
    assert "the notebook file is not changed" in recorded.cells[2].outputs[0]["text"]

    before = notebook.read_bytes()
    result = _nbval(notebook)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
    assert notebook.read_bytes() == before


def test_a_suite_recorded_in_parallel_replays_under_xdist_and_its_cassettes_name_no_machine_path(
    jupyter_env: Path,
) -> None:
    suite = jupyter_env / "suite"
    (suite / "data").mkdir(parents=True)
    for name in ("a", "b"):
        (suite / "data" / f"{name}.csv").write_text("x\n1\n")
        nb = nbformat.v4.new_notebook()
        script = (
            f"m = ScriptedModel([tool_call('list_files', {{'path': 'data'}}), 'Notebook {name} is here.'])\n"
            "%agent model m"
        )
        nb.cells = [
            nbformat.v4.new_code_cell(SETUP + script),
            nbformat.v4.new_code_cell("%%agent --tools files -o res\nWhat files are there?"),
            nbformat.v4.new_code_cell("print(res.text)"),  # needs the cells before it, in its kernel
        ]
        nbformat.write(nb, suite / f"{name}.ipynb")
    env = {k: v for k, v in os.environ.items() if k not in ("JPY_SESSION_NAME", "IPYAGENT_REPLAY")}
    done = subprocess.run(
        [sys.executable, "-m", "ipyagent", "run", str(suite), "--record", "--jobs", "2"],
        cwd=jupyter_env, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("a", "b"):
        cassette = (suite / f"{name}.cassette.jsonl").read_text()
        assert "b.csv" in cassette, "the tool's result is in it"
        # Nothing that differs between machines: the cassette replays on any checkout.
        for path in (str(jupyter_env.parent), os.path.expanduser("~") + os.sep, sys.prefix):
            assert path not in cassette, path

    result = _nbval(suite, "-n", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 passed" in result.stdout
