"""``@name`` mentions: which words are mentions, and what a mention attaches."""

from __future__ import annotations

import pandas as pd

from ipyagent.kernel.mentions import MAX_MENTIONS, mentioned_variables


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
