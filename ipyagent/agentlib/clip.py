"""Cutting text to a length: the three ways the core does it, each for its reader.

- :func:`clip`: at most ``limit`` characters, the last an ellipsis — what a person reads on one
  line (a result's repr, a policy's message, a summary, why a line of a file was skipped);
- :func:`clip_middle`: the head and the tail, with a line saying how much was cut between them —
  what a model reads where both ends matter (a transcript being compacted);
- :func:`clip_head`: the head, with a line saying how much of the whole it is — what a model
  reads where the start matters and it should know the rest exists (a sub-agent's answer).
"""

from __future__ import annotations

__all__ = ["clip", "clip_head", "clip_middle"]


def clip(text: str, limit: int) -> str:
    """``text``, or its first ``limit - 1`` characters and "…" when it is longer than ``limit``."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip_middle(text: str, limit: int) -> str:
    """``text``, or its first and last ``limit // 2`` characters with a line between them that
    says how many were cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - limit:,} characters cut …]\n{text[-half:]}"


def clip_head(text: str, limit: int, what: str) -> str:
    """``text``, or its first ``limit`` characters and a line saying that ``what`` was cut and how
    much of it is shown."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… [{what} was cut: {limit:,} of {len(text):,} characters shown]"
