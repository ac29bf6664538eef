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
