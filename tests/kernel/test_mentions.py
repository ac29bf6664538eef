"""``@name`` mentions: which words are mentions, and what a mention attaches."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from ipyagent.agentlib.messages import Message, ToolResultBlock
from ipyagent.kernel.mentions import COMPUTE_TRIES, MAX_MENTIONS, compute_first, mentioned_variables
from ipyagent.testing import ScriptedModel, tool_call


@pytest.fixture
def ipython_shell(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An IPython shell in this process with ipyagent loaded; names a test adds are removed."""
    import IPython
    from IPython.testing.globalipapp import start_ipython

    from ipyagent.kernel.extension import _STATES

    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    shell = start_ipython() or IPython.get_ipython()  # started once per process
    names = set(shell.user_ns)
    shell.extension_manager.load_extension("ipyagent")
    loop = _STATES[id(shell)].loop.loop
    yield shell
    shell.extension_manager.unload_extension("ipyagent")
    deadline = time.monotonic() + 5  # the kernel's loop stops on unload, in its own thread
    while loop.is_running() and time.monotonic() < deadline:
        time.sleep(0.01)
    for name in set(shell.user_ns) - names:
        del shell.user_ns[name]


def test_a_mention_attaches_the_variables_summary_once() -> None:
    namespace = {"sales": pd.DataFrame({"region": ["north"], "units": [3]}), "n": 3}
    [block] = mentioned_variables("Plot @sales, then @sales again. (@missing)", namespace)
    assert block.text.startswith('<variable name="sales">\nsales: pandas.DataFrame shape=(1, 2)')
    assert "region" in block.text and block.text.endswith("</variable>")


def test_only_names_of_the_namespace_after_a_lone_at_sign_are_mentions() -> None:
    namespace = {"example": 1, "n": 2, "_hidden": 3, "df": 4}
    text = "Mail user@example.com about @n, @_hidden, @@df and x.@df."
    assert [b.text.split("\n")[0] for b in mentioned_variables(text, namespace)] == ['<variable name="n">']


def test_a_message_attaches_a_bounded_number_of_variables() -> None:
    namespace = {f"v{i}": i for i in range(20)}
    text = " ".join(f"@v{i}" for i in range(20))
    assert len(mentioned_variables(text, namespace)) == MAX_MENTIONS


def test_plain_names_attach_data_but_not_modules_functions_classes_or_hidden_names() -> None:
    import math

    namespace = {
        "df": pd.DataFrame({"color_intensity": [1.0, 2.0]}),
        "pd": pd,
        "math": math,
        "load": lambda: None,
        "Frame": pd.DataFrame,
        "Out": {},
        "limit": 3,
    }
    text = "In df, what is the median of `color_intensity`? Use pd, math and load(), stay under limit. Out"
    blocks = mentioned_variables(text, namespace, bare=True, hidden={"Out"})
    assert [b.attached for b in blocks] == ["df", "limit"]
    # One line each, no values: a small model's prompt stays short.
    assert (
        blocks[0].text.split("\n")[1]
        == "df: pandas.DataFrame shape=(2, 1); columns: color_intensity (float64)"
    )
    assert blocks[1].text.split("\n")[1] == "limit: int"
    assert mentioned_variables(text, namespace) == []  # without bare, only @mentions count


def test_a_name_both_mentioned_and_written_plainly_is_attached_once_as_a_mention() -> None:
    namespace = {"df": pd.DataFrame({"a": [1]}), "other": [1, 2]}
    blocks = mentioned_variables("Compare df with @other and @df; df.a too", namespace, bare=True)
    assert [b.attached for b in blocks] == ["@other", "@df"]


def test_a_prompt_naming_data_plainly_must_compute_first_when_run_python_is_offered() -> None:
    namespace = {"df": pd.DataFrame({"a": [1]})}
    plain = mentioned_variables("How many rows has df?", namespace, bare=True)
    mentioned = mentioned_variables("How many rows has @df?", namespace, bare=True)
    assert compute_first(plain, ["describe_variable"]) is None  # nothing to compute with
    assert compute_first(mentioned, ["run_python"]) is None  # @df attaches for every model
    assert compute_first([], ["run_python"]) is None
    policy = compute_first(plain, ["run_python", "describe_variable"])
    assert policy is not None
    prompt = Message.user("How many rows has df?")

    def result(is_error: bool, name: str = "run_python") -> Message:
        return Message.user("", ToolResultBlock(tool_call_id="c", name=name, content="", is_error=is_error))

    assert policy([prompt], []) == ("run_python",)
    assert policy([prompt, result(True)], []) == ("run_python",)  # a failed call: call again
    assert policy([prompt, result(True, "describe_variable"), result(True)], []) == ("run_python",)
    assert policy([prompt, result(True), result(False)], []) == "auto"  # computed: now answer
    assert policy([prompt] + [result(True)] * COMPUTE_TRIES, []) == "auto"  # the model may give up


@pytest.mark.parametrize(
    ("model_id", "prompt", "choice"),
    [
        ("local/scripted", "In df, how many rows have a above 1?", ("run_python",)),
        ("local/scripted", "What is a Jupyter kernel?", "auto"),
        (
            "local/scripted",
            "Call describe_variable on df, then say how many rows it has.",
            ("describe_variable",),
        ),
        ("scripted/script", "In df, how many rows have a above 1?", "auto"),  # a larger model decides
    ],
)
def test_the_embedded_model_computes_a_data_question_before_it_answers(
    ipython_shell: Any, tmp_path: Path, model_id: str, prompt: str, choice: object
) -> None:
    shell = ipython_shell
    shell.user_ns["df"] = pd.DataFrame({"a": [1, 2, 3]})
    model = ScriptedModel(
        [tool_call("run_python", {"code": "(df.a > 1).sum()"}), "2 rows."], model_id=model_id
    )
    shell.user_ns["small_model"] = model
    shell.magics_manager.registry["AgentMagics"].session_dir = str(tmp_path)
    shell.run_cell_magic("agent", "-y -m small_model --tools python", prompt)
    assert model.requests[0].tool_choice == choice
    assert [r.tool_choice for r in model.requests[1:]] == ["auto"]  # then it answers from the result


def test_held_to_run_python_the_embedded_model_corrects_a_guessed_file(
    ipython_shell: Any, tmp_path: Path
) -> None:
    shell = ipython_shell
    shell.user_ns["wine"] = pd.DataFrame({"alcohol": [12.0, 14.0]})
    model = ScriptedModel(
        [
            tool_call("run_python", {"code": "import pandas as pd\nwine = pd.read_csv('wine.csv')"}),
            tool_call("run_python", {"code": "wine.alcohol.max()"}),
            "14.0",
        ],
        model_id="local/scripted",
    )
    shell.user_ns["small_model"] = model
    shell.magics_manager.registry["AgentMagics"].session_dir = str(tmp_path)
    shell.run_cell_magic("agent", "-y -m small_model --tools python", "What is the highest alcohol in wine?")
    assert [r.tool_choice for r in model.requests] == [("run_python",), ("run_python",), "auto"]
    failed = model.requests[1].messages[-1].tool_results[0]
    assert failed.is_error and "`wine` is already loaded in this namespace" in failed.content
