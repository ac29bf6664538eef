"""The data-task suite (bench/data_tasks.py) holds together without a model: enough questions of
every kind, each expected answer computed from the real data, and a checker that takes the
answer as people write it and turns a wrong one down."""

from __future__ import annotations

import datetime as dt
import sys
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("vega_datasets")
pytest.importorskip("palmerpenguins")

# bench/ is on the path only while its modules load: it holds bench/mcp.py, which would shadow
# the mcp SDK for every test after this one in the same process.
_BENCH = str(Path(__file__).parents[1] / "bench")
sys.path.insert(0, _BENCH)
try:
    from _data_answers import Day, Name, Number, accepts, numbers_in
    from _data_questions import KINDS, LOADERS, QUESTIONS, expected_answer, setup_code
    from data_tasks import agent_cell, namespace_names, strays, verdict
finally:
    sys.path.remove(_BENCH)

# vega_datasets calls read_json with an option pandas 3 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_enough_questions_of_every_kind() -> None:
    assert len(QUESTIONS) >= 40
    per_kind = Counter(q.kind for q in QUESTIONS)
    assert set(per_kind) == set(KINDS)
    assert min(per_kind.values()) >= 5
    assert len({q.id for q in QUESTIONS}) == len(QUESTIONS)
    assert len({q.text for q in QUESTIONS}) == len(QUESTIONS)
    # --limit 8 asks one question of each kind.
    assert [q.kind for q in QUESTIONS[: len(KINDS)]] == list(KINDS)


def test_every_question_names_its_frames_and_only_loaded_ones() -> None:
    for q in QUESTIONS:
        assert q.frames and set(q.frames) <= set(LOADERS), q.id
        for frame in q.frames:
            assert f"`{frame}`" in q.text, (q.id, frame)
        # Its own conversation in a new kernel: never the one a kernel before it saved.
        assert agent_cell(q, None, None).startswith(f"%%agent -y -s {q.id} -o _bench_run\n")


@pytest.mark.parametrize("question", QUESTIONS, ids=[q.id for q in QUESTIONS])
def test_expected_answer_computes_from_the_real_data(question) -> None:
    expected = expected_answer(question)
    if isinstance(expected, Number):
        assert expected.value == expected.value  # not NaN: the computation found data
        # Echoing the question must not pass: the answer is none of the question's numbers.
        assert not accepts(expected, question.text), question.id
    elif isinstance(expected, Name):
        assert expected.value and expected.value != "nan"
        assert expected.value not in expected.candidates
    else:
        assert dt.date(1990, 1, 1) <= expected.value <= dt.date(2020, 1, 1)
    # The expected answer, written plainly, is accepted.
    assert accepts(expected, f"The answer is {expected}."), question.id


def test_the_setup_cell_loads_the_frames_the_bench_computed_from() -> None:
    namespace: dict[str, object] = {}
    exec(setup_code(["penguins", "wine"]), namespace)
    assert namespace["penguins"].shape == (344, 8)  # type: ignore[attr-defined]
    assert namespace["wine"].shape == (178, 14)  # type: ignore[attr-defined]
    assert setup_code(["aapl", "msft"]).count("from vega_datasets import data") == 1


@pytest.mark.parametrize(
    "text",
    [
        "The median is 5.67.",
        "**5.67**",
        "It comes to about 5.670 (from 5.6699...)",
        "median color_intensity: 5.668",
    ],
)
def test_a_number_within_the_rounding_asked_for_passes(text: str) -> None:
    assert accepts(Number(5.6699, places=2), text)


@pytest.mark.parametrize("text", ["The median is 5.7.", "5.62", "It is 4.69", "567", "no number here"])
def test_a_number_outside_the_rounding_fails(text: str) -> None:
    assert not accepts(Number(5.6699, places=2), text)


def test_counts_are_exact_and_read_with_thousands_separators() -> None:
    count = Number(129726)
    for text in ["129,726", "The minimum is 129726 (Feb 2010).", "lowest: 129 726".replace(" 7", "\u202f7")]:
        assert accepts(count, text), text
    for text in ["129,725", "about 130,000", "129.7 thousand"]:
        assert not accepts(count, text), text


def test_percentages_and_signs() -> None:
    share = Number(1.4778, places=2, percent=True)
    assert accepts(share, "1.48% of the rows")
    assert accepts(share, "a share of 0.0148")
    assert not accepts(share, "1.5%")
    negative = Number(-0.7784, places=2)
    assert accepts(negative, "The correlation is -0.78.")
    assert accepts(negative, "r = −0.78 (strong and negative)")
    assert not accepts(negative, "The correlation is 0.78.")
    assert numbers_in("on 2015-03-15 it rained 55.9 mm; s5 and od280 are columns") == [
        (2015, False),
        (3, False),
        (15, False),
        (55.9, False),
    ]


def test_names_are_matched_as_words_in_any_case() -> None:
    gentoo = Name("Gentoo", candidates=("Adelie", "Chinstrap"))
    assert accepts(gentoo, "GENTOO penguins are the heaviest.")
    assert accepts(gentoo, "Gentoo (5076 g), then Chinstrap (3733 g) and Adelie (3701 g).")
    assert accepts(gentoo, "Adelie 3701, Chinstrap 3733, Gentoo 5076: so **Gentoo**.")
    assert not accepts(gentoo, "Chinstrap is the heaviest, ahead of Gentoo and Adelie.")
    assert not accepts(gentoo, "Gentoos")
    column = Name("flipper_length_mm", candidates=("bill_length_mm",))
    assert accepts(column, "`flipper_length_mm` (r = 0.87)")
    assert accepts(column, "The flipper length mm column")
    state = Name("AK", ("Alaska",), ("TX", "CA"))
    assert accepts(state, "Alaska has 263 airports.")
    assert not accepts(state, "Texas (TX) has the most.")


def test_dates_in_the_ways_people_write_them() -> None:
    day = Day(dt.date(2015, 3, 15))
    for text in [
        "2015-03-15",
        "on March 15, 2015",
        "15 March 2015",
        "3/15/2015",
        "Mar 15th 2015",
        "2015-03-15 00:00:00",
    ]:
        assert accepts(day, text), text
    for text in ["2015-03-16", "March 2015", "15 March 2014"]:
        assert not accepts(day, text), text
    month = Day(dt.date(2004, 8, 1), month_only=True)
    for text in ["August 2004", "2004-08", "2004-08-01", "in Aug 2004"]:
        assert accepts(month, text), text
    assert not accepts(month, "September 2004")


def test_strays_name_files_and_made_up_variables() -> None:
    names = namespace_names(("wine",))
    assert {"wine", "pd", "load_wine"} <= names
    calls = [
        {"name": "run_python", "arguments": '{"code": "df = pd.read_csv(\'your_data.csv\')"}'},
        {"name": "read_file", "arguments": '{"path": "data.csv"}'},
        {"name": "describe_variable", "arguments": '{"name": "alcohol"}'},
        {"name": "describe_variable", "arguments": '{"name": "wine"}'},
    ]
    results = [{"name": "run_python", "error": True, "text": "FileNotFoundError: your_data.csv"}]
    assert strays(calls, results, names) == [
        "a file not found",
        "a variable not in the namespace",
        "called read_file",
        "code reads a file",
    ]
    plain = [{"name": "run_python", "arguments": '{"code": "wine.alcohol.corr(wine.proline)"}'}]
    assert strays(plain, [{"name": "run_python", "error": False, "text": "0.64"}], names) == []
    told = "Run this:\n```python\nweather = pd.read_csv('weather.csv')\n```"
    assert strays([], [], names, told) == ["the answer reads a file"]


def test_a_run_that_did_not_complete_gave_no_answer() -> None:
    question = QUESTIONS[0]  # penguins on Biscoe: 168
    assert verdict(question, "completed", "There are 168 of them.") == "correct"
    assert verdict(question, "completed", "There are 344 of them.") == "wrong"
    assert verdict(question, "completed", "  ") == "no answer"
    assert verdict(question, "timeout", "168") == "no answer"
    assert verdict(question, "exhausted", "168") == "no answer"
