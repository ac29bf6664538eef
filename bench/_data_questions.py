"""The data-task suite: real datasets that ship inside installed packages, and questions about
them whose answers pandas computes here from the same data the kernel loads.

Datasets (``pip install -e '.[bench-data]'``; all load offline): scikit-learn's bundled wine,
diabetes, breast cancer and iris; palmerpenguins; vega_datasets' local files (Seattle weather,
stocks, cars, airports, LA riots, Iowa electricity, US employment, barley, hourly temperatures
of Seattle and San Francisco).

Each frame is made by one snippet of code (:data:`LOADERS`). The bench runs the snippets of a
question's frames in the kernel's setup cell, as a user's notebook would have loaded them, and
runs the same snippets here to compute the expected answer: no answer is typed by hand.
"""

from __future__ import annotations

import datetime as dt
import functools
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from _data_answers import Day, Expected, Name, Number

__all__ = ["KINDS", "LOADERS", "QUESTIONS", "Question", "expected_answer", "load", "setup_code"]

_VEGA = "from vega_datasets import data\n"
#: The code that loads each frame, under the name a question uses.
LOADERS: dict[str, str] = {
    "df": "from sklearn.datasets import load_wine\ndf = load_wine(as_frame=True).frame",
    "wine": "from sklearn.datasets import load_wine\nwine = load_wine(as_frame=True).frame",
    "diabetes": "from sklearn.datasets import load_diabetes\n"
    "diabetes = load_diabetes(as_frame=True, scaled=False).frame",
    "cancer": "from sklearn.datasets import load_breast_cancer\n"
    "cancer = load_breast_cancer(as_frame=True).frame",
    "iris": "from sklearn.datasets import load_iris\niris = load_iris(as_frame=True).frame",
    "species_names": "from sklearn.datasets import load_iris\n"
    "species_names = pd.DataFrame({'target': range(3), 'species': load_iris().target_names})",
    "penguins": "from palmerpenguins import load_penguins\npenguins = load_penguins()",
    "weather": _VEGA + "weather = data.seattle_weather()",
    "stocks": _VEGA + "stocks = data.stocks()",
    "aapl": _VEGA + "aapl = data.stocks().query(\"symbol == 'AAPL'\")[['date', 'price']]",
    "msft": _VEGA + "msft = data.stocks().query(\"symbol == 'MSFT'\")[['date', 'price']]",
    "cars": _VEGA + "cars = data.cars()",
    "airports": _VEGA + "airports = data.airports()",
    "riots": _VEGA + "riots = data.la_riots()",
    "electricity": _VEGA + "electricity = data.iowa_electricity()",
    "employment": _VEGA + "employment = data.us_employment()",
    "barley_1931": _VEGA + "barley_1931 = data.barley().query('year == 1931').drop(columns='year')",
    "barley_1932": _VEGA + "barley_1932 = data.barley().query('year == 1932').drop(columns='year')",
    "barley": _VEGA + "barley = data.barley()",
    "sf": _VEGA + "sf = data.sf_temps()",
    "seattle": _VEGA + "seattle = data.seattle_temps()",
}

KINDS = ("counts", "filters", "groupby", "correlation", "missing", "dates", "joins", "plots")

Frames = dict[str, Any]  # name -> pandas.DataFrame


@dataclass(frozen=True)
class Question:
    id: str
    kind: str
    frames: tuple[str, ...]
    text: str
    answer: Callable[[Frames], Expected]


def setup_code(frames: Iterable[str]) -> str:
    """The setup cell's code: pandas, then each frame's loader (imports said once)."""
    lines = ["import pandas as pd"]
    for name in frames:
        lines += [line for line in LOADERS[name].splitlines() if line not in lines]
    return "\n".join(lines)


def load(frames: Iterable[str]) -> Frames:
    """The frames, loaded here by the setup cell's own code."""
    namespace: dict[str, Any] = {}
    with warnings.catch_warnings():
        # vega_datasets calls read_json with an option pandas 3 deprecates; a kernel shows no
        # DeprecationWarning raised outside the user's own code either.
        warnings.simplefilter("ignore", DeprecationWarning)
        exec(setup_code(frames), namespace)  # our own loaders, the same code the kernel runs
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


@functools.cache
def expected_answer(question: Question) -> Expected:
    return question.answer(load(question.frames))


def _name(value: Any, others: Iterable[Any] = (), aliases: tuple[str, ...] = ()) -> Name:
    text = str(value)
    return Name(text, aliases, tuple(str(o) for o in others if str(o) != text))


def _day(value: Any, month_only: bool = False) -> Day:
    import pandas as pd

    return Day(pd.Timestamp(value).date(), month_only)


def _month_name(number: int) -> Name:
    names = [dt.date(2000, m, 1).strftime("%B") for m in range(1, 13)]
    return Name(
        names[number - 1], (names[number - 1][:3],), tuple(n for n in names if n != names[number - 1])
    )


def _q(kind: str, frames: str, text: str, answer: Callable[[Frames], Expected]) -> Question:
    return Question("", kind, tuple(frames.split()), text, answer)


_COUNTS = [
    _q(
        "counts",
        "penguins",
        "How many penguins in `penguins` live on Biscoe island?",
        lambda f: Number((f["penguins"].island == "Biscoe").sum()),
    ),
    _q(
        "counts",
        "cars",
        "How many cars in `cars` have 8 cylinders?",
        lambda f: Number((f["cars"].Cylinders == 8).sum()),
    ),
    _q(
        "counts",
        "weather",
        "In `weather`, on how many days was the weather 'snow'?",
        lambda f: Number((f["weather"].weather == "snow").sum()),
    ),
    _q(
        "counts",
        "cancer",
        "How many tumours in `cancer` are malignant (target 0)?",
        lambda f: Number((f["cancer"].target == 0).sum()),
    ),
    _q(
        "counts",
        "airports",
        "How many airports in `airports` are in Texas (state TX)?",
        lambda f: Number((f["airports"].state == "TX").sum()),
    ),
    _q(
        "counts",
        "barley",
        "How many different varieties are there in `barley`?",
        lambda f: Number(f["barley"].variety.nunique()),
    ),
]

_FILTERS = [
    _q(
        "filters",
        "df",
        "In `df`, what is the median of `color_intensity` for the wines with `alcohol` above 13?",
        lambda f: Number(f["df"].loc[f["df"].alcohol > 13, "color_intensity"].median(), 2),
    ),
    _q(
        "filters",
        "cars",
        "What is the mean `Horsepower` of the Japanese cars (`Origin` 'Japan') in `cars`? "
        "Round to one decimal.",
        lambda f: Number(f["cars"].loc[f["cars"].Origin == "Japan", "Horsepower"].mean(), 1),
    ),
    _q(
        "filters",
        "cars",
        "Which car in `cars` has the highest `Miles_per_Gallon`?",
        lambda f: _name(f["cars"].loc[f["cars"].Miles_per_Gallon.idxmax(), "Name"]),
    ),
    _q(
        "filters",
        "diabetes",
        "Among the patients in `diabetes` with `bmi` over 30, what is the mean `target`? "
        "Round to one decimal.",
        lambda f: Number(f["diabetes"].loc[f["diabetes"].bmi > 30, "target"].mean(), 1),
    ),
    _q(
        "filters",
        "weather",
        "What was the strongest `wind` in `weather` on a day whose weather was 'snow'?",
        lambda f: Number(f["weather"].loc[f["weather"].weather == "snow", "wind"].max(), 1),
    ),
    _q(
        "filters",
        "stocks",
        "What was the lowest price of IBM in `stocks`?",
        lambda f: Number(f["stocks"].loc[f["stocks"].symbol == "IBM", "price"].min(), 2),
    ),
]

_GROUPBY = [
    _q(
        "groupby",
        "penguins",
        "Which species in `penguins` has the highest mean `body_mass_g`?",
        lambda f: (lambda s: _name(s.idxmax(), s.index))(f["penguins"].groupby("species").body_mass_g.mean()),
    ),
    _q(
        "groupby",
        "penguins",
        "What is the mean `flipper_length_mm` of the Chinstrap penguins in `penguins`? "
        "Round to two decimals.",
        lambda f: Number(f["penguins"].groupby("species").flipper_length_mm.mean()["Chinstrap"], 2),
    ),
    _q(
        "groupby",
        "cars",
        "Which `Origin` in `cars` has the heaviest cars on average (`Weight_in_lbs`)?",
        lambda f: (lambda s: _name(s.idxmax(), s.index))(f["cars"].groupby("Origin").Weight_in_lbs.mean()),
    ),
    _q(
        "groupby",
        "barley",
        "Which `site` in `barley` has the largest total `yield`?",
        lambda f: (lambda s: _name(s.idxmax(), s.index))(f["barley"].groupby("site")["yield"].sum()),
    ),
    _q(
        "groupby",
        "airports",
        "Which state has the most airports in `airports`?",
        lambda f: (lambda s: _name(s.idxmax(), s.index[:5], ("Alaska",)))(f["airports"].state.value_counts()),
    ),
    _q(
        "groupby",
        "weather",
        "In `weather`, which kind of weather has the highest average `wind`?",
        lambda f: (lambda s: _name(s.idxmax(), s.index))(f["weather"].groupby("weather").wind.mean()),
    ),
]

_CORRELATION = [
    _q(
        "correlation",
        "wine",
        "What is the correlation between `alcohol` and `proline` in `wine`? Round to two decimals.",
        lambda f: Number(f["wine"].alcohol.corr(f["wine"].proline), 2),
    ),
    _q(
        "correlation",
        "cars",
        "In `cars`, what is the correlation between `Horsepower` and `Miles_per_Gallon`? "
        "Round to two decimals.",
        lambda f: Number(f["cars"].Horsepower.corr(f["cars"].Miles_per_Gallon), 2),
    ),
    _q(
        "correlation",
        "penguins",
        "Which numeric column of `penguins` is most strongly correlated with `body_mass_g`?",
        lambda f: (lambda s: _name(s.abs().idxmax(), s.index))(
            f["penguins"].select_dtypes("number").corr()["body_mass_g"].drop("body_mass_g")
        ),
    ),
    _q(
        "correlation",
        "diabetes",
        "Which column of `diabetes` correlates most strongly with `target`?",
        lambda f: (lambda s: _name(s.abs().idxmax(), s.index))(f["diabetes"].corr()["target"].drop("target")),
    ),
    _q(
        "correlation",
        "cancer",
        "What is the correlation between `mean radius` and `mean texture` in `cancer`? "
        "Round to three decimals.",
        lambda f: Number(f["cancer"]["mean radius"].corr(f["cancer"]["mean texture"]), 3),
    ),
    _q(
        "correlation",
        "weather",
        "How strongly are `temp_max` and `temp_min` correlated in `weather`? Give the correlation "
        "coefficient to two decimals.",
        lambda f: Number(f["weather"].temp_max.corr(f["weather"].temp_min), 2),
    ),
]

_MISSING = [
    _q(
        "missing",
        "penguins",
        "How many values of `sex` are missing in `penguins`?",
        lambda f: Number(f["penguins"].sex.isna().sum()),
    ),
    _q(
        "missing",
        "penguins",
        "How many rows of `penguins` would be left after dropping every row with a missing value?",
        lambda f: Number(len(f["penguins"].dropna())),
    ),
    _q(
        "missing",
        "cars",
        "Which column of `cars` has the most missing values?",
        lambda f: (lambda s: _name(s.idxmax(), s.index))(f["cars"].isna().sum()),
    ),
    _q(
        "missing",
        "cars",
        "What share of the rows of `cars` has no `Horsepower`? Give a percentage to two decimals.",
        lambda f: Number(f["cars"].Horsepower.isna().mean() * 100, 2, percent=True),
    ),
    _q(
        "missing",
        "airports",
        "How many airports in `airports` have no `city`?",
        lambda f: Number(f["airports"].city.isna().sum()),
    ),
    _q(
        "missing",
        "riots",
        "In `riots`, what is the mean `age`, ignoring the missing ages? Round to one decimal.",
        lambda f: Number(f["riots"].age.mean(), 1),
    ),
]

_DATES = [
    _q(
        "dates",
        "weather",
        "On which date did `weather` record the most `precipitation`?",
        lambda f: _day(f["weather"].loc[f["weather"].precipitation.idxmax(), "date"]),
    ),
    _q(
        "dates",
        "weather",
        "How many days in 2014 had a `temp_max` above 30 in `weather`?",
        lambda f: Number(((f["weather"].date.dt.year == 2014) & (f["weather"].temp_max > 30)).sum()),
    ),
    _q(
        "dates",
        "weather",
        "What was the average `temp_max` in July 2015 in `weather`? Round to two decimals.",
        lambda f: Number(f["weather"].set_index("date").loc["2015-07", "temp_max"].mean(), 2),
    ),
    _q(
        "dates",
        "riots",
        "On which date did the most deaths happen in `riots` (`death_date`)?",
        lambda f: _day(f["riots"].death_date.value_counts().idxmax()),
    ),
    _q(
        "dates",
        "stocks",
        "In which month and year did GOOG first appear in `stocks`?",
        lambda f: _day(f["stocks"].loc[f["stocks"].symbol == "GOOG", "date"].min(), month_only=True),
    ),
    _q(
        "dates",
        "seattle",
        "At what hour of the day is `seattle` warmest on average? Answer with the hour (0-23).",
        lambda f: Number(f["seattle"].groupby(f["seattle"].date.dt.hour).temp.mean().idxmax()),
    ),
]

_JOINS = [
    _q(
        "joins",
        "sf seattle",
        "`sf` and `seattle` hold hourly temperatures of San Francisco and Seattle. Join them on "
        "`date`: in how many hours was San Francisco warmer than Seattle?",
        lambda f: Number((f["sf"].merge(f["seattle"], on="date").pipe(lambda m: m.temp_x > m.temp_y)).sum()),
    ),
    _q(
        "joins",
        "sf seattle",
        "Join `sf` and `seattle` on `date`. On average, how many degrees warmer was San Francisco "
        "than Seattle? Round to two decimals.",
        lambda f: Number(
            f["sf"].merge(f["seattle"], on="date").pipe(lambda m: (m.temp_x - m.temp_y).mean()), 2
        ),
    ),
    _q(
        "joins",
        "iris species_names",
        "Join `iris` with `species_names` on `target`. What is the mean `petal length (cm)` of "
        "virginica? Round to two decimals.",
        lambda f: Number(
            f["iris"]
            .merge(f["species_names"], on="target")
            .query("species == 'virginica'")["petal length (cm)"]
            .mean(),
            2,
        ),
    ),
    _q(
        "joins",
        "barley_1931 barley_1932",
        "`barley_1931` and `barley_1932` hold the yields of each variety at each site in 1931 and "
        "1932. Join them on `variety` and `site`: for how many pairs was the yield higher in 1932?",
        lambda f: Number(
            f["barley_1931"]
            .merge(f["barley_1932"], on=["variety", "site"], suffixes=("_31", "_32"))
            .pipe(lambda m: m.yield_32 > m.yield_31)
            .sum()
        ),
    ),
    _q(
        "joins",
        "aapl msft",
        "Join `aapl` and `msft` on `date`. In which month and year was AAPL's price first higher "
        "than MSFT's?",
        lambda f: _day(
            f["aapl"].merge(f["msft"], on="date").pipe(lambda m: m.loc[m.price_x > m.price_y, "date"].min()),
            month_only=True,
        ),
    ),
    _q(
        "joins",
        "aapl msft",
        "Join `aapl` and `msft` on `date`. What was the largest gap between AAPL's and MSFT's price "
        "in a month (AAPL minus MSFT)? Round to two decimals.",
        lambda f: Number(
            f["aapl"].merge(f["msft"], on="date").pipe(lambda m: (m.price_x - m.price_y).max()), 2
        ),
    ),
]

_PLOTS = [
    _q(
        "plots",
        "weather",
        "Plot the mean `temp_max` of each calendar month in `weather` (all years together). "
        "Which month is the warmest?",
        lambda f: _month_name(int(f["weather"].groupby(f["weather"].date.dt.month).temp_max.mean().idxmax())),
    ),
    _q(
        "plots",
        "penguins",
        "Make a bar chart of the number of penguins on each island in `penguins`. "
        "Which island has the fewest?",
        lambda f: (lambda s: _name(s.idxmin(), s.index))(f["penguins"].island.value_counts()),
    ),
    _q(
        "plots",
        "cars",
        "Plot the mean `Miles_per_Gallon` of the cars of each model year in `cars`. "
        "Which year has the highest mean?",
        lambda f: Number(int(f["cars"].groupby(f["cars"].Year.dt.year).Miles_per_Gallon.mean().idxmax())),
    ),
    _q(
        "plots",
        "electricity",
        "Plot `net_generation` per `source` over the years in `electricity`. Which source generated "
        "the most in 2017?",
        lambda f: (lambda s: _name(s.idxmax(), s.index))(
            f["electricity"].loc[f["electricity"].year.dt.year == 2017].set_index("source").net_generation
        ),
    ),
    _q(
        "plots",
        "employment",
        "Plot `nonfarm` over `month` in `employment`. What is the lowest value on the plot?",
        lambda f: Number(f["employment"].nonfarm.min()),
    ),
    _q(
        "plots",
        "stocks",
        "Plot the price of each `symbol` in `stocks` over time. Which symbol reached the highest price?",
        lambda f: (lambda s: _name(s.idxmax(), s.index))(f["stocks"].groupby("symbol").price.max()),
    ),
]


def _interleaved(groups: list[list[Question]]) -> list[Question]:
    """One question of each kind in turn, so that ``--limit 8`` asks one of every kind."""
    ordered = []
    for round_ in range(max(len(g) for g in groups)):
        for group in groups:
            if round_ < len(group):
                q = group[round_]
                ordered.append(Question(f"{q.kind}-{round_ + 1}", q.kind, q.frames, q.text, q.answer))
    return ordered


QUESTIONS = _interleaved([_COUNTS, _FILTERS, _GROUPBY, _CORRELATION, _MISSING, _DATES, _JOINS, _PLOTS])
