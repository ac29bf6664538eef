"""Where a sandboxed command may read and write.

Writes: the workspace, and a private temporary folder made for the call (``TMPDIR`` and ``HOME``
point there), removed after it. Nothing else.

Reads (and running programs): what commands need and nothing personal —

- the system's programs and libraries: ``/usr``, ``/bin``, ``/sbin``, ``/lib*``, ``/opt``;
- ``/etc`` entry by entry, without the files that hold the machine's secrets (password hashes,
  SSH host keys, TLS private keys, sudoers, saved network credentials): Landlock can only allow,
  so the rest of ``/etc`` is allowed by name instead;
- the Python running the kernel: its prefixes and the folders on ``sys.path`` (a virtualenv or
  pyenv Python may live under the home folder; only those folders are allowed, never the home
  folder itself);
- ``/proc`` (``ps``, ``/proc/self``; Landlock keeps the sandbox from reading other processes'
  memory or environment) and a few devices (``/dev/null``, ``/dev/zero``, ``/dev/urandom``).

The home folder, ``/tmp``, ``/var``, ``/run``, ``/srv``, ``/mnt`` and other users' files are not
readable.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from . import _landlock

__all__ = ["device_rules", "read_paths"]

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc")
#: Entries of /etc left out: they hold the machine's secrets.
ETC_SECRETS = frozenset(
    {
        "shadow",
        "shadow-",
        "gshadow",
        "gshadow-",
        "sudoers",
        "sudoers.d",
        "ssh",
        "krb5.keytab",
        "wireguard",
        "NetworkManager",
        "credstore",
        "credstore.encrypted",
        "ipsec.secrets",
        "ppp",
        "openvpn",
        "security",
        "libvirt",
        ".pwd.lock",
    }
)
#: Entries of /etc/ssl left out.
SSL_SECRETS = frozenset({"private"})
DEVICES = {
    "/dev/null": _landlock.READ_FILE | _landlock.WRITE_FILE | _landlock.TRUNCATE,
    "/dev/zero": _landlock.READ_FILE,
    "/dev/full": _landlock.READ_FILE | _landlock.WRITE_FILE,
    "/dev/random": _landlock.READ_FILE,
    "/dev/urandom": _landlock.READ_FILE,
}


def read_paths(home: str | None = None, python_paths: Sequence[str] | None = None) -> list[str]:
    """The folders and files a sandboxed command may read (see the module docstring)."""
    out = [p for p in SYSTEM if os.path.exists(p)]
    out += _entries("/etc", ETC_SECRETS, descend={"ssl": SSL_SECRETS})
    home_dir = os.path.realpath(home if home is not None else os.path.expanduser("~"))
    for entry in python_paths if python_paths is not None else _python_paths():
        try:
            real = os.path.realpath(entry)
        except (OSError, ValueError):
            continue
        # Never the home folder itself, nor a folder that holds it (a "" or "/" on sys.path).
        if not os.path.isdir(real) or real in ("/", home_dir) or _under(home_dir, real):
            continue
        out.append(real)
    return sorted(set(out))


def device_rules() -> list[tuple[str, int]]:
    return [(path, rights) for path, rights in DEVICES.items() if os.path.exists(path)]


def _python_paths() -> list[str]:
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    if sys.executable:
        prefixes.add(str(Path(sys.executable).resolve().parent.parent))
    return [*sorted(prefixes), *(p for p in sys.path if p)]


def _entries(folder: str, leave_out: frozenset[str], *, descend: dict[str, frozenset[str]]) -> list[str]:
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    out: list[str] = []
    for name in names:
        if name in leave_out:
            continue
        path = os.path.join(folder, name)
        if name in descend and os.path.isdir(path) and not os.path.islink(path):
            out += _entries(path, descend[name], descend={})
        else:
            out.append(path)
    return out


def _under(inner: str, outer: str) -> bool:
    """Whether ``inner`` is inside ``outer`` (both resolved)."""
    return inner.startswith(outer.rstrip("/") + "/")
