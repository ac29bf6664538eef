"""What ``%agent fix`` tells the model, without a kernel: the error, the cell, and a summary of
the variables the cell uses (most errors are about the data: a column that is not there)."""

from __future__ import annotations

import math

import pandas as pd

from ipyagent.kernel.fix_command import MAX_VARIABLES, FailedCell, fix_prompt, used_variables

FAILED = FailedCell(
    cell_id="total",
    index=None,
    source='total = sales["unit"].sum()\ntotal',
    ename="KeyError",
    evalue="'unit'",
    traceback="KeyError: 'unit'",
    live=False,
)


def test_the_prompt_shows_the_columns_of_the_frame_the_cell_uses() -> None:
    namespace = {"sales": pd.DataFrame({"region": ["north"], "units": [120]}), "pd": pd, "other": 1}
    variables = used_variables(FAILED.source, namespace)
    assert len(variables) == 1 and variables[0].startswith("sales: ")  # not the module, not `other`
    prompt = fix_prompt(FAILED, variables)
    assert "Cell id: total." in prompt and "It raised KeyError: 'unit'" in prompt
    assert "The variables it uses, as they are now:\nsales: " in prompt
    assert "units" in prompt.split("The variables it uses")[1]


def test_a_cell_naming_many_variables_shows_the_first_few() -> None:
    namespace = {f"v{i}": i for i in range(10)} | {"math": math, "_hidden": 1}
    source = " + ".join(f"v{i}" for i in reversed(range(10))) + " + _hidden + math.pi"
    names = [summary.split(":")[0] for summary in used_variables(source, namespace)]
    assert names == [f"v{i}" for i in reversed(range(10))][:MAX_VARIABLES]


def test_without_variables_the_prompt_says_nothing_of_them() -> None:
    assert "The variables it uses" not in fix_prompt(FAILED)
