"""What a map runs over and what it gives back: items in, one prompt each, results out aligned.

:func:`map_input` takes a list (any iterable), a pandas Series or a DataFrame (its rows, each a
dict of its columns) and renders each item's prompt: a template with ``{item}`` (a row's columns
by name too: ``"Classify: {title} — {body}"``) or a function of the item. :func:`fingerprint`
names a call by what it asks (the prompts, the output type's schema and the model), which is how
a checkpoint is known to be this call's. :func:`to_frame` turns outputs into a DataFrame aligned
with the input's index. pandas is imported only when the input is pandas'.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from .errors import UserError

__all__ = ["MapInput", "fingerprint", "map_input", "prompt_key", "to_frame"]

Prompt = str | Callable[[Any], str]


@dataclass(frozen=True)
class MapInput:
    """The items of a map and their prompts; ``index`` is a pandas input's index (else None)."""

    items: list[Any]
    prompts: list[str]
    index: Any = None
    #: "list", "series" or "frame": what the results are shaped like.
    kind: str = "list"


def map_input(items: Iterable[Any], prompt: Prompt) -> MapInput:
    """``items`` and their rendered prompts (a :class:`UserError` for a template that does not fit)."""
    kind, index, values = _values(items)
    prompts = [_render(prompt, value, number) for number, value in enumerate(values)]
    return MapInput(items=values, prompts=prompts, index=index, kind=kind)


def _values(items: Iterable[Any]) -> tuple[str, Any, list[Any]]:
    data: Any = items  # pandas objects are duck-typed: pandas is not imported for a list
    if type(data).__module__.startswith("pandas") and hasattr(data, "to_dict"):
        if type(data).__name__ == "DataFrame":
            rows = data.to_dict(orient="records")
            return "frame", data.index, [{str(k): v for k, v in row.items()} for row in rows]
        return "series", data.index, list(data.tolist())
    if isinstance(items, (str, bytes, Mapping)):
        raise UserError(
            f"agent.map needs a list of items, a pandas Series or a DataFrame, not a {type(items).__name__}.",
            hint="Pass e.g. a list: agent.map([...], prompt).",
            code="invalid_map_items",
        )
    return "list", None, list(items)


def _render(prompt: Prompt, item: Any, number: int) -> str:
    if callable(prompt):
        text = prompt(item)
        if not isinstance(text, str):
            raise UserError(
                f"The prompt function returned a {type(text).__name__} for item {number}, not a str.",
                hint="Make it return the prompt's text.",
                code="invalid_map_prompt",
            )
        return text
    fields = {**item, "item": item} if isinstance(item, Mapping) else {"item": item}
    try:
        return prompt.format_map(fields)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        names = ", ".join(f"{{{name}}}" for name in fields)
        raise UserError(
            f"The prompt template does not fit item {number}: {type(exc).__name__}: {exc}",
            hint=f"It may use {names}; write literal braces as {{{{ }}}}, or pass a function of the item.",
            code="invalid_map_prompt",
        ) from None


def prompt_key(prompt: str) -> str:
    """A short hash of one item's prompt: the checkpoint keeps it beside the item's index."""
    return hashlib.sha256(prompt.encode()).hexdigest()[:16]


def fingerprint(prompts: list[str], output_schema: Any, model: str) -> str:
    """What names a map call: its prompts in order, its output type's schema and its model."""
    digest = hashlib.sha256()
    head = json.dumps({"output": output_schema, "model": model, "items": len(prompts)}, sort_keys=True)
    digest.update(head.encode())
    for prompt in prompts:
        digest.update(b"\x00" + prompt.encode())
    return digest.hexdigest()


def to_frame(outputs: list[Any], errors: list[str | None], index: Any) -> Any:
    """A DataFrame of ``outputs`` on ``index``: a model's, dataclass's or dict's fields as
    columns, anything else in one ``output`` column; an ``error`` column says why an item failed."""
    pd = importlib.import_module("pandas")  # only ever reached with a pandas input: it is there
    rows = [_fields(value) for value in outputs]
    if any(row is not None for row in rows) and all(
        row is not None or v is None for row, v in zip(rows, outputs, strict=True)
    ):
        columns: dict[str, None] = {}
        for row in rows:
            columns.update(dict.fromkeys(row or {}))
        data = [row if row is not None else dict.fromkeys(columns) for row in rows]
        frame = pd.DataFrame(data, index=index, columns=list(columns))
    else:
        frame = pd.DataFrame({"output": outputs}, index=index)
    frame["error"] = errors
    return frame


def _fields(value: Any) -> dict[str, Any] | None:
    if isinstance(value, BaseModel):
        return {name: getattr(value, name) for name in type(value).model_fields}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return dict(value)
    return None
