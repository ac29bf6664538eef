"""The config file, ``~/.config/ipyagent/config.toml``: where it is and what it holds.

Its ``[endpoints]`` tables are read by :mod:`~ipyagent.agentlib.endpoints`, its ``[prices]`` by
:mod:`~ipyagent.agentlib.prices`.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

from .errors import UserError

__all__ = ["config_bytes", "config_path", "read_config", "toml_module"]


def config_path() -> Path:
    """``$IPYAGENT_CONFIG``, else ``$XDG_CONFIG_HOME/ipyagent/config.toml``, else
    ``~/.config/ipyagent/config.toml``."""
    # Asked several times a request (prices, the secret set): CPython keeps the environment
    # encoded in ``os.environ._data``, where a lookup is one dict access instead of an encode and
    # a decode; elsewhere, the mapping itself.
    data = getattr(os.environ, "_data", None)
    environ: Any = data if isinstance(data, dict) else os.environ
    keys = _ENCODED_KEYS if environ is data else _KEYS
    return _config_path(*map(environ.get, keys))


_KEYS = ("IPYAGENT_CONFIG", "XDG_CONFIG_HOME", "HOME")
_ENCODED_KEYS = tuple(os.fsencode(k) for k in _KEYS) if os.name == "posix" else _KEYS


@functools.lru_cache(maxsize=16)
def _config_path(explicit: str | bytes | None, xdg: str | bytes | None, home: str | bytes | None) -> Path:
    """``home``: ``$HOME``, only so that a changed one gives another answer (``~`` reads it)."""
    if explicit:
        return Path(os.fsdecode(explicit)).expanduser()
    return Path(os.fsdecode(xdg) if xdg else "~/.config").expanduser() / "ipyagent" / "config.toml"


def config_bytes(path: Path) -> bytes | None:
    """What the file at ``path`` holds now (``None`` when there is no regular file there), to
    tell whether it changed. It is asked several times a request, so a file whose status (size,
    inode, modification and change times) is as it was when last read is not read again — once
    those times are two seconds old: two writes within one tick of the file system's clock share
    a modification time, and only a file last written before the last read is surely unchanged
    (git's rule for its index). Raises ``OSError`` when the file is there but cannot be read."""
    key = str(path)
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    status = (info.st_size, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)
    known = _read.get(key)
    settled = time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) > 2_000_000_000
    if known is not None and known[0] == status and settled:
        return known[1]
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        return None
    with os.fdopen(fd, "rb") as f:  # a FIFO or a device is never read (it could block)
        opened = os.fstat(fd)
        data = f.read() if stat.S_ISREG(opened.st_mode) else None
    if data is not None:
        _read[key] = ((opened.st_size, opened.st_ino, opened.st_mtime_ns, opened.st_ctime_ns), data)
    return data


#: What each config file held when last read, and its status then (see :func:`config_bytes`).
_read: dict[str, tuple[tuple[int, int, int, int], bytes]] = {}


#: The last parse of each config file, by path: its bytes and what they say.
_parsed: dict[str, tuple[bytes, dict[str, Any]]] = {}


def read_config(path: Path) -> dict[str, Any]:
    """The whole config file at ``path`` (``{}`` when there is none). Parsed again only when its
    bytes changed, since it is asked on every request (prices, redaction, endpoints): read what
    it returns, do not change it."""
    try:
        data = config_bytes(path)
    except OSError as exc:
        raise UserError(
            f"Could not read the ipyagent config file {path}: {exc}",
            hint="Fix the file's permissions, or point IPYAGENT_CONFIG at another one.",
            code="invalid_config",
        ) from exc
    if data is None:
        return {}
    cached = _parsed.get(str(path))
    if cached is not None and cached[0] == data:
        return cached[1]
    try:
        parsed: dict[str, Any] = toml_module().loads(data.decode("utf-8"))
    except (UnicodeDecodeError, toml_module().TOMLDecodeError) as exc:
        raise UserError(
            f"Could not read the ipyagent config file {path}: {exc}",
            hint="Fix the file (it is TOML), or point IPYAGENT_CONFIG at another one.",
            code="invalid_config",
        ) from exc
    _parsed[str(path)] = (data, parsed)
    return parsed


def toml_module() -> Any:
    """``tomllib``; on Python 3.10, ``tomli`` (a dependency there)."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    import tomli  # type: ignore[import-not-found, unused-ignore]  # pragma: no cover - 3.10 only

    return tomli  # pragma: no cover
