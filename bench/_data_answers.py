"""What a data question expects, and whether a model's final text gives it.

Three kinds of expected answer, each computed by pandas in ``_data_questions`` (never typed):

- :class:`Number`: a count or a measure. Every number written in the text is read (thousands
  separators, a leading minus or "−", a trailing "%", scientific notation) and the answer is
  accepted when one of them is within the question's tolerance: half a unit of the last decimal
  place the question asked for (``places``), exact for counts. ``percent``: a share asked for as
  a percentage is also accepted written as a fraction (12.5% or 0.125).
- :class:`Name`: a category, a column, a symbol. Matched case-insensitively as whole words, with
  ``_`` and spaces alike (``flipper_length_mm`` = "flipper length mm"). When the text also names
  other ``candidates`` (a model that lists every group), the expected one must be the first or
  the last candidate named: "Gentoo is the heaviest, then Chinstrap and Adelie" and "Adelie
  3701, Chinstrap 3733, Gentoo 5076: Gentoo" pass; a list that ends elsewhere does not.
- :class:`Day`: a date, or a month of a year (``month_only``), written in ISO, US or words
  ("2015-03-15", "3/15/2015", "March 15, 2015", "15 March 2015", "March 2015").

The checker reads the final text only: what the user sees. A number quoted from the question
is never the expected one (the suite's test checks that), so echoing the question earns nothing.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass

__all__ = ["Day", "Expected", "Name", "Number", "accepts", "numbers_in"]


@dataclass(frozen=True)
class Number:
    value: float
    places: int | None = None  # decimals the question asks for; None: a count, exact
    percent: bool = False

    def __str__(self) -> str:
        if self.places is None:
            return f"{self.value:,.0f}"
        return f"{self.value:,.{self.places}f}{'%' if self.percent else ''}"


@dataclass(frozen=True)
class Name:
    value: str
    aliases: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()  # the other values the answer could have named

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Day:
    value: dt.date
    month_only: bool = False

    def __str__(self) -> str:
        return self.value.strftime("%Y-%m") if self.month_only else self.value.isoformat()


Expected = Number | Name | Day


def accepts(expected: Expected, text: str) -> bool:
    """Whether ``text`` (a model's final answer) gives ``expected``."""
    if isinstance(expected, Number):
        return _number_ok(expected, text)
    if isinstance(expected, Name):
        return _name_ok(expected, text)
    return _day_ok(expected, text)


# -- numbers -------------------------------------------------------------------------------------

# A number not glued to a word or to a decimal point before it ("s5", "od280" are names, not 5
# and 280); its minus is a sign only where no digit stands before it ("2015-03-15" is a date).
_NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-−](?=\d))?(?P<digits>\d{1,3}(?:,\d{3})+|\d+)(?P<decimals>\.\d+)?"
    r"(?P<exponent>[eE][-+]?\d+)?(?P<percent>\s?%)?"
)


def numbers_in(text: str) -> list[tuple[float, bool]]:
    """Each number of ``text`` with whether it was written as a percentage."""
    found = []
    for match in _NUMBER.finditer(text.replace("\u202f", "").replace("\u2009", "")):
        literal = match["digits"].replace(",", "") + (match["decimals"] or "") + (match["exponent"] or "")
        value = float(literal)
        found.append((-value if match["sign"] else value, bool(match["percent"])))
    return found


def _number_ok(expected: Number, text: str) -> bool:
    target = expected.value
    tolerance = 1e-9 if expected.places is None else 0.51 * 10.0**-expected.places
    for value, _ in numbers_in(text):
        readings = [value]
        if expected.percent:
            readings.append(value * 100)  # 0.125 for 12.5%
        if any(math.isclose(r, target, abs_tol=tolerance, rel_tol=1e-9) for r in readings):
            return True
    return False


# -- names ---------------------------------------------------------------------------------------


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[_`*]", " ", text.lower())).strip()


def _positions(name: str, text: str) -> list[int]:
    pattern = r"(?<![a-z0-9])" + re.escape(_normal(name)) + r"(?![a-z0-9])"
    return [m.start() for m in re.finditer(pattern, text)]


def _name_ok(expected: Name, text: str) -> bool:
    normal = _normal(text)
    own = sorted(p for n in (expected.value, *expected.aliases) for p in _positions(n, normal))
    if not own:
        return False
    others = sorted(p for n in expected.candidates for p in _positions(n, normal))
    if not others:
        return True
    return own[0] < others[0] or own[-1] > others[-1]


# -- dates ---------------------------------------------------------------------------------------

_MONTHS = {
    name: number
    for number in range(1, 13)
    for name in (
        dt.date(2000, number, 1).strftime("%B").lower(),
        dt.date(2000, number, 1).strftime("%b").lower(),
    )
}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY_PATTERNS = [
    re.compile(r"(?<!\d)(?P<year>\d{4})[-/](?P<m>\d{1,2})(?:[-/](?P<day>\d{1,2}))?(?!\d)"),
    re.compile(r"(?<!\d)(?P<m>\d{1,2})/(?P<day>\d{1,2})/(?P<year>\d{4})(?!\d)"),
    re.compile(_MONTH + r"(?:\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?)?,?\s+(?P<year>\d{4})", re.IGNORECASE),
    re.compile(
        r"(?P<day>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r",?\s+(?P<year>\d{4})", re.IGNORECASE
    ),
]


def days_in(text: str) -> list[tuple[int, int, int | None]]:
    """Each (year, month, day or None) written in ``text``."""
    found = []
    for pattern in _DAY_PATTERNS:
        for match in pattern.finditer(text):
            groups = match.groupdict()
            month = int(groups["m"]) if groups.get("m") else _MONTHS[groups["month"].lower()]
            day = int(groups["day"]) if groups.get("day") else None
            found.append((int(groups["year"]), month, day))
    return found


def _day_ok(expected: Day, text: str) -> bool:
    want = expected.value
    for year, month, day in days_in(text):
        if (year, month) != (want.year, want.month):
            continue
        if expected.month_only or day == want.day:
            return True
    return False
