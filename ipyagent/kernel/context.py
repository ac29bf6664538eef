"""What the model is told about the notebook without asking: a compact, bounded summary sent
with each ``%%agent`` prompt and chat message.

Four parts, chosen per cell (``%%agent --context outline,variables``, ``--context none``) or for
every cell (``c.AgentMagics.context``). The default, ``auto``, sends all four, except to the
embedded local model (its 1.5B model answered worse with them, and its window is 8k tokens: it
gets the data its prompt names instead, see :mod:`.mentions`) and while recording or replaying a
cassette (a replay runs in another kernel, with other variables):

- ``cell``: the cell the run is in (its id and first lines) — or, in a chat, the active cell;
- ``outline``: the notebook's cells, an id and first line each — the live document where a page
  shows it, else the saved file;
- ``variables``: the user's variables with their types and shapes, a DataFrame's columns — never
  their values;
- ``error``: the last error a cell raised in this kernel.

A token budget (default :data:`DEFAULT_BUDGET`) caps the whole: the biggest part is trimmed first,
line by line from its end, until it fits. The run view shows what was sent and its token count.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agentlib.usage import CHARS_PER_TOKEN

if TYPE_CHECKING:
    from .state import KernelState

__all__ = [
    "DEFAULT_BUDGET",
    "PARTS",
    "NotebookContext",
    "gather_context",
    "parse_parts",
    "render_context",
    "shape_of",
]

PARTS = ("cell", "outline", "variables", "error")
#: Tokens the summary may take (about 4 characters a token).
DEFAULT_BUDGET = 1_000
_FIRST_LINE = 80
_CELL_LINES = 12
_MORE = "… (more left out: the context budget is full)"
#: Characters of cell sources read from the page for an outline (its first cells, whole).
_OUTLINE_CHARS = 20_000
_OPEN, _CLOSE = "<notebook-context>\n", "\n</notebook-context>"


@dataclass(frozen=True)
class NotebookContext:
    """The summary as sent: its text (with a header line per part) and its size."""

    text: str
    tokens: int
    parts: tuple[str, ...]
    trimmed: bool


@dataclass(frozen=True)
class OutlineCell:
    id: str
    cell_type: str
    source: str


def parse_parts(value: str) -> tuple[str, ...]:
    """``"cell,outline"`` → the parts; ``"none"`` or ``""`` → none; ``"all"`` → every part."""
    words = [w.strip().lower() for w in value.split(",") if w.strip()]
    if words in ([], ["none"]):
        return ()
    if words == ["all"]:
        return PARTS
    unknown = [w for w in words if w not in PARTS]
    if unknown:
        from ..agentlib.errors import UserError

        raise UserError(
            f"Unknown context part(s): {', '.join(unknown)}.",
            hint=f"Use some of {', '.join(PARTS)}, or 'all', or 'none'.",
            code="invalid_option",
        )
    return tuple(p for p in PARTS if p in words)


def render_context(
    parts: Sequence[str],
    *,
    cells: Sequence[OutlineCell] | None,
    current_id: str | None,
    variables: Mapping[str, str],
    last_error: str | None,
    budget: int = DEFAULT_BUDGET,
) -> NotebookContext | None:
    """The summary of ``parts`` within ``budget`` tokens, or None when there is nothing to say."""
    sections: dict[str, list[str]] = {}
    by_id = {c.id: c for c in cells or ()}
    if "cell" in parts and current_id in by_id:
        lines = by_id[current_id].source.splitlines()
        shown = lines[:_CELL_LINES] + (["…"] if len(lines) > _CELL_LINES else [])
        sections["cell"] = [f"## The cell this run is in (id {current_id})", *shown]
    if "outline" in parts and cells:
        rows = [f"{n} [{c.id}] {c.cell_type}: {_first_line(c.source)}" for n, c in enumerate(cells)]
        sections["outline"] = ["## Notebook outline (index [id] type: first line)", *rows]
    if "variables" in parts and variables:
        sections["variables"] = ["## Variables (name: type and shape; values not shown)"] + [
            f"{name}: {summary}" for name, summary in variables.items()
        ]
    if "error" in parts and last_error:
        sections["error"] = ["## The last error in this kernel", last_error]
    if not sections:
        return None
    trimmed = _fit(sections, budget * CHARS_PER_TOKEN - len(_OPEN + _CLOSE) - 2 * len(sections))
    body = "\n\n".join("\n".join(lines) for lines in sections.values())
    text = f"{_OPEN}{body}{_CLOSE}"
    return NotebookContext(
        text=text, tokens=len(text) // CHARS_PER_TOKEN + 1, parts=tuple(sections), trimmed=trimmed
    )


def variable_summaries(namespace: Mapping[str, Any]) -> dict[str, str]:
    """Each data variable's type and shape or length, with a DataFrame's column names; never a
    value. Functions and classes are left out: they are code, not data."""
    out = {}
    for name, value in sorted(namespace.items()):
        if callable(value) and not hasattr(value, "shape"):
            continue
        summary = shape_of(value)
        columns = getattr(value, "columns", None)
        if columns is not None and type(value).__module__.startswith("pandas"):
            names = [str(c) for c in list(columns)[:30]]
            more = f", … {len(columns) - 30} more" if len(columns) > 30 else ""
            summary += f" columns: {', '.join(names)}{more}"
        out[name] = summary
    return out


def shape_of(value: Any) -> str:
    """A value's type, with its shape or length where it has one ("pandas.DataFrame shape=(3, 2)")."""
    kind = type(value)
    name = (
        kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__.split('.')[0]}.{kind.__name__}"
    )
    try:
        shape = getattr(value, "shape", None)
        if isinstance(shape, tuple):
            return f"{name} shape={shape}"
        if isinstance(value, (list, tuple, set, frozenset, dict, str, bytes)):
            return f"{name} len={len(value)}"
    except Exception:  # a user object whose shape or len raises: its type is enough
        pass
    return name


def saved_outline(path: Path | None) -> list[OutlineCell] | None:
    """The cells of the notebook file at ``path``, or None when it cannot be read."""
    if path is None:
        return None
    try:  # plain JSON: nbformat's validation would cost more than the rest of the context
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return [
            OutlineCell(
                id=str(c.get("id", "")),
                cell_type=str(c.get("cell_type", "code")),
                source="".join(c["source"])
                if isinstance(c.get("source"), list)
                else str(c.get("source", "")),
            )
            for c in cells
        ]
    except Exception:  # no file yet, or not a notebook: the outline is left out
        return None


def _joined(source: Any) -> str:
    return "".join(source) if isinstance(source, list) else str(source)  # nbformat stores lines


def _first_line(source: str) -> str:
    line = next((s for s in source.splitlines() if s.strip()), "")
    return line if len(line) <= _FIRST_LINE else line[: _FIRST_LINE - 1] + "…"


def _fit(sections: dict[str, list[str]], limit: int) -> bool:
    """Trim the biggest section's last lines until all of them fit ``limit`` characters."""
    trimmed = False
    while _size(sections.values()) > limit:
        name = max(sections, key=lambda k: _size([sections[k]]))
        lines = sections[name]
        if len(lines) <= 2:  # a header and one line left: cut that line instead
            excess = _size(sections.values()) - limit
            lines[-1] = lines[-1][: max(0, len(lines[-1]) - excess - 1)] + "…"
            if _size(sections.values()) > limit:
                del sections[name]
            trimmed = True
            continue
        if lines[-1] == _MORE:
            del lines[-2]
        else:
            lines[-1] = _MORE
        trimmed = True
    return trimmed


def _size(groups: Iterable[list[str]]) -> int:
    return sum(len(line) + 1 for lines in groups for line in lines)


def gather_context(
    state: KernelState, *, parts: Sequence[str], cell_id: str | None, budget: int = DEFAULT_BUDGET
) -> NotebookContext | None:
    """The summary of ``parts`` for a run in cell ``cell_id`` (None: a chat, whose current cell is
    the page's active one), read from the kernel and the notebook now."""
    if not parts:
        return None
    from .live_notebook import Connected
    from .tools.python import user_variables

    cells: list[OutlineCell] | None = None
    current = cell_id
    if ("outline" in parts or "cell" in parts) and isinstance(state.live.state(), Connected):
        try:
            doc = state.live.read(max_output_chars=0, page_chars=_OUTLINE_CHARS)
        except Exception:  # the page did not answer: the saved file will do
            doc = None
        if doc is not None:
            cells = [OutlineCell(id=c.id, cell_type=c.cell_type, source=c.source) for c in doc.cells]
            current = current or doc.active_cell_id
    if cells is None and ("outline" in parts or "cell" in parts):
        cells = saved_outline(state.notebook)
    namespace = user_variables(state.shell) if "variables" in parts and state.shell is not None else {}
    errors = state.history.errors
    return render_context(
        parts,
        cells=cells,
        current_id=current,
        variables=variable_summaries(namespace),
        last_error=errors[max(errors)] if errors else None,
        budget=budget,
    )
