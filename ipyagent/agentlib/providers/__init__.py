"""Model providers: the :class:`Provider` protocol and its adapters (one module per wire format)."""

from .base import (
    ModelRequest,
    ModelSettings,
    Provider,
    ProviderEvent,
    ResponseEnd,
    TextChunk,
    ThinkingChunk,
    ThinkingLevel,
    ToolCallChunk,
    ToolSpec,
    UsageReport,
)

__all__ = [
    "ModelRequest",
    "ModelSettings",
    "Provider",
    "ProviderEvent",
    "ResponseEnd",
    "TextChunk",
    "ThinkingChunk",
    "ThinkingLevel",
    "ToolCallChunk",
    "ToolSpec",
    "UsageReport",
]
