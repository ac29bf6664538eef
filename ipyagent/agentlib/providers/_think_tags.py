"""Sans-IO splitter of ``<think>…</think>`` reasoning out of streamed text.

Servers that do not parse reasoning themselves (llama.cpp with ``--reasoning-format none``, many
local models behind an OpenAI-compatible or Ollama API) stream it inline as
``<think>reasoning</think>answer``. :class:`ThinkTagSplitter` is fed text deltas, cut anywhere
(even inside a tag), and returns ``("thinking", ...)`` and ``("text", ...)`` pieces.

Only a ``<think>`` that opens the response (after optional whitespace) is recognised. Reasoning
models always think first; a ``<think>`` later in an answer is far more likely the model writing
*about* the tag (say, in code) and is left alone.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

__all__ = ["CLOSE_TAG", "OPEN_TAG", "Piece", "ThinkTagSplitter"]

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"

Piece: TypeAlias = tuple[Literal["text", "thinking"], str]

_START, _THINKING, _AFTER, _TEXT = range(4)


class ThinkTagSplitter:
    """Feed text deltas with :meth:`feed`, then call :meth:`flush` once at the end."""

    def __init__(self) -> None:
        self._state = _START
        self._held = ""

    @property
    def settled(self) -> bool:
        """True once the response is past any reasoning: the rest is all text."""
        return self._state == _TEXT

    def feed(self, text: str) -> list[Piece]:
        if self._state == _TEXT:
            return [("text", text)] if text else []
        out: list[Piece] = []
        self._held += text
        if self._state == _START:
            stripped = self._held.lstrip()
            if not stripped or (len(stripped) < len(OPEN_TAG) and OPEN_TAG.startswith(stripped)):
                return out  # still only whitespace or a piece of "<think>": wait for more
            if not stripped.startswith(OPEN_TAG):
                self._state = _TEXT
                out.append(("text", self._held))
                self._held = ""
                return out
            self._state = _THINKING
            self._held = stripped[len(OPEN_TAG) :]
        if self._state == _THINKING:
            end = self._held.find(CLOSE_TAG)
            if end < 0:
                keep = _partial_suffix(self._held, CLOSE_TAG)
                thinking = self._held[: len(self._held) - keep]
                self._held = self._held[len(self._held) - keep :]
                if thinking:
                    out.append(("thinking", thinking))
                return out
            if end:
                out.append(("thinking", self._held[:end]))
            self._held = self._held[end + len(CLOSE_TAG) :]
            self._state = _AFTER
        # _AFTER: models put blank lines between </think> and the answer; they are not content.
        answer = self._held.lstrip()
        self._held = ""
        if answer:
            self._state = _TEXT
            out.append(("text", answer))
        return out

    def flush(self) -> list[Piece]:
        """End of the response: whatever was held back comes out as what it turned out to be."""
        held, self._held = self._held, ""
        if not held:
            return []
        if self._state == _START:
            return [("text", held)]
        if self._state == _THINKING:
            return [("thinking", held)]  # reasoning cut off before its closing tag
        return []


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that could be the start of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0
