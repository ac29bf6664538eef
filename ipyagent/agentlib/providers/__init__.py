"""Model providers: the :class:`Provider` protocol and its adapters (one module per wire format)."""

from ..model import (
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
