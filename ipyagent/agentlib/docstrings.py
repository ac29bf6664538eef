"""Reading a tool's description and its parameters' descriptions out of a docstring.

Understands Google (``Args:``), NumPy (``Parameters`` + dashes) and Sphinx (``:param x:``) styles.
Deliberately small: the summary is everything before the first section, and a parameter's
description is the text indented under its name.
"""

from __future__ import annotations

import inspect
import re

__all__ = ["parse_docstring"]

_GOOGLE_ARGS = re.compile(r"^(Args|Arguments|Parameters|Params|Keyword Args|Kwargs):\s*$")
_GOOGLE_OTHER = re.compile(r"^(Returns?|Yields?|Raises?|Examples?|Notes?|See Also|Attributes|Warnings?):\s*$")
_GOOGLE_ITEM = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_HEADER = re.compile(r"^(\w[\w ]*)\n-{3,}\s*$", re.MULTILINE)
_NUMPY_ITEM = re.compile(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(:.*)?$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+):\s*(.*)$")
_SPHINX_ANY = re.compile(r"^:\w+")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Return ``(summary, {parameter: description})``."""
    text = inspect.cleandoc(doc or "")
    if not text:
        return "", {}
    lines = text.splitlines()
    if any(_GOOGLE_ARGS.match(line) for line in lines):
        return _google(lines)
    if _NUMPY_HEADER.search(text):
        return _numpy(lines)
    if any(_SPHINX_PARAM.match(line) for line in lines):
        return _sphinx(lines)
    return _summary(lines), {}


def _summary(lines: list[str]) -> str:
    return "\n".join(lines).strip()


def _google(lines: list[str]) -> tuple[str, dict[str, str]]:
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    item_indent: int | None = None  # the indent of the section's items; deeper lines continue one
    for line in lines:
        stripped = line.strip()
        if _GOOGLE_ARGS.match(line) or _GOOGLE_OTHER.match(line):
            section = "args" if _GOOGLE_ARGS.match(line) else "other"
            current, item_indent = None, None
            continue
        if section is None:
            summary.append(line)
        elif section == "args" and stripped:
            indent = len(line) - len(line.lstrip())
            item = _GOOGLE_ITEM.match(stripped)
            if item and (item_indent is None or indent <= item_indent):
                item_indent = indent
                current = item.group(1).lstrip("*")
                params[current] = item.group(3).strip()
            elif current is not None:
                params[current] = f"{params[current]} {stripped}".strip()
    return _summary(summary), params


def _numpy(lines: list[str]) -> tuple[str, dict[str, str]]:
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and re.match(r"^-{3,}\s*$", lines[i + 1]) and line.strip():
            section = line.strip().lower()
            current = []
            i += 2
            continue
        if section is None:
            summary.append(line)
        elif section in ("parameters", "other parameters", "keyword arguments"):
            if line and not line[0].isspace():
                item = _NUMPY_ITEM.match(line.strip())
                if item:  # "x1, x2 : float" documents two parameters at once
                    current = [n.strip().lstrip("*") for n in item.group(1).split(",")]
                    params.update(dict.fromkeys(current, ""))
            elif current and line.strip():
                for name in current:
                    params[name] = f"{params[name]} {line.strip()}".strip()
        i += 1
    return _summary(summary), params


def _sphinx(lines: list[str]) -> tuple[str, dict[str, str]]:
    summary: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    in_fields = False
    for line in lines:
        stripped = line.strip()
        param = _SPHINX_PARAM.match(stripped)
        if param:
            in_fields = True
            current = param.group(1)
            params[current] = param.group(2).strip()
        elif _SPHINX_ANY.match(stripped):
            in_fields, current = True, None
        elif not in_fields:
            summary.append(line)
        elif current is not None and stripped:
            params[current] = f"{params[current]} {stripped}"
    return _summary(summary), params
