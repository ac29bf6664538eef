"""Landlock, Linux's unprivileged access control, called through ``ctypes``.

A process builds a ruleset (which rights it handles, and which folders or files keep which of
them), then restricts itself: from then on it and every child it makes can only do what the
rules allow, for good. No privilege is needed and nothing has to be installed; the kernel must
have Landlock enabled (Linux 5.13 and later, in the ``lsm=`` list). What each ABI version adds:

    1  (5.13) files and folders: read, write, execute, make, remove
    2  (5.19) REFER: renaming or linking a file into another folder
    3  (6.2)  TRUNCATE
    4  (6.7)  TCP bind and connect
    5  (6.10) IOCTL on devices
    6  (6.12) scopes: no signals to, and no abstract Unix sockets of, processes outside

Standard library only: the sandbox's launcher loads this module by itself, before Python's
site packages (see :mod:`._launch`).
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Iterable

__all__ = ["LandlockError", "abi_version", "restrict"]

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13
TRUNCATE = 1 << 14
IOCTL_DEV = 1 << 15

NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1

SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

#: Every file-system right each ABI version knows.
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
#: The rights that apply to a file (a rule on a file may grant only these).
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (
    READ
    | WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_SYM
    | REFER
    | TRUNCATE
)


class LandlockError(OSError):
    """Landlock is missing, disabled, or refused a rule."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when it has none or has it disabled."""
    try:
        libc = _libc()
    except OSError:
        return 0
    flags = ctypes.c_uint32(_CREATE_RULESET_VERSION)
    return max(0, int(libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), flags)))


def fs_rights(abi: int) -> int:
    """Every file-system right ABI ``abi`` handles."""
    return _FS_BY_ABI[max(v for v in _FS_BY_ABI if v <= abi)]


def restrict(
    *,
    read: Iterable[str],
    write: Iterable[str],
    files: Iterable[tuple[str, int]] = (),
    network: bool,
) -> int:
    """Confine this process (and what it starts) for good: ``read`` folders and files may be read
    and run, ``write`` folders are the only ones that may change, ``files`` are single files with
    their own rights (``/dev/null``). Unless ``network``, TCP bind and connect are denied where the
    kernel can (ABI 4+). Signals and abstract Unix sockets stay inside the sandbox where the kernel
    can (ABI 6+). Returns the ABI version used. Paths that do not exist are skipped."""
    abi = abi_version()
    if abi < 1:
        raise LandlockError(0, "Landlock is not available in this kernel")
    libc = _libc()
    handled_fs = fs_rights(abi)
    handled_net = (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 and not network else 0
    scoped = (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0
    if abi >= 6:
        attr = struct.pack("=QQQ", handled_fs, handled_net, scoped)
    elif abi >= 4:
        attr = struct.pack("=QQ", handled_fs, handled_net)
    else:
        attr = struct.pack("=Q", handled_fs)
    ruleset = libc.syscall(_CREATE_RULESET, attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise _failed("create a Landlock ruleset")
    try:
        for path in read:
            _add_path(libc, ruleset, path, READ & handled_fs)
        for path in write:
            _add_path(libc, ruleset, path, WRITE & handled_fs)
        for path, rights in files:
            _add_path(libc, ruleset, path, rights & handled_fs)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _failed("set no_new_privs")
        if libc.syscall(_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) != 0:
            raise _failed("restrict this process with Landlock")
    finally:
        os.close(ruleset)
    return abi


def _add_path(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # not on this machine: nothing to allow
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = struct.pack("=Qi", rights, fd)
        if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, ctypes.c_uint32(0)) != 0:
            raise _failed(f"allow {path} in the Landlock ruleset")
    finally:
        os.close(fd)


def _failed(what: str) -> LandlockError:
    errno = ctypes.get_errno()
    return LandlockError(errno, f"could not {what}: {os.strerror(errno)}")
