"""Token usage, cost, and how full the context window is.

:class:`Usage` is per request or summed over many (``a + b``). :class:`ContextWindow` says how
much of the model's window the conversation fills — exact when the provider reported the
prompt size, otherwise estimated from the transcript and marked ``approximate``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from .messages import Message

__all__ = ["ContextWindow", "Usage", "cache_summary", "estimate_tokens", "request_usage"]

# ~4 characters a token is the usual rule of thumb for English text and code with BPE tokenizers.
CHARS_PER_TOKEN = 4


class Usage(BaseModel):
    """Tokens of one request or of many summed.

    ``input_tokens + cache_read_tokens`` is the whole prompt: ``cache_read_tokens`` were read from
    the provider's prompt cache, ``cache_write_tokens`` (counted inside ``input_tokens``) were
    written to it, ``cache_write_1h_tokens`` of them for an hour (Anthropic prices those apart).
    ``cost`` is what the tokens cost in US dollars when a price is known, and
    ``cache_saved`` what prompt caching saved on them: the cost of the cached tokens at the
    uncached input price minus what they cost (negative while cache writes have not yet been read
    back enough to pay for their surcharge).
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float | None = None
    cache_saved: float | None = None
    requests: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        cost = _add(self.cost, other.cost)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cache_write_1h_tokens=self.cache_write_1h_tokens + other.cache_write_1h_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cost=cost,
            cache_saved=_add(self.cache_saved, other.cache_saved),
            requests=self.requests + other.requests,
        )

    def __str__(self) -> str:
        text = f"{self.input_tokens:,} in / {self.output_tokens:,} out"
        if self.cache_read_tokens:
            text += f" ({self.cache_read_tokens:,} cached)"
        if self.cost is not None:
            text += f" · ${self.cost:.4f}"
        if self.cache_saved:
            text += f" (caching saved ${self.cache_saved:.4f})"
        return text


def cache_summary(usage: Usage) -> str:
    """What the provider's prompt cache did for ``usage``, in one line ("" when it did nothing):
    the share of the prompt read from it, what was written, and what caching saved."""
    if not usage.cache_read_tokens and not usage.cache_write_tokens:
        return ""
    prompt = usage.input_tokens + usage.cache_read_tokens
    line = (
        f"prompt cache: {usage.cache_read_tokens:,} of {prompt:,} prompt tokens read from it "
        f"({100 * usage.cache_read_tokens / max(1, prompt):.0f}%), {usage.cache_write_tokens:,} written"
    )
    saved = usage.cache_saved
    if saved is not None and not saved and not usage.cost:  # a model that costs nothing (local)
        return line
    if saved is not None and saved >= 0:
        line += f"; caching saved ${saved:.4f}"
    elif saved is not None:  # Anthropic's writes cost more than input until they are read back
        line += f"; caching cost ${-saved:.4f} more so far (its writes are not yet read back)"
    return line


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None and b is None else (a or 0.0) + (b or 0.0)


def request_usage(reported: Usage | None) -> Usage:
    """One model request's usage as it is counted: what the provider reported (nothing when it
    did not say), and one request."""
    return (reported or Usage()).model_copy(update={"requests": 1})


class ContextWindow(BaseModel):
    """``used`` tokens of ``limit`` (``None`` when the model's window is unknown)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    used: int
    limit: int | None = None
    approximate: bool = True

    @property
    def fraction(self) -> float | None:
        return self.used / self.limit if self.limit else None

    def __str__(self) -> str:
        used = f"~{self.used:,}" if self.approximate else f"{self.used:,}"
        if self.limit is None:
            return f"{used} tokens"
        return f"{used} / {self.limit:,} tokens ({100 * self.used / self.limit:.0f}%)"


def estimate_tokens(system: str, messages: Iterable[Message]) -> int:
    """A provider-independent estimate of the prompt size in tokens."""
    chars = len(system)
    for message in messages:
        for block in message.content:
            chars += (
                len(json.dumps(block.model_dump(mode="json", exclude={"denied"})))
                if block.type != "text"
                else len(block.text)
            )
    return chars // CHARS_PER_TOKEN + 1
