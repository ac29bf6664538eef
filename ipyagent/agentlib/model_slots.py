"""The models of an agent: its own and the one of its side calls, as the user gave them, and the
providers resolved from them, which the agent owns: resolved on first use, closed when a model
changes or the agent closes. A provider the user passed in is the user's and is never closed."""

from __future__ import annotations

from typing import Any

from .model import Provider

__all__ = ["ModelSlots"]


class ModelSlots:
    def __init__(self, model: str | Provider | None, utility_model: str | Provider | None) -> None:
        self.model = model
        self.utility_model = utility_model
        self._provider: Provider | None = None
        self._utility: Provider | None = None

    @property
    def resolved(self) -> Provider | None:
        """The provider resolved so far (``None`` before first use): nothing is resolved to read it."""
        return self._provider

    def provider(self) -> Provider:
        """The resolved model. Raises :class:`UserError` when none is configured or known."""
        if self._provider is None:
            from .endpoints import resolve_provider

            self._provider = resolve_provider(self.model)
        return self._provider

    def utility(self) -> Provider:
        """The resolved model of side calls: ``utility_model``, else the endpoint's small model
        (:func:`~ipyagent.agentlib.endpoints.utility_model_id`), else :meth:`provider`."""
        if self._utility is None:
            from .endpoints import resolve_utility

            by_id = not isinstance(self.model, Provider)  # a provider object keeps its side calls
            self._utility = resolve_utility(self.utility_model, self.provider(), default=by_id)
        return self._utility

    def set_model(self, value: str | Provider | None) -> None:
        if _differs(value, self.model):
            self.release()  # resolved again on next use
        self.model = value

    def set_utility_model(self, value: str | Provider | None) -> None:
        if _differs(value, self.utility_model):
            self._release_utility()
        self.utility_model = value

    def release(self) -> None:
        """Forget the providers resolved from the model ids, closing those that can be closed (an
        HTTP provider lets go of its pooled client)."""
        self._release_utility()  # the default utility model follows the model
        provider, self._provider = self._provider, None
        _close(provider if provider is not self.model else None)

    def _release_utility(self) -> None:
        utility, self._utility = self._utility, None
        owned = utility is not None and utility not in (self._provider, self.utility_model, self.model)
        _close(utility if owned else None)


def _differs(a: Any, b: Any) -> bool:
    return a is not b and a != b


def _close(provider: Provider | None) -> None:
    close = getattr(provider, "close", None)
    if close is not None:
        close()
