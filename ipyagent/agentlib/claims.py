"""Which numbers and named values of an answer were computed, and where: the answer traced to
the tool outputs of its run.

A data answer is only as good as its numbers, and a model can write a number that no computation
produced. When a run completes, each number of its final answer (``1,234``, ``-3.5``, ``12.3%``,
``1.2 million``) and each named value it marks (`` `north` ``, ``**north**``, a date such as
``2016-03-04``) is looked for in the outputs of the tools the run called. A number counts as found
when an output holds a number that rounds to it at the precision it is written with (``12.35``
for ``12.3456``), as a percentage (``12.3%`` for ``0.1234``), or with its sign in words
("fell by 3.5" for ``-3.5``); a named value when an output holds it, whatever its case.

What is not a claim: a number or name the question itself gave (it is quoted, not computed), a
list's item number, a number that begins a compound word (``2-dimensional``), anything inside
a fenced code block. Arguments of the tool calls are not sources: a number in the code the model
ran is an input, not a result.

:func:`trace_claims` returns a :class:`Claim` per claim, with the :class:`Source` it was found in
or ``None``; a run's :class:`~ipyagent.agentlib.result.RunResult` carries them as ``claims``.
With ``Agent(verify=True)`` the loop asks an :class:`UntracedCheck`, as the run would complete,
whether to ask the model once more for the numbers no output shows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .messages import Message, ToolCallBlock, ToolResultBlock

__all__ = ["Claim", "Source", "UntracedCheck", "VerifyRequest", "claims_summary", "trace_claims"]


@dataclass(frozen=True)
class Source:
    """Where a claim was found: the tool call, its tool, and the line of its output."""

    call_id: str
    tool: str
    line: str


@dataclass(frozen=True)
class Claim:
    """A number or named value of the answer, as written (``text``, at ``start``:``end`` of the
    answer), and where it was found (``None``: in no tool output of the run)."""

    text: str
    start: int
    end: int
    kind: str  # "number" or "name"
    source: Source | None

    @property
    def traced(self) -> bool:
        return self.source is not None


_SCALES = {"%": 1.0, "percent": 1.0, "k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6}
_SCALES |= {"bn": 1e9, "b": 1e9, "billion": 1e9}
# A number as prose writes it: a sign (ASCII or the minus sign), digits with or without thousands
# separators, decimals, an exponent, and a percent sign or a scale word. Not part of a name
# (``x2``, ``col_1``), of a dotted version (``3.11.7``) or of a compound word (``2-dimensional``,
# ``64-bit``: a description, not a result).
_NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-−+])?(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<dec>\d+))?(?:[eE](?P<exp>[-+]?\d+))?"
    r"(?P<scale>\s?%|\s?(?:percent|thousand|million|billion)\b|(?:bn|[kKMB])\b)?(?!\w|\.\d|-[^\W\d])"
)
_DATE = re.compile(r"(?<![\w-])\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?(?![\w-])")
_MARKED = re.compile(r"`([^`\n]{1,80})`|\*\*([^*\n]{1,80})\*\*")
_FENCE = re.compile(r"```.*?(?:```|$)", re.S)
_LIST_ITEM = re.compile(r"^\s*\d+[.)]\s", re.M)


@dataclass(frozen=True)
class _Number:
    value: float
    tolerance: float  # half a unit of the last digit written
    percent: bool


def trace_claims(answer: str, messages: Sequence[Message], question: str = "") -> tuple[Claim, ...]:
    """Each claim of ``answer`` with where the tool outputs of ``messages`` show it (see the
    module docstring); ``question``: the prompt, whose own numbers and names are not claims."""
    outputs = _outputs(messages)
    blocked = _blocked_spans(answer)
    given_numbers = [n for n, _, _ in _numbers(question)]
    given_text = question.casefold()
    claims: list[Claim] = []
    taken: list[tuple[int, int]] = []
    for match in _DATE.finditer(answer):
        if _inside(match.start(), blocked) or match.group().casefold() in given_text:
            continue
        taken.append(match.span())
        claims.append(_name_claim(match.group(), match.start(), outputs))
    for match in _MARKED.finditer(answer):
        name = (match.group(1) or match.group(2)).strip()
        if not name or _inside(match.start(), blocked) or _overlaps(match.span(), taken):
            continue
        if _NUMBER.fullmatch(name) or name.casefold() in given_text:
            continue  # a number is traced as a number; a name from the question is quoted
        claims.append(_name_claim(name, match.start(), outputs))
    found = _output_numbers(outputs)
    for number, start, end in _numbers(answer):
        if _inside(start, blocked) or _overlaps((start, end), taken):
            continue
        if any(number.value == given.value for given in given_numbers):
            continue
        source = next((source for source, value in found if _matches(number, value)), None)
        claims.append(Claim(answer[start:end], start, end, "number", source))
    return tuple(sorted(claims, key=lambda c: c.start))


def claims_summary(claims: Sequence[Claim]) -> str:
    """One line for a run's end: how many claims the tool outputs show, and which they do not
    (empty when the answer makes none)."""
    if not claims:
        return ""
    untraced = [c.text for c in claims if not c.traced]
    traced = len(claims) - len(untraced)
    line = f"traced: {traced} of {len(claims)} values in the answer come from tool outputs"
    return line + (f"; not found in any: {', '.join(untraced)}" if untraced else "")


@dataclass(frozen=True)
class VerifyRequest:
    """What ``verify`` says before a run completes: the warning the user sees, the message the
    model reads."""

    warning: str
    prompt: str


class UntracedCheck:
    """``verify``: once per run, when the answer the run would end with has numbers that no tool
    output shows, the request to compute them with a tool or correct the answer. Once: a model
    that cannot trace them the second time is not asked again; its answer's claims say so."""

    def __init__(self) -> None:
        self.asked = False

    def check(self, answer: str, messages: Sequence[Message], question: str) -> VerifyRequest | None:
        if self.asked:
            return None
        self.asked = True
        claims = trace_claims(answer, messages, question)
        untraced = ", ".join(c.text for c in claims if c.kind == "number" and not c.traced)
        if not untraced:
            return None
        return VerifyRequest(
            warning=f"Asking the model to compute {untraced} (verify): no tool output shows them.",
            prompt=(
                f"These numbers in your answer are not in any tool output of this run: {untraced}. "
                "Compute them with a tool, or correct the answer; then give the whole answer again."
            ),
        )


def _outputs(messages: Sequence[Message]) -> list[tuple[str, str, str]]:
    """``(call id, tool, output)`` of each tool result of ``messages`` that is not an error."""
    names = {b.id: b.name for m in messages for b in m.content if isinstance(b, ToolCallBlock)}
    return [
        (b.tool_call_id, names.get(b.tool_call_id, b.name or "tool"), b.content)
        for m in messages
        for b in m.content
        if isinstance(b, ToolResultBlock) and not b.is_error
    ]


def _name_claim(name: str, start: int, outputs: list[tuple[str, str, str]]) -> Claim:
    wanted = name.casefold()
    source = None
    for call_id, tool, text in outputs:
        at = text.casefold().find(wanted)
        if at >= 0:
            source = Source(call_id, tool, _line_at(text, at))
            break
    return Claim(name, start, start + len(name), "name", source)


def _numbers(text: str) -> list[tuple[_Number, int, int]]:
    found = []
    for match in _NUMBER.finditer(text):
        digits = match.group("int").replace(",", "")
        decimals = match.group("dec") or ""
        exponent = int(match.group("exp") or 0)
        scale_word = (match.group("scale") or "").strip().lower()
        scale = _SCALES.get(scale_word, 1.0)
        value = float(f"{digits}.{decimals or '0'}") * 10**exponent * scale
        if match.group("sign") in ("-", "−"):
            value = -value
        tolerance = 0.5 * 10 ** (exponent - len(decimals)) * scale
        found.append((_Number(value, tolerance, scale_word in ("%", "percent")), match.start(), match.end()))
    return found


def _output_numbers(outputs: list[tuple[str, str, str]]) -> list[tuple[Source, float]]:
    """Every number the outputs print, as printed (a scale word after it is not applied: an
    output says ``12%`` or ``0.12``, and a claim of 12% matches either)."""
    numbers = []
    for call_id, tool, text in outputs:
        for match in _NUMBER.finditer(text):
            digits = match.group("int").replace(",", "")
            value = float(f"{digits}.{match.group('dec') or '0'}") * 10 ** int(match.group("exp") or 0)
            numbers.append((Source(call_id, tool, _line_at(text, match.start())), value))
    return numbers


def _matches(claim: _Number, found: float) -> bool:
    """Whether ``found`` rounds to ``claim`` as written: itself, as a percentage, or either
    with the sign left to words ("fell by 3.5")."""
    candidates = [found, found * 100] if claim.percent else [found]
    slack = claim.tolerance * (1 + 1e-9) + 1e-12
    return any(abs(abs(claim.value) - abs(c)) <= slack for c in candidates if math.isfinite(c))


def _blocked_spans(answer: str) -> list[tuple[int, int]]:
    spans = [m.span() for m in _FENCE.finditer(answer)]
    spans += [(m.start(), m.end()) for m in _LIST_ITEM.finditer(answer)]
    return spans


def _inside(at: int, spans: list[tuple[int, int]]) -> bool:
    return any(start <= at < end for start, end in spans)


def _overlaps(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in spans)


def _line_at(text: str, at: int) -> str:
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    line = text[start : end if end >= 0 else len(text)].strip()
    return line if len(line) <= 200 else line[:199] + "…"
