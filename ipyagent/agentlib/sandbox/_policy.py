"""What a sandboxed call may do: its :class:`Limits`, where it may read and write, what it sees
of the environment, and the launcher's command line that carries all of it.

Writes: the workspace, and a private temporary folder made for the call (``TMPDIR`` and ``HOME``
point there) and ``/dev/shm``, each a tmpfs of the call's own that nothing else sees and that
ends with it. Nothing else.

Reads (and running programs): what commands need and nothing personal —

- the system's programs and libraries: ``/usr``, ``/bin``, ``/sbin``, ``/lib*``, ``/opt``;
- ``/etc`` entry by entry, without the files that hold the machine's secrets (password hashes,
  SSH host keys, TLS private keys, sudoers, saved network credentials): Landlock can only allow,
  so the rest of ``/etc`` is allowed by name instead;
- the Python running the kernel: its own library folders — its prefixes, the standard library,
  site-packages (a virtualenv or pyenv Python may live under the home folder; only those folders
  are allowed, never the home folder itself). From any other folder on ``sys.path`` (an editable
  install's project root, a ``PYTHONPATH`` entry) only its packages and modules are readable:
  such a folder often holds a ``.env`` and ``.git/config`` beside the package;
- ``/proc`` (``ps``, ``/proc/self``; Landlock keeps the sandbox from reading other processes'
  memory or environment) and a few devices (``/dev/null``, ``/dev/zero``, ``/dev/urandom``).

The home folder, ``/tmp``, ``/var``, ``/run``, ``/srv``, ``/mnt`` and other users' files are not
readable.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import marshal
import os
import shutil
import site
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _confine

__all__ = [
    "Limits",
    "build_spec",
    "command_env",
    "device_rules",
    "holds_home",
    "import_folders",
    "launcher_argv",
    "read_paths",
]

LAUNCHER = _confine.__file__
#: Environment variables a command sees (besides PATH, HOME and TMPDIR): never keys or tokens.
PASSED_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "VIRTUAL_ENV")


@dataclass(frozen=True)
class Limits:
    """What a sandboxed call may use. ``timeout``: seconds of wall-clock time (and of CPU);
    ``memory``: bytes of address space per process (for :func:`call`, on top of what the kernel's
    process already holds; the JVM reserves about 1.5 GB at start, so not much below 4 GB);
    ``max_procs``: processes and threads at once (as root, at least 300: see docs/sandbox.md;
    ``None`` only for code that starts no process, where nothing needs limiting);
    ``file_size``: bytes of any file written; ``write_total``: bytes written to files by the
    whole call, all its processes together (``None``: no limit; past it, everything is killed
    by SIGXFSZ); ``output``: bytes of stdout and of stderr kept;
    ``network``: allow the network (off: no connection of any kind)."""

    timeout: float = 60.0
    memory: int | None = 4 << 30
    max_procs: int | None = 256
    file_size: int = 1 << 30
    write_total: int | None = 2 << 30
    open_files: int = 1024
    output: int = 200_000
    network: bool = False


#: File names a module may have (``.py``, ``.pyc``, ``.cpython-311-x86_64-linux-gnu.so``, ...).
MODULE_SUFFIXES = tuple(importlib.machinery.all_suffixes())
SHM = "/dev/shm"
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
    "/dev/null": _confine.READ_FILE | _confine.WRITE_FILE | _confine.TRUNCATE,
    "/dev/zero": _confine.READ_FILE,
    "/dev/full": _confine.READ_FILE | _confine.WRITE_FILE,
    "/dev/random": _confine.READ_FILE,
    "/dev/urandom": _confine.READ_FILE,
}


def read_paths(
    home: str | None = None,
    python_paths: Sequence[str] | None = None,
    *,
    library: Sequence[str] | None = None,
) -> list[str]:
    """The folders and files a sandboxed command may read (see the module docstring).
    ``library``: the interpreter's own library folders (default: this one's), readable whole;
    ``python_paths``: the other import folders (default: ``sys.path``), of which only the
    packages and modules are readable."""
    out = [p for p in SYSTEM if os.path.exists(p)]
    out += _entries("/etc", ETC_SECRETS, descend={"ssl": SSL_SECRETS})
    home_dir = os.path.realpath(home if home is not None else os.path.expanduser("~"))
    folders = [f for f in map(_real, library if library is not None else _library()) if f]
    # Never the home folder itself, nor a folder that holds it (a "" or "/" on sys.path).
    folders = [
        f for f in folders if os.path.isdir(f) and f not in ("/", home_dir) and not _under(home_dir, f)
    ]
    out += folders
    for real in import_folders(python_paths, library=folders):
        out += _importable(real)
    return sorted(set(out))


def import_folders(
    python_paths: Sequence[str] | None = None, *, library: Sequence[str] | None = None
) -> list[str]:
    """The folders on ``python_paths`` (default: ``sys.path``) that are not the interpreter's own
    (``library``): an editable install's project root, a ``PYTHONPATH`` entry. Only their
    packages and modules are read (:func:`read_paths`); the folders themselves may only be
    listed (:func:`build_spec`), which ``import`` needs — its finder lists a folder before it
    looks for a module in it — and which shows names, never what a file holds."""
    folders = [f for f in map(_real, library if library is not None else _library()) if f]
    found = []
    for entry in python_paths if python_paths is not None else [p for p in sys.path if p]:
        real = _real(entry)
        if real and not any(real == f or _under(real, f) for f in folders):
            found.append(real)
    return list(dict.fromkeys(found))


def _listable(folder: str) -> bool:
    """Whether an import folder's names may be listed: never the home folder's, nor those of a
    folder holding it."""
    home = os.path.realpath(os.path.expanduser("~"))
    return os.path.isdir(folder) and folder != "/" and folder != home and not _under(home, folder)


def _real(path: str) -> str | None:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return None


def _importable(entry: str) -> list[str]:
    """What ``import`` needs of a folder on sys.path that is not the interpreter's own: its
    packages (folders with ``__init__.py``) and modules, never the folder's other files. A zip
    or egg file on sys.path is itself importable."""
    if os.path.isfile(entry):
        return [entry] if entry.endswith((".zip", ".egg", ".whl")) else []
    try:
        names = os.listdir(entry)
    except OSError:
        return []
    out = []
    for name in names:
        if name.startswith("."):
            continue
        path = os.path.join(entry, name)
        if os.path.isfile(os.path.join(path, "__init__.py")) or (
            name.endswith(MODULE_SUFFIXES) and os.path.isfile(path)
        ):
            out.append(path)
    return out


def device_rules() -> list[tuple[str, int]]:
    return [(path, rights) for path, rights in DEVICES.items() if os.path.exists(path)]


def _library() -> list[str]:
    """The interpreter's own folders: its prefixes (a virtualenv's included), its standard
    library and its site-packages, the user's own included when this Python reads it."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    if sys.executable:
        prefixes.add(str(Path(sys.executable).resolve().parent.parent))
    paths = sysconfig.get_paths()
    folders = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    with contextlib.suppress(AttributeError):  # python -S: no site module functions
        folders += site.getsitepackages()
        if site.ENABLE_USER_SITE and site.getusersitepackages() in sys.path:
            folders.append(site.getusersitepackages())
    return [*sorted(prefixes), *folders]


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


def holds_home(cwd: str, home: str | None = None) -> bool:
    """Whether the folder ``cwd`` is the home folder or holds it (``/``, ``/home``): made the
    workspace, it would open the user's keys and settings to the sandboxed code."""
    workspace = os.path.realpath(cwd)
    home_dir = os.path.realpath(home if home is not None else os.path.expanduser("~"))
    return workspace == home_dir or _under(home_dir, workspace)


def build_spec(
    cwd: str, tmp: str, limits: Limits, read_only: Sequence[tuple[str, str]] = ()
) -> dict[str, Any]:
    """``read_only``: ``(entry, source)`` pairs mounted read-only (the control files, from
    :func:`._guard.guarded`)."""
    workspace = os.path.realpath(cwd)
    private = private_folders(workspace, os.path.realpath(tmp))
    return {
        "read_only": [tuple(pair) for pair in read_only],
        "cwd": workspace,
        "read": read_paths(),
        "write": sorted({workspace, os.path.realpath(tmp), *private}),
        "private": private,
        "files": [
            *device_rules(),
            *((folder, _confine.READ_DIR) for folder in import_folders() if _listable(folder)),
        ],
        "network": limits.network,
        "memory": limits.memory,
        "cpu_seconds": max(1, int(limits.timeout) + 1),
        "max_procs": limits.max_procs,
        "file_size": limits.file_size,
        "write_total": limits.write_total,
        "open_files": limits.open_files,
    }


def private_folders(workspace: str, tmp: str) -> list[str]:
    """Folders that get a tmpfs of their own, seen only by the call: its temporary folder (never
    the workspace) and /dev/shm, where multiprocessing keeps its semaphores."""
    out = [tmp] if tmp != workspace and not _under(workspace, tmp) else []
    # Not over a temporary folder made inside it (TMPDIR=/dev/shm): that would hide it.
    if os.path.isdir(SHM) and not os.path.islink(SHM) and not _under(tmp, SHM) and not _under(workspace, SHM):
        out.append(SHM)
    return out


def command_env(tmp: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    path = [os.path.dirname(sys.executable)] if sys.executable else []
    path += ["/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"]
    env = {"PATH": os.pathsep.join(dict.fromkeys(path)), "HOME": tmp, "TMPDIR": tmp, "TERM": "dumb"}
    env.update({k: os.environ[k] for k in PASSED_ENV if k in os.environ})
    env.update(extra or {})
    return env


def launcher_argv(
    command: Sequence[str],
    *,
    cwd: str,
    tmp: str,
    limits: Limits,
    env: Mapping[str, str] | None = None,
    read_only: Sequence[tuple[str, str]] = (),
) -> list[str]:
    """The launcher's command line (run it with an empty environment: the command's own is in
    the spec)."""
    spec = build_spec(cwd, tmp, limits, read_only)
    spec["argv"] = list(command)
    spec["env"] = command_env(tmp, env)
    python = sys.executable or shutil.which("python3") or "python3"
    # -E -s -S: no environment variables, user site or site packages read by the launcher.
    return [python, "-E", "-s", "-S", LAUNCHER, marshal.dumps(spec).hex()]
