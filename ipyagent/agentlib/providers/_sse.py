"""Sans-IO decoders for the two streaming framings the adapters read: SSE and NDJSON.

Bytes go in (cut anywhere, even inside a UTF-8 sequence or between ``\\r`` and ``\\n``), whole
events or lines come out. Nothing here knows about HTTP, JSON or any provider; the only error
raised is :class:`~ipyagent.agentlib.errors.ProtocolError` (bytes that are not UTF-8, or a line
longer than any sane provider sends).

An event or line cut off by the end of the stream is dropped, not delivered half-written: the
adapter then sees that its end marker never came and reports a truncated stream.
"""

from __future__ import annotations

import codecs
import re
from typing import NamedTuple

from ..errors import ProtocolError

__all__ = ["MAX_LINE_CHARS", "NDJSONDecoder", "SSEDecoder", "SSEEvent"]

# A line longer than this means the stream is not what we think it is; without a cap a server
# that never sends a newline would grow the buffer until the kernel runs out of memory.
MAX_LINE_CHARS = 16 * 1024 * 1024

# SSE and NDJSON end lines with \r\n, \n or \r only; str.splitlines() would also split on
# \u2028, \x0c and friends, which may appear raw inside JSON strings.
_NEWLINE = re.compile(r"\r\n|\r|\n")


class _LineBuffer:
    """Incremental UTF-8 decoding and line splitting shared by both decoders."""

    def __init__(self, max_line: int) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._tail = ""
        self._skip_lf = False
        self._started = False
        self._max_line = max_line

    def feed(self, data: bytes) -> list[str]:
        try:
            text = self._decoder.decode(data)
        except UnicodeDecodeError as exc:
            raise _not_utf8() from exc
        return self._split(text)

    def close(self) -> bool:
        """Flush the decoder; True when the stream ended exactly at a line end."""
        try:
            # Only raises (a sequence cut by the end); strict UTF-8 never returns text here.
            self._decoder.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            raise _not_utf8() from exc
        complete = not self._tail
        self._tail = ""
        return complete

    def _split(self, text: str) -> list[str]:
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._skip_lf and text:
            # The previous chunk ended in \r: a \n that opens this one belongs to it.
            text = text.removeprefix("\n")
            self._skip_lf = False
        if not text:
            return []
        # str.split is an order of magnitude faster than the regex, and almost every server ends
        # lines with \n alone. The tail never holds a \r: it would have ended a line.
        parts = (self._tail + text).split("\n") if "\r" not in text else _NEWLINE.split(self._tail + text)
        self._tail = parts.pop()
        self._skip_lf = text.endswith("\r")
        if len(self._tail) > self._max_line:
            raise ProtocolError(
                f"The stream sent a line longer than {self._max_line:,} characters.",
                hint="The server is not speaking the expected streaming format — check the endpoint's "
                "base URL and kind.",
                code="line_too_long",
            )
        return parts


def _not_utf8() -> ProtocolError:
    return ProtocolError(
        "The stream is not valid UTF-8.",
        hint="The server is not speaking the expected streaming format — check the endpoint's base URL "
        "and kind.",
        code="invalid_encoding",
    )


class SSEEvent(NamedTuple):
    """One server-sent event: its ``event`` name (``message`` when unnamed) and its ``data``.

    A named tuple because one is made per token, and it is several times cheaper to build than
    a frozen dataclass."""

    data: str
    event: str = "message"
    id: str | None = None


# A named tuple's own constructor is a Python function; tuple.__new__ builds the same object at
# a third of the cost, once per token.
_new_event = tuple.__new__


class SSEDecoder:
    """Turns bytes of a ``text/event-stream`` into :class:`SSEEvent` (the WHATWG rules).

    Comment lines (``: OPENROUTER PROCESSING``) and ``retry:`` fields are dropped; ``data:`` lines
    of one event are joined with ``\\n``.
    """

    def __init__(self, *, max_line: int = MAX_LINE_CHARS) -> None:
        self._lines = _LineBuffer(max_line)
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, data: bytes) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        pending = self._data
        # The two lines of nearly every event, a ``data:`` line and the blank one that ends it,
        # are handled inline: this loop runs twice per token.
        for line in self._lines.feed(data):
            if line.startswith("data: "):
                pending.append(line[6:])
            elif not line and pending and not self._event:
                events.append(_new_event(SSEEvent, ("\n".join(pending), "message", self._id)))
                pending.clear()
            else:
                event = self._line(line)
                if event is not None:
                    events.append(event)
        return events

    def close(self) -> list[SSEEvent]:
        """End of stream. An event whose last line was complete but lacked the blank line that
        dispatches it is still delivered (some servers omit it after ``[DONE]``); a half line
        is dropped."""
        complete = self._lines.close()
        if complete and self._data:
            event = self._line("")
            return [event] if event is not None else []
        return []

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SSEEvent(data="\n".join(self._data), event=self._event or "message", id=self._id)
            self._data.clear()
            self._event = ""
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
        return None


class NDJSONDecoder:
    """Turns bytes of ``application/x-ndjson`` into its non-blank lines (not yet parsed)."""

    def __init__(self, *, max_line: int = MAX_LINE_CHARS) -> None:
        self._lines = _LineBuffer(max_line)

    def feed(self, data: bytes) -> list[str]:
        return [line for line in self._lines.feed(data) if line.strip()]

    def close(self) -> list[str]:
        """End of stream. A final line without its newline is dropped: every NDJSON server we
        read ends each object with one, so a missing newline means the stream was cut."""
        self._lines.close()
        return []
