"""Shared by the benchmarks: print a table and write the JSON beside it."""

from __future__ import annotations

import json
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def report(name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], extra: dict[str, Any]) -> Path:
    _table(columns, rows)
    for key, value in extra.items():
        print(f"{key}: {value}")
    return _write(name, {"columns": list(columns), "rows": [list(r) for r in rows], **extra})


def report_sections(
    name: str, sections: Sequence[tuple[str, Sequence[str], Sequence[Sequence[Any]]]], extra: dict[str, Any]
) -> Path:
    """One table per section, printed; all of them in one JSON (``sections``: title -> table)."""
    for title, columns, rows in sections:
        print(f"\n== {title}")
        _table(columns, rows)
    for key, value in extra.items():
        if not isinstance(value, list | dict):
            print(f"{key}: {value}")
    tables = {title: {"columns": list(c), "rows": [list(r) for r in rows]} for title, c, rows in sections}
    return _write(name, {"sections": tables, **extra})


def _table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    widths = [max(len(str(c)), *(len(_fmt(r[i])) for r in rows)) for i, c in enumerate(columns)]
    print(" | ".join(str(c).ljust(w) for c, w in zip(columns, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(" | ".join(_fmt(v).ljust(w) for v, w in zip(row, widths, strict=True)))


def _write(name: str, content: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"benchmark": name, "python": sys.version.split()[0], "machine": platform.machine(), **content}
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {path}")
    return path


def _fmt(value: Any) -> str:
    return f"{value:,.1f}" if isinstance(value, float) else str(value)
