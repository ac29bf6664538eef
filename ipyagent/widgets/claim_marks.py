"""A run's traced claims as view data: which text blocks show them, and where in each.

The kernel decides what is traced (:mod:`~ipyagent.agentlib.claims`); the views only mark it.
A claim is located by its text and which occurrence of that text in its block it is (``nth``,
counted outside fenced code), not by an offset: the front end marks the rendered Markdown,
whose text is the source's without its markup, so an occurrence count is what both sides agree
on. What a view's text says of them (the untraced values, after the answer) is here too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from ..agentlib import events as ev
from .view_state import Block, ClaimSourceView, ClaimView, TextBlock

__all__ = ["claim_views", "untraced_note", "untraced_text"]

# As claims.py skips them: a fenced block's numbers are code, not claims, and the front end
# leaves ``<pre>`` out of its count.
_FENCE = re.compile(r"```.*?(?:```|$)", re.S)


def claim_views(
    blocks: Sequence[Block], finished: ev.RunFinished, prefix: str
) -> list[tuple[str, list[ClaimView]]]:
    """``(block id, its claims)`` for the text blocks that show the answer of the run that
    ``finished``: the text blocks of the last request among the top-level blocks whose ids start
    with ``prefix`` (the run's). Nothing when those blocks do not hold exactly the answer: no
    mark beats a misplaced one."""
    answer, claims = finished.text, finished.claims
    if not claims:
        return []
    texts: list[TextBlock] = [
        b for b in blocks if b["kind"] == "text" and not b.get("parent") and b["id"].startswith(prefix)
    ]
    if not texts:
        return []
    request = texts[-1]["id"].rsplit(".", 1)[0]
    shown = [b for b in texts if b["id"].rsplit(".", 1)[0] == request]
    if "".join(b["text"] for b in shown) != answer:
        return []
    marked = []
    offset = 0
    for block in shown:
        end = offset + len(block["text"])
        views = [_view(c, block["text"], c.start - offset) for c in claims if offset <= c.start < end]
        if views:
            marked.append((block["id"], views))
        offset = end
    return marked


def untraced_note(block: Block) -> str:
    """The line after a text block that names its untraced values ("" when all are traced)."""
    if block["kind"] != "text":
        return ""
    return untraced_text([c["text"] for c in block.get("claims", ()) if c["source"] is None])


def untraced_text(untraced: Sequence[str]) -> str:
    """The line after an answer that names its untraced values ("" for none)."""
    return f"⚠ Not found in any tool output: {', '.join(untraced)}" if untraced else ""


def _view(claim: ev.Claim, text: str, at: int) -> ClaimView:
    found = claim.source
    source: ClaimSourceView | None = (
        None if found is None else {"call": found.call_id, "tool": found.tool, "line": found.line}
    )
    kind: Literal["number", "name"] = "number" if claim.kind == "number" else "name"
    return {"text": claim.text, "nth": _occurrences(text[:at], claim.text), "kind": kind, "source": source}


def _occurrences(text: str, wanted: str) -> int:
    """How often ``wanted`` occurs in ``text`` outside fenced code (overlapping ones too, as the
    front end counts them)."""
    plain = _FENCE.sub(lambda m: "\0" * len(m.group()), text)
    count, at = 0, plain.find(wanted)
    while at >= 0:
        count += 1
        at = plain.find(wanted, at + 1)
    return count
