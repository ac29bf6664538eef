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
    """``figure`` in a sentence per axes: title, axis labels, what is drawn, the legend."""
    parts = []
    for number, axes in enumerate(getattr(figure, "axes", []), 1):
        try:
            parts.append(f"axes {number}: {_describe_axes(axes)}")
        except Exception as exc:  # a third-party Axes subclass: say what we could not read
            parts.append(f"axes {number}: ({type(exc).__name__} while reading it)")
    if not parts:
        return "an empty figure"
    text = "; ".join(parts)
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
    said = []
    title = axes.get_title()
    if title:
        said.append(f"title {title!r}")
    for axis, label in (("x", axes.get_xlabel()), ("y", axes.get_ylabel())):
        if label:
            said.append(f"{axis} {label!r}")
    drawn = []
    lines = axes.get_lines()
    if lines:
        drawn.append(_count(len(lines), "line"))
    bars = [c for c in getattr(axes, "containers", []) if type(c).__name__ == "BarContainer"]
    if bars:
        drawn.append(f"{_count(len(bars), 'bar series', 'bar series')} ({sum(len(b) for b in bars)} bars)")
    points = [c for c in axes.collections if type(c).__name__ == "PathCollection"]
    if points:
        drawn.append(_count(len(points), "scatter series", "scatter series"))
    if axes.images:
        drawn.append(_count(len(axes.images), "image or heatmap", "images or heatmaps"))
    said.append(", ".join(drawn) if drawn else "nothing drawn")
    legend = axes.get_legend()
    if legend is not None:
        labels = [t.get_text() for t in legend.get_texts()][:8]
        if labels:
            said.append(f"legend {', '.join(labels)}")
    return "; ".join(said)


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"
