"""Sans-IO readers of what the local model writes: tool calls in text, and answer envelopes.

:class:`ToolTextParser` finds tool calls in generated text (``<tool_call>`` tags, fenced or bare
JSON); :class:`AnswerDecoder` streams the text of a ``{"answer": "..."}`` envelope. Both take
text cut anywhere and give back text as soon as it cannot be part of something held back. Which
:class:`ReplyReader` puts them together with ``<think>`` tags and turns a reply into provider
events.
"""

from __future__ import annotations

import json
import string
from collections.abc import Sequence
from dataclasses import dataclass

from ..model import ProviderEvent, TextChunk, ThinkingChunk, ToolCallChunk
from ._think_tags import Piece, ThinkTagSplitter

__all__ = ["AnswerDecoder", "ParsedCall", "ReplyReader", "ToolTextParser"]


@dataclass
class ParsedCall:
    name: str
    arguments: str


_OPENERS = ("<tool_call>", "```")


class ToolTextParser:
    """Sans-IO: split generated text into text and tool calls.

    Recognises ``<tool_call>{json}</tool_call>`` (Qwen, Hermes), a fenced block holding
    ``{"name": ..., "arguments": {...}}`` for a known tool (how small models often answer), and a
    reply that is only such a JSON object. Anything held back that turns out not to be a call is
    given back as text, unchanged.
    """

    def __init__(self, tool_names: Sequence[str]) -> None:
        self._names = set(tool_names)
        self._held = ""
        self._started = False  # any non-space text seen yet

    def feed(self, text: str) -> list[str | ParsedCall]:
        self._held += text
        out: list[str | ParsedCall] = []
        while self._held:
            if not self._started and self._names:
                stripped = self._held.lstrip()
                if not stripped:
                    return out
                if stripped.startswith("{"):
                    return out  # maybe a bare JSON call: decided at the end
                self._started = True
            start = min((i for i in (self._held.find(o) for o in _OPENERS) if i >= 0), default=-1)
            if start < 0 or not self._names:
                keep = 0 if not self._names else _partial_opener(self._held)
                if len(self._held) > keep:
                    out.append(self._held[: len(self._held) - keep])
                self._held = self._held[len(self._held) - keep :]
                return out
            if start:
                out.append(self._held[:start])
                self._held = self._held[start:]
            block, rest = _complete_block(self._held)
            if block is None:
                return out  # wait for the closing tag or fence
            call = self._call(_block_body(block))
            out.append(call if call is not None else block)
            self._held = rest
        return out

    def flush(self) -> list[str | ParsedCall]:
        held, self._held = self._held, ""
        if not held:
            return []
        call = self._call(held)
        if call is None and held.lstrip().startswith("<tool_call>"):
            call = self._call(_block_body(held + "</tool_call>"))  # cut off before its end tag
        return [call if call is not None else held]

    def _call(self, body: str) -> ParsedCall | None:
        try:
            value = json.loads(body.strip())
        except ValueError:
            return None
        if not isinstance(value, dict) or value.get("name") not in self._names:
            return None
        arguments = value.get("arguments", value.get("parameters", {}))
        if isinstance(arguments, str):  # some models double-encode the arguments
            return ParsedCall(value["name"], arguments)
        return ParsedCall(value["name"], json.dumps(arguments, ensure_ascii=False))


def _partial_opener(text: str) -> int:
    """Length of the longest end of ``text`` that could start an opener."""
    best = 0
    for opener in _OPENERS:
        for size in range(min(len(opener) - 1, len(text)), best, -1):
            if opener.startswith(text[-size:]):
                best = size
                break
    return best


def _complete_block(text: str) -> tuple[str | None, str]:
    """``text`` starts with an opener: the whole block and what follows, or ``None`` if open."""
    if text.startswith("<tool_call>"):
        end = text.find("</tool_call>")
        return (None, text) if end < 0 else (text[: end + 12], text[end + 12 :])
    end = text.find("```", 3)
    return (None, text) if end < 0 else (text[: end + 3], text[end + 3 :])


def _block_body(block: str) -> str:
    if block.startswith("<tool_call>"):
        return block[len("<tool_call>") : -len("</tool_call>")]
    body = block[3:-3]
    first, _, rest = body.partition("\n")
    return rest if first.strip().isalpha() or not first.strip() else body  # drop "json", "tool_call"


class AnswerDecoder:
    """Sans-IO: the text of a JSON string fed in pieces, the opening quote already consumed,
    up to its closing quote; what follows the string is ignored.

    An escape cut across pieces is held until complete (a ``\\u`` high surrogate until its low
    half). Malformed escapes, possible without a grammar, are given back as written.
    """

    def __init__(self) -> None:
        self._held = ""
        self.done = False  # the closing quote was seen

    def feed(self, text: str) -> str:
        if self.done:
            return ""
        raw = self._held + text
        end = _string_end(raw)
        if end < len(raw) and raw[end] == '"':
            self.done = True
            self._held = ""
        else:
            self._held = raw[end:]
        return _unescape(raw[:end])

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held


def _string_end(raw: str) -> int:
    """Where the complete part of a JSON string body ends: at its closing quote, at an escape
    cut short, or at the end of ``raw``."""
    i = 0
    while i < len(raw):
        char = raw[i]
        if char == '"':
            return i
        if char != "\\":
            i += 1
            continue
        if i + 1 >= len(raw):
            return i
        if raw[i + 1] != "u":
            i += 2
            continue
        if i + 6 > len(raw):
            return i
        start, i = i, i + 6
        if raw[start + 2 : start + 4].lower() in ("d8", "d9", "da", "db"):
            # A high surrogate is decoded together with the low half that follows it.
            low = _low_half(raw[i : i + 6])
            if low is None:
                return start
            i += 6 if low else 0
    return i


_LOW_HALF = ("\\", "u", "dD", "cdefCDEF", string.hexdigits, string.hexdigits)


def _low_half(text: str) -> bool | None:
    """Whether ``text`` opens with a ``\\u`` escape of a low surrogate; ``None``: too short to tell."""
    if any(char not in allowed for char, allowed in zip(text, _LOW_HALF, strict=False)):
        return False
    return True if len(text) >= len(_LOW_HALF) else None


def _unescape(body: str) -> str:
    if "\\" not in body:
        return body
    try:
        text = json.loads(f'"{body}"', strict=False)
    except ValueError:
        return body
    # A lone surrogate (a high half with no low one) cannot be encoded later: replace it.
    return str(text).encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class ReplyReader:
    """Sans-IO: a reply's text, fed in pieces, as provider events.

    ``tool_names`` are the tools a call in the text may name (none: all text); with
    ``envelope`` the reply is the rest of an answer envelope, whose string is the text. Once
    :attr:`finished`, the rest of the reply means nothing: the envelope closed, or a call was
    written again with the same arguments (small models repeat a call in a loop; the copy is
    dropped).
    """

    def __init__(self, tool_names: Sequence[str], *, envelope: bool = False) -> None:
        self._answer = AnswerDecoder() if envelope else None
        self._thinking = ThinkTagSplitter()
        self._calls = ToolTextParser(tool_names)
        self._seen: set[tuple[str, str]] = set()
        self._repeated = False
        # Whitespace written after a call (the grammar's separator before another one) is held:
        # it is text only if more text follows.
        self._after_call: str | None = None
        self.calls = 0  # tool calls found so far

    @property
    def finished(self) -> bool:
        return self._repeated or (self._answer is not None and self._answer.done)

    def feed(self, text: str) -> list[ProviderEvent]:
        if self.finished:
            return []
        if self._answer is not None:
            text = self._answer.feed(text)
        return self._events(self._thinking.feed(text), final=False)

    def flush(self) -> list[ProviderEvent]:
        if self._repeated:
            return []
        pieces = self._thinking.feed(self._answer.flush()) if self._answer is not None else []
        return self._events([*pieces, *self._thinking.flush()], final=True)

    def _events(self, pieces: list[Piece], *, final: bool) -> list[ProviderEvent]:
        events: list[ProviderEvent] = []
        for kind, text in pieces:
            if kind == "thinking":
                events.append(ThinkingChunk(text=text))
            else:
                events.extend(self._parts(self._calls.feed(text)))
        if final:
            events.extend(self._parts(self._calls.flush()))
        return events

    def _parts(self, parts: list[str | ParsedCall]) -> list[ProviderEvent]:
        events: list[ProviderEvent] = []
        for part in parts:
            if self._repeated:
                break
            if isinstance(part, str):
                if self._after_call is not None and not part.strip():
                    self._after_call += part
                    continue
                events.append(TextChunk(text=(self._after_call or "") + part))
                self._after_call = None
            elif (part.name, part.arguments) in self._seen:
                self._repeated = True
            else:
                self._seen.add((part.name, part.arguments))
                events.append(ToolCallChunk(key=self.calls, name=part.name, arguments=part.arguments))
                self._after_call = ""
                self.calls += 1
        return events
