"""``{var}`` in a ``%%agent`` prompt: filled from the user's namespace, never a crash.

``{name}``, ``{df.shape}`` and ``{rows[0]}`` are formatted as ``str.format`` would; ``{{`` and
``}}`` are literal braces; anything that does not resolve (an unknown name, JSON, a set literal,
an unmatched brace) is sent as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["interpolate"]

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
