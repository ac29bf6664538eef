"""``%%agent --verify`` in a real kernel: the flag reaches the run, and the cell's text output
names the values of the answer that no tool output shows."""

from __future__ import annotations

from conftest import Kernel, text_of

SETUP = """
%load_ext ipyagent
from ipyagent.testing import ScriptedModel, tool_call
import pandas as pd
df = pd.DataFrame({'x': [12.0, 13.0, 14.3]})
def script():
    return ScriptedModel([tool_call('run_python', {'code': 'df.x.mean()'}), 'The mean is 13.1, the max 15.',
                          'The mean is 13.1; the max is 15.'])
"""


def test_verify_asks_once_more_and_the_output_names_what_stays_untraced(kernel: Kernel) -> None:
    reply, _ = kernel.run(SETUP + "m = script()")
    assert reply["status"] == "ok", reply
    reply, outputs = kernel.run(
        "%%agent --verify -y --tools python -m m -o res\nWhat are the mean and max of df.x?"
    )
    assert reply["status"] == "ok", reply
    shown = text_of(outputs)
    assert "Asking the model to compute 15 (verify)" in shown
    assert shown.rstrip().endswith("The mean is 13.1; the max is 15.\n⚠ Not found in any tool output: 15")
    reply, outputs = kernel.run("print(len(m.requests), [(c.text, c.traced) for c in res.claims])")
    assert text_of(outputs).strip() == "3 [('13.1', True), ('15', False)]"
    # Without the flag, the first answer ends the run.
    reply, outputs = kernel.run("m = script()\n")
    reply, outputs = kernel.run("%%agent -y --tools python -m m\nWhat are the mean and max of df.x?")
    assert "(verify)" not in text_of(outputs)
    reply, outputs = kernel.run("print(len(m.requests))")
    assert text_of(outputs).strip() == "2"
