"""A matplotlib figure for the model: a short description for every model, and a downscaled PNG
for the models that accept images (the loop decides which: :mod:`ipyagent.agentlib.vision`).

The user sees the full figure either way; the model never gets a bare "a figure was shown".
"""

from __future__ import annotations

import base64
import io
from typing import Any

from ...agentlib.messages import ImageBlock

__all__ = ["MAX_SIDE", "describe_figure", "figure_image"]

#: Pixels of the longer side of a figure sent to a vision model: enough to read a chart, and a
#: few hundred tokens of image input instead of thousands.
MAX_SIDE = 1024
_MAX_DESCRIPTION = 600


def describe_figure(figure: Any) -> str:
    """``figure`` in a phrase: "a bar chart 'Revenue by region' (x: region) with 3 bars", or for
    several axes "a figure of 2 charts: 1) ...; 2) ..."."""
    charts = []
    for axes in getattr(figure, "axes", []):
        try:
            charts.append(_describe_axes(axes))
        except Exception as exc:  # a third-party Axes subclass: say what we could not read
            charts.append(f"a chart ({type(exc).__name__} while reading it)")
    if not charts:
        text = "an empty figure"
    elif len(charts) == 1:
        text = charts[0]
    else:
        text = f"a figure of {len(charts)} charts: " + "; ".join(f"{n}) {c}" for n, c in enumerate(charts, 1))
    return text if len(text) <= _MAX_DESCRIPTION else text[: _MAX_DESCRIPTION - 1] + "…"


def figure_image(figure: Any) -> ImageBlock | None:
    """``figure`` as a PNG whose longer side is at most :data:`MAX_SIDE` pixels, or None when it
    cannot be rendered."""
    try:
        width, height = figure.get_size_inches()
        dpi = min(float(figure.dpi), MAX_SIDE / max(width, height, 1e-6))
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=dpi)
    except Exception:  # an unrenderable figure is still described in text
        return None
    return ImageBlock(media_type="image/png", data=base64.b64encode(buffer.getvalue()).decode("ascii"))


def _describe_axes(axes: Any) -> str:
    lines = axes.get_lines()
    bars = [c for c in getattr(axes, "containers", []) if type(c).__name__ == "BarContainer"]
    points = [c for c in axes.collections if type(c).__name__ == "PathCollection"]
    drawn = [
        (len(lines), "line chart", _count(len(lines), "line")),
        (len(bars), "bar chart", _count(sum(len(b) for b in bars), "bar")),
        (len(points), "scatter plot", _count(len(points), "series", "series") + " of points"),
        (len(axes.images), "heatmap", _count(len(axes.images), "image")),
    ]
    present = [(kind, what) for n, kind, what in drawn if n]
    kind = present[0][0] if len(present) == 1 else "chart"
    title = axes.get_title()
    text = f"a {kind}" + (f" {title!r}" if title else "")
    labels = [
        f"{axis}: {label}" for axis, label in (("x", axes.get_xlabel()), ("y", axes.get_ylabel())) if label
    ]
    if labels:
        text += f" ({', '.join(labels)})"
    text += " with " + " and ".join(what for _, what in present) if present else " with nothing drawn"
    legend = axes.get_legend()
    labels = [t.get_text() for t in legend.get_texts()][:8] if legend is not None else []
    if labels:
        text += f", legend: {', '.join(labels)}"
    return text


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"
