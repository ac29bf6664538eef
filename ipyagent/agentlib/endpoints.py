"""Endpoints: named records that say how to reach a model (placeholder until the HTTP adapters)."""

from __future__ import annotations

from .errors import UserError
from .providers.base import Provider

__all__ = ["provider_for"]


def provider_for(model_id: str) -> Provider:
    """The provider for a qualified ``<endpoint>/<model>`` id."""
    raise UserError(
        f"Unknown model {model_id!r}: no endpoint is configured for it.",
        hint="Pass a Provider instance (for example ipyagent.testing.ScriptedModel) as model=.",
        code="unknown_endpoint",
    )
