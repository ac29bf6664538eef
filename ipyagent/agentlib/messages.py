"""The provider-neutral transcript: messages made of content blocks.

A conversation is a list of :class:`Message`. A user message holds text, images and the results
of the tools the assistant called; an assistant message holds text, thinking and tool calls.
Every block is a pydantic model discriminated by its ``type``, so a transcript serializes to JSON
and back without loss (:data:`MESSAGE_ADAPTER`). How each provider spells these on the wire is the
business of its adapter, not of this module.
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = [
    "MESSAGES_ADAPTER",
    "MESSAGE_ADAPTER",
    "ContentBlock",
    "FinishReason",
    "ImageBlock",
    "Message",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "new_id",
]

# Schemas are built on first use, not at import: `%load_ext ipyagent` stays fast.
_DEFERRED = ConfigDict(defer_build=True)

#: Why a reply ended. ``pause`` means the provider paused a long turn and expects the reply back
#: to go on (Anthropic's ``pause_turn``); the loop continues it.
FinishReason = Literal[
    "stop", "length", "tool_calls", "content_filter", "refusal", "error", "cancelled", "pause"
]


def new_id(prefix: str) -> str:
    """A short random id such as ``call_3f9a0c1b2d4e``."""
    return f"{prefix}_{_ids.getrandbits(64):016x}"


# 64 random bits per id, as uuid4().hex[:16] gave, without a system call each: ids need to be
# unique, not secret. A generator of their own: one a user seeds (``random.seed(0)``) would give
# every kernel the same ids. Seeded again in a forked child, which would repeat the parent's.
_ids = random.Random()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ids.seed)


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class TextBlock(_Block):
    """Text. In a user message, ``attached`` names what the block carries besides what the user
    typed ("notebook context", "@sales", "notes.md"): the model reads it like any text; views
    show it folded."""

    type: Literal["text"] = "text"
    text: str
    attached: str | None = None


class ThinkingBlock(_Block):
    """Reasoning the model showed. ``signature`` must go back to the provider that made it;
    ``redacted`` holds an opaque blob the provider sent instead of readable text."""

    type: Literal["thinking"] = "thinking"
    text: str = ""
    signature: str | None = None
    redacted: str | None = None


class ToolCallBlock(_Block):
    """The assistant asks for a tool. ``arguments`` is the parsed object, or ``None`` when
    ``raw_arguments`` is not a JSON object (the call then gets an error result, never runs)."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str

    @classmethod
    def from_raw(cls, *, id: str, name: str, raw_arguments: str) -> ToolCallBlock:
        return cls(id=id, name=name, arguments=parse_arguments(raw_arguments), raw_arguments=raw_arguments)


class ImageBlock(_Block):
    """An image, inline as base64 ``data`` or by ``url``."""

    type: Literal["image"] = "image"
    media_type: str = "image/png"
    data: str | None = None
    url: str | None = None


class ToolResultBlock(_Block):
    """What a tool call gave back. ``denied`` marks a call refused at the permission prompt (by
    the user, or because nobody could answer): for the views only, never sent to a provider.
    ``images`` (figures a tool made) go to models that accept images; ``content`` describes them
    for the others (see :mod:`~ipyagent.agentlib.vision`)."""

    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    name: str = ""
    content: str
    is_error: bool = False
    denied: bool = False
    images: tuple[ImageBlock, ...] = ()

    @property
    def images_caption(self) -> str:
        """What introduces the images where a wire carries them apart from the result's text."""
        count = len(self.images)
        what = "image" if count == 1 else f"{count} images"
        return f"The {what} from the `{self.name or 'tool'}` call above ({self.tool_call_id}):"


ContentBlock: TypeAlias = Annotated[
    TextBlock | ThinkingBlock | ToolCallBlock | ToolResultBlock | ImageBlock,
    Field(discriminator="type"),
]


class Message(BaseModel):
    """One message of a transcript. ``model`` and ``finish_reason`` are set on assistant
    messages; ``interrupted`` marks an assistant message cut short by a cancellation."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    role: Literal["user", "assistant"]
    content: tuple[ContentBlock, ...]
    id: str = Field(default_factory=lambda: new_id("msg"))
    created: float = Field(default_factory=time.time)
    model: str | None = None
    finish_reason: FinishReason | None = None
    interrupted: bool = False

    @classmethod
    def user(cls, text: str, *blocks: ContentBlock) -> Message:
        content: list[ContentBlock] = [TextBlock(text=text)] if text else []
        content.extend(blocks)
        return cls(role="user", content=tuple(content))

    @property
    def text(self) -> str:
        """The message's text blocks joined (thinking and tool blocks left out, and what was
        attached to a prompt: ``.text`` is what the user typed or the model wrote)."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock) and b.attached is None)

    @property
    def tool_calls(self) -> list[ToolCallBlock]:
        return [b for b in self.content if isinstance(b, ToolCallBlock)]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        return [b for b in self.content if isinstance(b, ToolResultBlock)]


def parse_arguments(raw: str) -> dict[str, Any] | None:
    """Parse streamed tool-call arguments; an empty string means no arguments."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)
MESSAGES_ADAPTER: TypeAdapter[list[Message]] = TypeAdapter(list[Message], config=_DEFERRED)
