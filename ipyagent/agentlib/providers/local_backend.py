"""Which runtime runs the embedded model: xllamacpp or llama-cpp-python (the *backend*).

This module owns the choice (:func:`local_backend`) and the install hint shared by both, and
where the local model's files are kept (:func:`cache_root`, :func:`prompt_cache_dir`). It
imports neither runtime: only :mod:`importlib.util.find_spec` looks for them, so the choice is
cheap enough for deciding whether a local model is available at all.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Literal

from ..errors import UserError

__all__ = [
    "BACKENDS",
    "BACKEND_HINT",
    "ENV_BACKEND",
    "ENV_PROMPT_CACHE",
    "Backend",
    "cache_root",
    "local_backend",
    "prompt_cache_dir",
]

Backend = Literal["xllamacpp", "llama_cpp"]
BACKENDS: tuple[Backend, ...] = ("xllamacpp", "llama_cpp")
#: Picks the backend (``xllamacpp`` or ``llama_cpp``) for every LocalModel that names none.
ENV_BACKEND = "IPYAGENT_LOCAL_BACKEND"
#: Where the local model keeps its prompt openings; ``off`` (or empty): nowhere.
ENV_PROMPT_CACHE = "IPYAGENT_PROMPT_CACHE"

BACKEND_HINT = (
    "Install it with `pip install 'ipyagent[local]'` (xllamacpp, a wheel: nothing to compile). "
    "llama-cpp-python also works when installed (`scripts/install-llama-cpp.sh` builds it portably)"
)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def local_backend(backend: str | None = None) -> Backend:
    """The runtime a local model runs on: ``backend`` when given, else ``$IPYAGENT_LOCAL_BACKEND``,
    else xllamacpp when it is installed, else llama-cpp-python. Cheap: imports neither. Raises a
    :class:`UserError` for an unknown name or when neither is installed."""
    name = (backend or os.environ.get(ENV_BACKEND, "")).strip()
    if name:
        if name not in BACKENDS:
            raise UserError(
                f"Unknown local model backend {name!r}.",
                hint=f"Use one of {', '.join(BACKENDS)} (argument `backend` or ${ENV_BACKEND}).",
                code="local_backend_unknown",
            )
        chosen: Backend = "xllamacpp" if name == "xllamacpp" else "llama_cpp"
        if not _importable(chosen):
            raise UserError(
                f"The local model backend {chosen} is not installed.",
                hint=BACKEND_HINT + ".",
                code="llama_cpp_missing",
            )
        return chosen
    for candidate in BACKENDS:
        if _importable(candidate):
            return candidate
    raise UserError(
        "The local model needs xllamacpp or llama-cpp-python, and neither is installed.",
        hint=BACKEND_HINT + ".",
        code="llama_cpp_missing",
    )


def cache_root() -> Path:
    """The folder of the local model's files: ``$IPYAGENT_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/ipyagent``, else ``~/.cache/ipyagent``."""
    explicit = os.environ.get("IPYAGENT_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "ipyagent"


def prompt_cache_dir() -> Path | None:
    """Where the local model keeps its prompt openings between processes (see
    :mod:`._local_opening`): ``$IPYAGENT_PROMPT_CACHE`` when set (``off`` or empty: nowhere),
    else ``prompts`` in :func:`cache_root`."""
    explicit = os.environ.get(ENV_PROMPT_CACHE)
    if explicit is not None:
        return None if explicit.strip().lower() in ("", "off", "0", "no") else Path(explicit).expanduser()
    return cache_root() / "prompts"
