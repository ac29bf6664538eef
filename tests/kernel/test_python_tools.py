"""The live-kernel tools on a real IPython shell in this process: ``execute`` directly, the tools
through a real Agent with a scripted model."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import IPython
import matplotlib
import pytest
from IPython.testing.globalipapp import start_ipython

from ipyagent import Agent
from ipyagent.agentlib.events import ToolResult
from ipyagent.agentlib.messages import ToolResultBlock
from ipyagent.kernel.runner import MainThread
from ipyagent.kernel.tools.python import History, execute, format_history, python_tools
from ipyagent.testing import ScriptedModel, tool_call

matplotlib.use("Agg")


@pytest.fixture(scope="session")
def ipython() -> Any:
    # The process's test shell: start_ipython() starts it once and returns None after that.
    return start_ipython() or IPython.get_ipython()


@pytest.fixture
def shell(ipython: Any) -> Iterator[Any]:
    """The session's shell formatting every MIME type, as ipykernel's shell does (the terminal
    shell globalipapp builds formats text/plain only); names a test adds are removed after it."""
    formatter = ipython.display_formatter
    active, names = formatter.active_types, set(ipython.user_ns)
    formatter.active_types = list(formatter.format_types)
    yield ipython
    formatter.active_types = active
    for name in set(ipython.user_ns) - names:
        del ipython.user_ns[name]


async def call(
    shell: Any, name: str, arguments: dict[str, Any], *, auto_approve: bool = True
) -> tuple[ToolResultBlock, ToolResult]:
    """One call made by a scripted model: what the model reads, and the event the user's view gets."""
    agent = Agent(
        model=ScriptedModel([tool_call(name, arguments), "done"]),
        tools=python_tools(shell, MainThread()),
        auto_approve=auto_approve,
        workspace=Path(__file__).parent,
    )
    events: list[ToolResult] = []
    agent.on("tool_result", events.append)
    result = await agent.run("go")
    return result.messages[2].tool_results[0], events[0]


# -- execute -------------------------------------------------------------------------------------


def test_stdout_stderr_and_the_last_value_and_variables_persist(shell: Any) -> None:
    out = execute(shell, "import sys\nx = 21\nprint('out')\nprint('err', file=sys.stderr)\nx * 2")
    assert out.text == "[stdout]\nout\n\n[stderr]\nerr\n\n[result]\n42"
    assert not out.is_error
    assert out.display is None
    assert shell.user_ns["x"] == 21
    assert execute(shell, "x + 1").text == "[result]\n22"


def test_code_without_output_says_so(shell: Any) -> None:
    assert execute(shell, "y = None\ny").text == "(ran without output)"


def test_an_exception_quotes_the_agents_line_and_not_ipyagent(shell: Any) -> None:
    out = execute(shell, "def ratio(d):\n    return 1 / d\nprint('before')\nratio(0)")
    assert out.is_error
    assert out.text.startswith("[stdout]\nbefore\n\n[error]\nTraceback (most recent call last):\n")
    assert "    ratio(0)\n" in out.text
    assert "    return 1 / d\n" in out.text
    assert out.text.endswith("ZeroDivisionError: division by zero")
    assert "ipyagent" not in out.text
    assert "exec(" not in out.text


def test_a_deep_traceback_is_trimmed_to_its_last_frames(shell: Any) -> None:
    code = (
        "def ping(n):\n    if n == 0:\n        raise KeyError('bottom')\n    return pong(n - 1)\n"
        "def pong(n):\n    return ping(n - 1)\n"
        "ping(30)"
    )
    out = execute(shell, code)  # alternating frames, which Python does not fold as "repeated"
    assert out.is_error
    assert "  …\n" in out.text
    assert out.text.count('File "<agent-') <= 10
    assert "    raise KeyError('bottom')" in out.text
    assert out.text.endswith("KeyError: 'bottom'")


def test_a_syntax_error_is_an_error_result(shell: Any) -> None:
    out = execute(shell, "def broken(:\n    pass")
    assert out.is_error
    assert out.text.startswith("[error]\nSyntaxError: ")


def test_system_exit_is_an_error_result_not_an_escape(shell: Any) -> None:
    # argparse and scripts' main() call sys.exit: the model must read it, the kernel must go on.
    out = execute(shell, "import sys\nprint('usage: ...')\nsys.exit(2)")
    assert out.is_error
    assert "SystemExit: 2" in out.text
    assert "usage: ..." in out.text


def test_magics_work(shell: Any) -> None:
    out = execute(shell, "%time y = 3\ny")
    assert not out.is_error
    assert "Wall time" in out.text
    assert out.text.endswith("[result]\n3")


def test_a_figure_comes_back_as_png_and_is_closed(shell: Any) -> None:
    import matplotlib.pyplot as plt

    out = execute(shell, "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 3, 2]);")
    assert "[displayed]\n(shown to the user: a line chart with 1 line)" in out.text
    assert plt.get_fignums() == []
    assert isinstance(out.display, list)
    assert any("image/png" in bundle for bundle in out.display), [sorted(b) for b in out.display]


def test_an_empty_figure_is_closed_and_shows_nothing(shell: Any) -> None:
    # IPython renders a figure with nothing drawn to no PNG; a None in the bundle made an
    # invalid notebook output, and nbclient (nbconvert, papermill) stopped on it.
    import matplotlib.pyplot as plt

    out = execute(shell, "import matplotlib.pyplot as plt\nplt.figure()\nprint('made')")
    assert plt.get_fignums() == []
    assert all(value is not None for bundle in out.display or [] for value in bundle.values())
    assert "made" in out.text


def test_the_model_gets_a_figures_description_and_a_bounded_image(shell: Any) -> None:
    import base64
    import struct

    code = (
        "import matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots(figsize=(20, 5), dpi=200)\n"
        "ax.bar(['north', 'south'], [3, 5], label='units')\n"
        "ax.set_title('Units by region'); ax.set_xlabel('region'); ax.legend();"
    )
    out = execute(shell, code)
    assert (
        "(shown to the user: a bar chart 'Units by region' (x: region) with 2 bars, legend: units)"
        in out.text
    )
    [image] = out.images or []
    png = base64.b64decode(image.data or "")
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk
    assert (width, height) == (1024, 256)  # 4000 x 1000 pixels at its own size


def test_a_dataframe_is_text_for_the_model_and_html_for_the_user(shell: Any) -> None:
    out = execute(shell, "import pandas as pd\npd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3, 19]})")
    assert out.text.startswith("[result]\n   city  temp\n0  Oslo     3\n1  Lima    19")
    assert "<table" not in out.text
    assert isinstance(out.display, list) and len(out.display) == 1
    assert "<table" in out.display[0]["text/html"]


def test_displayed_objects_are_described_to_the_model_and_shown_to_the_user(shell: Any) -> None:
    out = execute(shell, "from IPython.display import HTML, display\ndisplay(HTML('<b>hi</b>'))")
    assert "[displayed]" in out.text
    assert "(also shown to the user as text/html)" in out.text
    assert out.display == [{"text/plain": "<IPython.core.display.HTML object>", "text/html": "<b>hi</b>"}]


def test_output_caps_state_the_cap(shell: Any) -> None:
    out = execute(shell, "print('x' * 20_000)\n'y' * 20_000")
    assert out.text.count("… (output truncated: 8,000 of 20,000 characters shown)") == 1
    assert "… (output truncated: 8,000 of 20,002 characters shown)" in out.text  # the repr's quotes
    assert len(out.text) < 17_000


# -- the tools -----------------------------------------------------------------------------------


async def test_run_python_is_mutating_and_a_headless_run_denies_it(shell: Any) -> None:
    block, _ = await call(shell, "run_python", {"code": "hacked = 1"}, auto_approve=False)
    assert block.is_error
    assert "needs the user's permission" in block.content
    assert "hacked" not in shell.user_ns
    flags = {t.name: t.read_only for t in python_tools(shell, MainThread())}
    assert flags == {
        "run_python": False,
        "list_variables": True,
        "describe_variable": True,
        "read_history": True,
    }


async def test_run_python_sends_text_to_the_model_and_rich_output_to_the_user(shell: Any) -> None:
    code = "import pandas as pd\nsales = pd.DataFrame({'units': [3, 5]})\nsales"
    block, event = await call(shell, "run_python", {"code": code})
    assert not block.is_error
    assert block.content.startswith("[result]\n   units\n0      3\n1      5")
    assert "<table" not in block.content
    assert isinstance(event.display, list) and "<table" in event.display[0]["text/html"]
    assert list(shell.user_ns["sales"].units) == [3, 5]


async def test_run_python_errors_are_error_results(shell: Any) -> None:
    block, _ = await call(shell, "run_python", {"code": "undefined_name + 1"})
    assert block.is_error
    assert "NameError: name 'undefined_name' is not defined" in block.content


async def test_list_variables_hides_modules_underscores_and_ipythons_own(shell: Any) -> None:
    execute(
        shell, "import json, numpy as np\n_scratch = 1\ncount = 3\nlabel = 'north'\ngrid = np.zeros((2, 3))"
    )
    block, _ = await call(shell, "list_variables", {})
    assert block.content.splitlines() == [
        "count: int 3",
        "grid: numpy.ndarray shape=(2, 3) dtype=float64",
        "label: str 'north'",
    ]


async def test_list_variables_with_none_defined(shell: Any) -> None:
    block, _ = await call(shell, "list_variables", {})
    assert block.content == "(no user variables yet)"


async def test_describe_a_dataframe(shell: Any) -> None:
    execute(shell, "import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3.5, 19.0]})")
    block, _ = await call(shell, "describe_variable", {"name": "df"})
    text = block.content
    assert text.startswith("df: pandas.DataFrame shape=(2, 2)\n")
    assert "columns/dtypes:\ncity     " in text
    assert "temp    float64" in text
    assert "head:\n   city  temp\n0  Oslo   3.5\n1  Lima  19.0" in text
    assert "memory: " in text


async def test_describe_a_column_written_as_an_attribute_or_a_key(shell: Any) -> None:
    execute(shell, "import pandas as pd\npenguins = pd.DataFrame({'body_mass_g': [3750.0, 3800.0]})")
    for name in ("penguins.body_mass_g", "penguins['body_mass_g']", 'penguins["body_mass_g"]'):
        block, _ = await call(shell, "describe_variable", {"name": name})
        assert block.content.startswith("penguins['body_mass_g']: pandas.Series shape=(2,) dtype=float64")


async def test_a_column_asked_for_as_a_variable_is_named_as_a_column(shell: Any) -> None:
    # The embedded models asked describe_variable for "color_intensity" and stopped at
    # "No variable named" (bench/data_tasks.py): the answer now says where it is.
    execute(shell, "import pandas as pd\nwine = pd.DataFrame({'color_intensity': [5.6, 4.4]})")
    block, _ = await call(shell, "describe_variable", {"name": "color_intensity"})
    assert block.content == (
        "'color_intensity' is not a variable: it is a column of wine. Describe it with "
        "describe_variable('wine.color_intensity'), or compute on it with run_python, "
        "e.g. wine['color_intensity'].describe()."
    )
    block, _ = await call(shell, "describe_variable", {"name": "wine.alcohol"})
    assert block.content.startswith("No variable named 'wine.alcohol'. User variables: ")


async def test_describe_an_array(shell: Any) -> None:
    execute(shell, "import numpy as np\nm = np.arange(6).reshape(2, 3)")
    block, _ = await call(shell, "describe_variable", {"name": "m"})
    assert block.content.startswith("m: numpy.ndarray shape=(2, 3) dtype=int64\nvalues:\narray([[0, 1, 2],")


async def test_describe_a_function(shell: Any) -> None:
    execute(shell, 'def fit(x, y=2, *, tol=1e-3):\n    """Fit y to x."""\n    return x')
    block, _ = await call(shell, "describe_variable", {"name": "fit"})
    assert block.content.splitlines() == [
        "fit: function fit",
        "signature: fit(x, y=2, *, tol=0.001)",
        "doc: Fit y to x.",
    ]


async def test_describe_an_unknown_name_lists_the_known_ones(shell: Any) -> None:
    execute(shell, "alpha = 1\nbeta = [1, 2]")
    block, _ = await call(shell, "describe_variable", {"name": "gamma"})
    assert not block.is_error
    assert block.content == "No variable named 'gamma'. User variables: alpha, beta."


# -- history -------------------------------------------------------------------------------------


def test_format_history_shows_inputs_outputs_and_errors(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    history = History()
    shell.events.register("post_run_cell", history.post_run_cell)
    try:
        first = shell.execution_count
        shell.run_cell("answer = 40 + 2\nanswer", store_history=True)
        shell.run_cell("answer / 0", store_history=True)
    finally:
        shell.events.unregister("post_run_cell", history.post_run_cell)
    capsys.readouterr()  # the failing cell printed its traceback
    assert history.errors == {first + 1: "ZeroDivisionError: division by zero"}
    assert format_history(shell, history, 2) == (
        f"In [{first}]:\nanswer = 40 + 2\nanswer\nOut[{first}]: 42\n\n"
        f"In [{first + 1}]:\nanswer / 0\nError: ZeroDivisionError: division by zero"
    )
    assert format_history(shell, history, 1).startswith(f"In [{first + 1}]:")


class NoCellsYet:
    """A shell before any cell ran: IPython's In starts with an empty entry."""

    user_ns: dict[str, Any] = {"In": [""], "Out": {}}  # noqa: RUF012


def test_format_history_before_any_cell() -> None:
    assert format_history(NoCellsYet(), History(), 10) == "(no cells have run yet)"


# -- inside the extension ------------------------------------------------------------------------


def close_when_stopped(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` closed itself once stopped; closes it if not, so that a leak fails the
    test that caused it rather than a later one at garbage collection."""
    deadline = time.monotonic() + 5
    while loop.is_running() and time.monotonic() < deadline:
        time.sleep(0.01)
    closed = loop.is_closed()
    if not closed:
        loop.close()
    return closed


def test_read_history_in_a_run_sees_the_errors_the_extension_records(
    shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ipyagent.kernel.extension import _STATES

    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    shell.extension_manager.load_extension("ipyagent")
    loop = _STATES[id(shell)].loop.loop
    try:
        shell.magics_manager.registry["AgentMagics"].session_dir = str(tmp_path)
        shell.run_cell("1 / 0", store_history=True)
        model = ScriptedModel([tool_call("read_history", {"n": 1}), "It divided by zero."])
        shell.user_ns["history_model"] = model
        shell.run_cell_magic("agent", "-m history_model --tools python", "What failed?")
    finally:
        shell.extension_manager.unload_extension("ipyagent")
        close_when_stopped(loop)  # the leak is test_stopping_the_kernel_loop_closes_it's to report
    capsys.readouterr()
    content = model.requests[1].messages[-1].tool_results[0].content
    assert content.startswith("In [")
    assert content.endswith("1 / 0\nError: ZeroDivisionError: division by zero")


# -- robustness ----------------------------------------------------------------------------------


def test_code_raising_keyboard_interrupt_is_an_error_result_not_an_interrupt(shell: Any) -> None:
    # Code may raise KeyboardInterrupt itself (a retry loop giving up, a test of a handler): that
    # is the code's error, for the model to read, not the user stopping the run.
    out = execute(shell, "print('before')\nraise KeyboardInterrupt('raised by the code')")
    assert out.is_error
    assert "KeyboardInterrupt: raised by the code" in out.text
    assert "before" in out.text


def test_a_real_interrupt_still_interrupts(shell: Any) -> None:
    # The kernel's interrupt is SIGINT: it must still stop the code and reach the waiting cell.
    with pytest.raises(KeyboardInterrupt):
        execute(shell, "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(60)")


async def test_run_python_raising_keyboard_interrupt_lets_the_run_go_on(shell: Any) -> None:
    block, _ = await call(shell, "run_python", {"code": "raise KeyboardInterrupt"})
    assert block.is_error
    assert "KeyboardInterrupt" in block.content
    assert "Interrupted by the user" not in block.content


async def test_a_variable_whose_repr_raises_does_not_hide_the_others(shell: Any) -> None:
    execute(
        shell,
        "class Broken:\n"
        "    def __repr__(self):\n"
        "        raise RuntimeError('no repr today')\n"
        "class OddShape:\n"
        "    @property\n"
        "    def shape(self):\n"
        "        raise ValueError('no shape')\n"
        "bad = Broken()\nodd = OddShape()\ngood = 1",
    )
    block, _ = await call(shell, "list_variables", {})
    assert not block.is_error, block.content
    lines = block.content.splitlines()
    assert "good: int 1" in lines
    assert "bad: __main__.Broken (unrepresentable: RuntimeError: no repr today)" in lines
    assert "odd: __main__.OddShape (unrepresentable: ValueError: no shape)" in lines
    described, _ = await call(shell, "describe_variable", {"name": "bad"})
    assert "unrepresentable: RuntimeError: no repr today" in described.content


def test_a_figure_of_several_charts_is_described_chart_by_chart(shell: Any) -> None:
    code = (
        "import matplotlib.pyplot as plt\n"
        "fig, (a, b) = plt.subplots(1, 2)\n"
        "a.plot([1, 2]); a.plot([2, 1]); b.scatter([1], [2]); b.set_ylabel('y');"
    )
    out = execute(shell, code)
    assert (
        "a figure of 2 charts: 1) a line chart with 2 lines; 2) a scatter plot (y: y) with 1 series of points"
        in out.text
    )


async def test_run_python_says_what_an_undo_cannot_put_back_before_its_code_runs(shell: Any) -> None:
    from ipyagent.kernel.variable_checkpoint import VariableCheckpoints

    variables = VariableCheckpoints(shell)
    seen: list[str] = []
    shell.user_ns.update(gen=(i for i in range(3)), seen=seen)
    agent = Agent(
        model=ScriptedModel(
            [tool_call("run_python", {"code": "seen.append('ran')\nfirst = next(gen)"}), "ok"]
        ),
        tools=python_tools(shell, MainThread(), variables=variables),
        auto_approve=True,
        workspace=Path(__file__).parent,
    )
    agent.on("run_warning", lambda event: seen.append(event.code))
    result = await agent.run("go")
    assert seen == ["undo_not_covered", "ran"], "the warning comes before the code runs"
    assert variables.undo(result.run_id).removed == ("first",)
    assert "first" not in shell.user_ns


def test_a_file_named_like_a_loaded_variable_gets_a_hint_to_use_the_variable(
    shell: Any, tmp_path: Path
) -> None:
    import pandas as pd

    shell.user_ns["penguins"] = pd.DataFrame({"island": ["Biscoe", "Dream"]})
    out = execute(shell, f"import pandas as pd\npenguins = pd.read_csv({str(tmp_path / 'penguins.csv')!r})")
    assert "read_csv" in out.text
    assert out.is_error and "FileNotFoundError" in out.text
    missing = str(tmp_path / "penguins.csv")
    assert out.text.endswith(
        "Hint: `penguins` is already loaded in this namespace (pandas.DataFrame shape=(2, 1)): "
        f"remove the line `penguins = pd.read_csv({missing!r})` and use `penguins`; read no file."
    )
    # A file of another name read into a loaded variable: the same hint, naming the variable.
    again = execute(shell, "import pandas as pd\nframe = penguins\npenguins = pd.read_csv('wine.csv')")
    assert "Hint: `penguins` is already loaded" in again.text
    assert "remove the line `penguins = pd.read_csv('wine.csv')`" in again.text
    assert list(shell.user_ns["penguins"].island) == ["Biscoe", "Dream"]  # the failed line bound nothing
    # Only a file named like a data variable: not a missing file of another name, not a module.
    assert "Hint" not in execute(shell, "open('other.csv')").text
    assert "Hint" not in execute(shell, "open('pd.csv')").text
