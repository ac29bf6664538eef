"""Old public names that keep working for one release, with a warning that names the new one.

A module lists its retired names and hands :func:`retired_names` to its ``__getattr__``; the
name then resolves as before but warns once per use site (Python's default warning filter).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping

__all__ = ["retired_names"]


def retired_names(module: str, names: Mapping[str, tuple[object, str]]) -> Callable[[str], object]:
    """A module ``__getattr__`` serving ``names``: old name → (what it now resolves to, what to
    use instead)."""

    def __getattr__(name: str) -> object:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value, advice = names[name]
        warnings.warn(
            f"{module}.{name} is deprecated and goes away in the next release: {advice}",
            DeprecationWarning,
            stacklevel=2,
        )
        return value

    return __getattr__
