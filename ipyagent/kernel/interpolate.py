"""The user's expressions in a ``%%agent`` cell, evaluated in the user's namespace.

``{var}`` in a prompt (:func:`interpolate`) is filled, never a crash: ``{name}``, ``{df.shape}``
and ``{rows[0]}`` are formatted as ``str.format`` would; ``{{`` and ``}}`` are literal braces;
anything that does not resolve (an unknown name, JSON, a set literal, an unmatched brace) is
sent as written. ``--output-type EXPR`` (:func:`evaluate_type`) is evaluated, and an error says
what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["evaluate_type", "interpolate"]

_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][^{}]*)\}")


def interpolate(text: str, namespace: Mapping[str, Any]) -> str:
    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        try:
            return ("{" + match.group(1) + "}").format_map(namespace)
        except Exception:  # unknown name, bad attribute, not a format field at all: keep it
            return token

    return _FIELD.sub(replace, text)


def evaluate_type(name: str | None, namespace: dict[str, Any]) -> Any:
    """The type ``--output-type name`` names, evaluated in ``namespace`` (None: a text answer)."""
    if not name:
        return None
    try:
        return eval(name, namespace)  # the user's own expression, in the user's own namespace
    except Exception as exc:
        from ..agentlib.errors import UserError

        raise UserError(
            f"--output-type {name}: {type(exc).__name__}: {exc}",
            hint="Name a type defined in the notebook (class Ticket(BaseModel): ...), or a type such as "
            "int, list[Ticket] or Literal['a', 'b'] (imported from typing).",
            code="invalid_output_type",
        ) from None
