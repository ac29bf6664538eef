"""Knowing from the request that no front end shows a cell, so a headless ``%%agent`` cell does
not wait for a view's hello; and waiting as before when the request does not say."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import Kernel, text_of

# Keeps the renderer's debug records (what it decided about the front end) for the test to read.
LISTEN = """
import logging
heard = []
class Keep(logging.Handler):
    def emit(self, record):
        heard.append(record.getMessage())
log = logging.getLogger('ipyagent')
log.addHandler(Keep())
log.setLevel(logging.DEBUG)
log.propagate = False
"""
SETUP = "%load_ext ipyagent\nfrom ipyagent.testing import ScriptedModel\n" + LISTEN
ASK = "from ipyagent.kernel.front_end import no_front_end\nprint(no_front_end(get_ipython()))"


def test_a_cell_run_by_nbclient_writes_its_outputs_without_waiting_for_a_view(jupyter_env: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        # No number in the answer: an untraced one would add a line to the text output.
        nbformat.v4.new_code_cell(SETUP + "m = ScriptedModel(['The answer is ready.'])"),
        nbformat.v4.new_code_cell("%%agent -m m\nWhat is 6 * 7?"),
        nbformat.v4.new_code_cell("print('\\n'.join(heard))"),
    ]
    NotebookClient(
        nb, timeout=60, kernel_name="ipyagent-test", resources={"metadata": {"path": str(jupyter_env)}}
    ).execute()

    outputs = nb.cells[1].outputs
    plain = [o["data"]["text/plain"] for o in outputs if o.get("output_type") == "display_data"]
    assert "ipyagent run" in plain  # the view is still shown, for a front end that renders it later
    assert "The answer is ready." in plain  # and the run's text is in the notebook
    heard = nb.cells[2].outputs[0]["text"]
    assert "No front end shows this cell (the request allows no input and names no cell" in heard
    assert "Waiting up to" not in heard


def _execute(kernel: Kernel, code: str, *, allow_stdin: bool, metadata: dict[str, Any] | None = None) -> str:
    """Send ``code`` as a front end would: input allowed or not, the cell's id in the metadata."""
    content = {
        "code": code, "silent": False, "store_history": True, "user_expressions": {},
        "allow_stdin": allow_stdin, "stop_on_error": True,
    }  # fmt: skip
    msg = kernel.kc.session.msg("execute_request", content, metadata=metadata or {})
    kernel.kc.shell_channel.send(msg)
    reply, outputs = kernel.collect(msg["header"]["msg_id"])
    assert reply["status"] == "ok", reply
    return text_of(outputs)


def test_what_a_request_says_about_the_front_end(kernel: Kernel) -> None:
    assert _execute(kernel, ASK, allow_stdin=False).startswith(
        "the request allows no input and names no cell"
    )  # nbclient, nbval
    # A console may show the view; a notebook front end (JupyterLab, Notebook 7, VS Code) names
    # the cell: wait and see.
    assert _execute(kernel, ASK, allow_stdin=True).strip() == "None"
    assert _execute(kernel, ASK, allow_stdin=True, metadata={"cellId": "c0ffee"}).strip() == "None"
    assert _execute(kernel, ASK, allow_stdin=False, metadata={"cellId": "c0ffee"}).strip() == "None"


def test_our_runners_say_so_whatever_the_request(jupyter_env: Path) -> None:
    kernel = Kernel(jupyter_env, env={"IPYAGENT_HEADLESS": "1"})
    try:
        said = _execute(kernel, ASK, allow_stdin=True, metadata={"cellId": "c0ffee"})
    finally:
        kernel.close()
    assert said.strip() == "$IPYAGENT_HEADLESS is set"


def test_when_the_request_does_not_say_the_run_waits_for_a_view_and_keeps_its_outputs(kernel: Kernel) -> None:
    _execute(kernel, SETUP + "m = ScriptedModel(['The answer is 42.'])", allow_stdin=True)
    shown = _execute(kernel, "%%agent -m m\nWhat is 6 * 7?", allow_stdin=True)
    assert "The answer is 42." in shown  # nobody said hello: the text is written after the wait
    heard = _execute(kernel, "print('\\n'.join(heard))", allow_stdin=True)
    assert "Waiting up to" in heard
    assert "No front end" not in heard
