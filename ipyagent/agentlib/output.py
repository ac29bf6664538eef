"""Typed answers: what a run's final answer must be, and reading it into that type.

``agent.run(prompt, output_type=Ticket)`` asks for an answer that validates into ``Ticket`` (a
pydantic model, a dataclass, a ``TypedDict``, a ``Literal``, a list of them, or a plain type like
``int``). This module owns the translation of such a type into what a request carries
(:class:`~ipyagent.agentlib.model.OutputSchema`: always a JSON object schema, a non-object type
wrapped as ``{"result": ...}``), the instruction the system prompt gains, and the reading of a
reply (:meth:`OutputSpec.read`): JSON out of the text, validated by pydantic, or an
:class:`InvalidAnswer` whose message the loop shows the model when it asks again.

How often the loop asks again, and what ends the run, is the loop's (:mod:`.run`); how each API
is told the schema is its adapter's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from .errors import OutputValidationError, UserError
from .model import OutputSchema

__all__ = ["AnswerCheck", "AskAgain", "InvalidAnswer", "OutputSpec", "output_spec"]

#: The property a non-object answer is wrapped in.
WRAPPER = "result"
#: Validation problems listed to the model when it is asked again; the rest are counted.
MAX_PROBLEMS = 8

_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)
# What OpenAI's strict structured outputs accept in a schema (a conservative reading).
_STRICT_KEYS = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf"}
    | {"$defs", "$ref", "description", "title"}
)


class InvalidAnswer(Exception):
    """A reply that is not a valid answer; ``str()`` is what the model is told."""


@dataclass(frozen=True)
class OutputSpec:
    """What a typed run needs to know of its output type (made by :func:`output_spec`)."""

    output_type: Any
    schema: OutputSchema
    #: Whether answers are wrapped as ``{"result": ...}`` (the type is not an object).
    wrapped: bool
    adapter: TypeAdapter[Any]

    @property
    def type_name(self) -> str:
        return _type_name(self.output_type)

    @property
    def instructions(self) -> str:
        """What the system prompt says of the answer."""
        schema = json.dumps(self.schema.json_schema, separators=(",", ":"), ensure_ascii=False)
        return (
            f"# Final answer\n\nThis task wants a typed answer ({self.type_name}). When you have it, "
            "reply with only a JSON object that matches this JSON schema, and nothing else (no prose, "
            f"no code fence):\n{schema}"
        )

    def read(self, text: str) -> Any:
        """The answer in ``text`` as the output type; :class:`InvalidAnswer` says why not."""
        raw = text.strip()
        fenced = _FENCE.match(raw)
        if fenced:
            raw = fenced.group(1).strip()
        if not raw:
            raise InvalidAnswer("The reply was empty: the answer must be a JSON object.")
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise InvalidAnswer(f"The reply is not JSON ({exc}).") from None
        if self.wrapped and isinstance(value, dict) and set(value) == {WRAPPER}:
            value = value[WRAPPER]
        try:
            return self.adapter.validate_python(value)
        except ValidationError as exc:
            raise InvalidAnswer(_problems(exc)) from None

    def dump(self, value: Any) -> Any:
        """``value`` (of the output type) as JSON-able data; :meth:`load` reverses it."""
        return self.adapter.dump_python(value, mode="json")

    def load(self, data: Any) -> Any:
        return self.adapter.validate_python(data)

    def retry_prompt(self, problem: str) -> str:
        """What the model is told after an invalid answer."""
        return (
            f"Your answer is not a valid {self.type_name}:\n{problem}\n"
            "Reply again with only the corrected JSON object, matching the schema."
        )


@dataclass(frozen=True)
class AskAgain:
    """An invalid answer: what the model is told (``prompt``), and what the run's events say."""

    prompt: str
    warning: str


class AnswerCheck:
    """The typed answer of one run: each reply that would end the run is read with
    :meth:`check`; the first valid one is :attr:`value`. After ``retries`` invalid ones, the
    next raises :class:`OutputValidationError`."""

    def __init__(self, spec: OutputSpec, retries: int) -> None:
        self.spec = spec
        self.retries = retries
        self.invalid = 0
        self.value: Any = None

    def check(self, text: str) -> AskAgain | None:
        """``None`` when ``text`` is a valid answer (now in :attr:`value`), else how to ask again."""
        spec = self.spec
        try:
            self.value = spec.read(text)
            return None
        except InvalidAnswer as exc:
            problem = str(exc)
        self.invalid += 1
        if self.invalid > self.retries:
            raise OutputValidationError(
                f"The model's answer is not a valid {spec.type_name} ({self.invalid} tries):\n{problem}",
                hint="Describe the fields (docstrings, Field(description=...)), loosen the type, raise "
                "output_retries, or pick a stronger model; the answers are in result.messages.",
            )
        return AskAgain(
            prompt=spec.retry_prompt(problem),
            warning=f"The answer is not a valid {spec.type_name}; asking again "
            f"({self.invalid} of {self.retries}).",
        )


def output_spec(output_type: Any, *, taken: Collection[str] = ()) -> OutputSpec | None:
    """The spec for ``output_type`` (``None`` and ``str`` want plain text: no spec). ``taken``
    are the run's tool names, which the answer's name must not be."""
    if output_type is None or output_type is str:
        return None
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = adapter.json_schema()
    except Exception as exc:  # pydantic raises several kinds for a type it cannot handle
        raise UserError(
            f"output_type={_type_name(output_type)} cannot be used for a typed answer: {exc}",
            hint="Use a pydantic model, a dataclass, a TypedDict, a Literal, a list of those, or a "
            "plain type such as int or bool.",
            code="invalid_output_type",
        ) from None
    wrapped = schema.get("type") != "object"
    if wrapped:
        defs = schema.pop("$defs", None)
        schema = {
            "type": "object",
            "properties": {WRAPPER: schema},
            "required": [WRAPPER],
            "additionalProperties": False,
            **({"$defs": defs} if defs else {}),
        }
    name = "final_result"
    number = 1
    while name in taken:
        number += 1
        name = f"final_result_{number}"
    description = (getattr(output_type, "__doc__", None) or "").strip() if not wrapped else ""
    if description.startswith(("Usage docs:", "A base class")) or len(description) > 1000:
        description = ""  # an inherited docstring, not the user's
    return OutputSpec(
        output_type=output_type,
        schema=OutputSchema(
            name=name,
            description=description or f"The final answer, a {_type_name(output_type)}.",
            json_schema=schema,
            strict=_strict(schema),
        ),
        wrapped=wrapped,
        adapter=adapter,
    )


def _type_name(tp: Any) -> str:
    name = getattr(tp, "__name__", None)
    if isinstance(name, str) and not getattr(tp, "__args__", None):
        return name
    return repr(tp).replace("typing.", "")


def _problems(exc: ValidationError) -> str:
    lines = []
    errors = exc.errors(include_url=False)
    for error in errors[:MAX_PROBLEMS]:
        where = ".".join(str(part) for part in error.get("loc", ())) or "(the answer)"
        given = repr(error.get("input"))
        given = given if len(given) <= 80 else given[:79] + "…"
        lines.append(f"- {where}: {error.get('msg')} (got {given})")
    if len(errors) > MAX_PROBLEMS:
        lines.append(f"- … and {len(errors) - MAX_PROBLEMS} more")
    return "\n".join(lines)


def _strict(schema: Any) -> bool:
    """Whether ``schema`` meets OpenAI's strict rules: objects closed, every property required."""
    if isinstance(schema, list):
        return all(_strict(item) for item in schema)
    if not isinstance(schema, dict):
        return True
    if not set(schema) <= _STRICT_KEYS:
        return False
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False or set(schema.get("required", ())) != set(
            properties
        ):
            return False
    children = [
        child
        for key in ("properties", "$defs")
        if isinstance(schema.get(key), dict)
        for child in schema[key].values()
    ]
    children += [schema[key] for key in ("items", "anyOf") if key in schema]
    return all(_strict(child) for child in children)
