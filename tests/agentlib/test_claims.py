"""An answer's numbers and named values traced to the tool outputs of its run: what counts as
a claim, what counts as found, and the run's result carrying them."""

from __future__ import annotations

import pytest

from ipyagent import Agent, tool
from ipyagent.agentlib.claims import claims_summary, trace_claims
from ipyagent.agentlib.messages import Message, ToolCallBlock, ToolResultBlock
from ipyagent.testing import ScriptedModel, text, tool_call


def ran(output: str, *, code: str = "", is_error: bool = False, call_id: str = "c1") -> list[Message]:
    call = ToolCallBlock(id=call_id, name="run_python", arguments={"code": code}, raw_arguments="{}")
    result = ToolResultBlock(tool_call_id=call_id, name="run_python", content=output, is_error=is_error)
    return [Message(role="assistant", content=(call,)), Message(role="user", content=(result,))]


def traced(answer: str, messages: list[Message], question: str = "") -> dict[str, bool]:
    return {c.text: c.traced for c in trace_claims(answer, messages, question)}


@pytest.mark.parametrize(
    ("answer", "output"),
    [
        ("The median is 12.35.", "12.3456"),  # rounded to the decimals written
        ("The median is 12.", "12.4"),
        ("Revenue was 1,234,567 dollars.", "1234567"),  # thousands separators
        ("About 1.2 million rows.", "1234567"),  # a scale word
        ("Sales were 3.4k.", "3412"),
        ("12.3% of them survived.", "0.1234"),  # a share printed as a fraction
        ("12.3% of them survived.", "12.34"),  # or as a percentage
        ("It fell by 3.5 points.", "-3.5"),  # the sign said in words
        ("The change is −3.5.", "-3.5"),  # the minus sign
        ("The correlation is -0.42.", "-0.4213"),
        ("About 1.23e-05 of the mass.", "1.2345e-05"),
    ],
)
def test_a_number_is_found_where_an_output_rounds_to_it(answer: str, output: str) -> None:
    assert list(traced(answer, ran(f"result\n{output}\n")).values()) == [True]


@pytest.mark.parametrize(
    ("answer", "output"),
    [
        ("The median is 12.35.", "12.3"),  # more precise than anything computed
        ("The median is 12.4.", "12.3456"),  # rounded wrongly
        ("Revenue was 1,234,000 dollars.", "1234567"),  # an integer is exact to the unit
        ("12.3% of them survived.", "0.2"),
        ("About 1.2 million rows.", "1300000"),
    ],
)
def test_a_number_no_output_rounds_to_is_not_found(answer: str, output: str) -> None:
    assert list(traced(answer, ran(f"result\n{output}\n")).values()) == [False]


def test_what_the_question_gave_list_numbers_and_code_are_not_claims() -> None:
    answer = (
        "Among the top 3 regions:\n1. north sold 120\n2) south\n"
        "```python\ndf.nlargest(3, 'units')  # 7 more\n```\nIn `sales`, **north** leads."
    )
    claims = traced(answer, ran("north 120"), question="Which of the top 3 regions in `sales` sold most?")
    assert claims == {"120": True, "north": True}


def test_names_and_dates_are_found_whatever_their_case() -> None:
    output = "region\nNORTH    120\nbest day 2016-03-04\n"
    answer = "**North** sold most, on 2016-03-04; `east` sold least."
    assert traced(answer, ran(output)) == {"North": True, "2016-03-04": True, "east": False}


def test_tool_arguments_and_failed_calls_are_not_sources() -> None:
    messages = [*ran("Traceback: 42 is not a column", is_error=True), *ran("ok", code="x = 17", call_id="c2")]
    assert traced("The answer is 42, from 17.", messages) == {"42": False, "17": False}


def test_versions_names_and_identifiers_hold_no_numbers() -> None:
    assert traced("Python 3.11.7 ran col_1 and x2 as of py311.", ran("3")) == {}


def test_a_number_that_begins_a_compound_word_describes_and_claims_nothing() -> None:
    found = traced("A 2-dimensional table of 64-bit floats, 10-20 rows.", ran(""))
    assert found == {"10": False, "20": False}


def test_a_claim_says_where_it_was_found_and_the_summary_what_was_not() -> None:
    [first, second] = trace_claims("Mean 4.5 and max 99.", ran("count 10\nmean 4.50\nmax 7"))
    assert first.source is not None and (first.source.tool, first.source.line) == ("run_python", "mean 4.50")
    assert second.source is None
    assert claims_summary([first, second]) == (
        "traced: 1 of 2 values in the answer come from tool outputs; not found in any: 99"
    )
    assert claims_summary([]) == ""


def test_a_completed_run_carries_its_answers_claims() -> None:
    @tool(read_only=True)
    def median_of(column: str) -> str:
        """The median of a column."""
        return f"median of {column}: 5.1"

    model = ScriptedModel(
        [tool_call("median_of", {"column": "color_intensity"}), text("The median is 5.1, not 7.")]
    )
    result = Agent(model=model, tools=[median_of]).run_sync("What is the median of color_intensity?")
    assert [(c.text, c.traced) for c in result.claims] == [("5.1", True), ("7", False)]
    assert result.claims[0].source is not None and result.claims[0].source.tool == "median_of"
