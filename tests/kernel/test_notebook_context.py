"""The notebook's context sent with a prompt: what each part says, never a value, within its
token budget; and in a kernel, sent when asked for and shown folded in the run."""

from __future__ import annotations

import pytest
from conftest import Kernel, text_of

from ipyagent.agentlib.errors import UserError
from ipyagent.kernel.context import OutlineCell, parse_parts, render_context, variable_summaries

CELLS = [
    OutlineCell(id=f"c{n}", cell_type="code", source=f"step_{n} = load({n})\nmore()") for n in range(200)
]


def test_each_part_says_what_it_should() -> None:
    import pandas as pd

    frame = pd.DataFrame({"region": ["north"], "units": [3]})
    variables = variable_summaries({"sales": frame, "secret": "hunter2", "fn": len, "n": [1, 2]})
    context = render_context(
        ("cell", "outline", "variables", "error"),
        cells=CELLS[:3],
        current_id="c1",
        variables=variables,
        last_error="ZeroDivisionError: division by zero",
    )
    assert context is not None and not context.trimmed
    text = context.text
    assert "## The cell this run is in (id c1)\nstep_1 = load(1)\nmore()" in text
    assert "0 [c0] code: step_0 = load(0)" in text
    assert "sales: pandas.DataFrame shape=(1, 2) columns: region, units" in text
    assert "secret: str len=7" in text and "hunter2" not in text  # never a value
    assert "fn:" not in text  # code, not data
    assert "ZeroDivisionError: division by zero" in text
    assert context.parts == ("cell", "outline", "variables", "error")


def test_a_big_notebook_is_trimmed_to_the_budget_biggest_part_first() -> None:
    variables = {f"v{n}": "int" for n in range(50)}
    context = render_context(
        ("outline", "variables"),
        cells=CELLS,
        current_id=None,
        variables=variables,
        last_error=None,
        budget=500,
    )
    assert context is not None and context.trimmed
    assert context.tokens <= 500 + 10
    assert "v49: int" in context.text  # the small part is whole
    assert "… (more left out: the context budget is full)" in context.text
    assert "199 [c199]" not in context.text


def test_parts_are_named_or_all_or_none() -> None:
    assert parse_parts("all") == ("cell", "outline", "variables", "error")
    assert parse_parts("none") == () == parse_parts("")
    assert parse_parts("variables, outline") == ("outline", "variables")
    with pytest.raises(UserError, match="Unknown context part"):
        parse_parts("secrets")


def test_a_prompt_carries_the_context_when_asked_and_the_run_shows_it(kernel: Kernel) -> None:
    kernel.run(
        "%load_ext ipyagent\nfrom ipyagent.testing import ScriptedModel\n"
        "sales = [1, 2, 3]\nm = ScriptedModel(['One.', 'Two.'])"
    )
    kernel.run("1 / 0")
    reply, outputs = kernel.run("%%agent -m m --context variables,error\nWhat failed?")
    assert reply["status"] == "ok", reply
    assert "notebook context" not in text_of(outputs)  # folded in the view; no output headless
    _, outputs = kernel.run(
        "blocks = m.requests[0].messages[-1].content\n"
        "print(blocks[0].text)\nprint(blocks[1].attached)\nprint(blocks[1].text)"
    )
    shown = text_of(outputs)
    assert shown.startswith("What failed?\nnotebook context\n<notebook-context>")
    assert "sales: list len=3" in shown and "ZeroDivisionError: division by zero" in shown
    kernel.run("%%agent -m m --context none\nAgain.")
    _, outputs = kernel.run("print(len(m.requests[1].messages[-1].content))")
    assert text_of(outputs).strip() == "1"


def test_by_default_every_part_goes_except_to_the_embedded_model(kernel: Kernel) -> None:
    kernel.run("%load_ext ipyagent\nfrom ipyagent.testing import ScriptedModel\nn = 3")
    kernel.run("m = ScriptedModel(['Hi.'])\nlocal = ScriptedModel(['Hi.'], model_id='local/tiny')")
    kernel.run("%%agent -m m\nHello.")
    kernel.run("%%agent -m local --new\nHello.")
    _, outputs = kernel.run(
        "print([b.attached for b in m.requests[0].messages[-1].content])\n"
        "print([b.attached for b in local.requests[0].messages[-1].content])\n"
        "print(m.requests[0].messages[-1].text)"
    )
    assert text_of(outputs).split("\n")[:3] == ["[None, 'notebook context']", "[None]", "Hello."]


def test_the_embedded_model_gets_the_data_its_prompt_names(kernel: Kernel) -> None:
    # Without it, the 1.5B model asked about `df` guessed a file to read (issue: data answers).
    kernel.run(
        "%load_ext ipyagent\nfrom ipyagent.testing import ScriptedModel\nimport pandas as pd\n"
        "df = pd.DataFrame({'color_intensity': [1.0, 2.0, 4.0]})\n"
        "local = ScriptedModel(['2.0'] * 3, model_id='local/tiny')\nremote = ScriptedModel(['2.0'])"
    )
    kernel.run("%%agent -m local --new\nIn df, what is the median of color_intensity? (pd is imported)")
    kernel.run("%%agent -m local --new --context none\nAnd in @df?")
    kernel.run("%%agent -m remote --new --context none\nIn df, what is the median?")
    _, outputs = kernel.run(
        "for m, i in ((local, 0), (local, 1), (remote, 0)):\n"
        "    print([b.attached for b in m.requests[i].messages[-1].content])\n"
        "print(local.requests[0].messages[-1].content[1].text)"
    )
    lines = text_of(outputs).split("\n")
    # auto: the named frame; an explicit --context still honours @mentions; a remote model's
    # auto context already lists the variables, and plain names add nothing to --context none.
    assert lines[:3] == ["[None, 'df']", "[None, '@df']", "[None]"]
    assert "color_intensity" in "\n".join(lines[3:]) and "pandas.DataFrame shape=(3, 1)" in lines[4]
