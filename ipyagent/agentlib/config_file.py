"""The config file, ``~/.config/ipyagent/config.toml``: where it is and what it holds.

Its ``[endpoints]`` tables are read by :mod:`~ipyagent.agentlib.endpoints`, its ``[prices]`` by
:mod:`~ipyagent.agentlib.prices`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .errors import UserError

__all__ = ["config_path", "read_config", "toml_module"]


def config_path() -> Path:
    """``$IPYAGENT_CONFIG``, else ``$XDG_CONFIG_HOME/ipyagent/config.toml``, else
    ``~/.config/ipyagent/config.toml``."""
    explicit = os.environ.get("IPYAGENT_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or "~/.config"
    return Path(base).expanduser() / "ipyagent" / "config.toml"


def read_config(path: Path) -> dict[str, Any]:
    """The whole config file at ``path`` (``{}`` when there is none)."""
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as f:
            data: dict[str, Any] = toml_module().load(f)
            return data
    except (OSError, toml_module().TOMLDecodeError) as exc:
        raise UserError(
            f"Could not read the ipyagent config file {path}: {exc}",
            hint="Fix the file (it is TOML), or point IPYAGENT_CONFIG at another one.",
            code="invalid_config",
        ) from exc


def toml_module() -> Any:
    """``tomllib``; on Python 3.10, ``tomli`` (a dependency there)."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    import tomli  # type: ignore[import-not-found, unused-ignore]  # pragma: no cover - 3.10 only

    return tomli  # pragma: no cover
