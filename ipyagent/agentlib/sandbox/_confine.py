"""Confining the current process: namespaces, resource limits, then Landlock — and the
sandbox's launcher, which confines itself this way and then becomes the command.

:func:`enter` is called in a process that has one thread (the launcher, or a child just forked
from the kernel). It puts that process in new user, network and PID namespaces, forks once more
so that the rest runs as the first process of the new PID namespace, and there applies the
limits and the Landlock rules before returning. The forked-from process stays outside, waits,
and leaves with the confined one's exit status: :func:`enter` returns only in the confined one.

What each piece is for (measured in docs/sandbox.md):

- the user namespace lets an unprivileged user make the others, and takes away the capabilities
  root had over the rest of the machine;
- the network namespace has only a loopback that is down, so no socket of any kind reaches
  anything (Landlock's TCP rules, ABI 4+, are a second lock where the kernel has them);
- the PID namespace: when its first process ends, the kernel kills everything left in it, so
  nothing outlives the call; and (Linux 6.14+) it has its own ``pid_max``, the one process limit
  that also holds for root, whom ``RLIMIT_NPROC`` never limits;
- the mount namespace: its own ``/proc``, a private tmpfs over the call's temporary folder and
  ``/dev/shm``, and a read-only bind mount over each file with more than one link where the
  sandbox may write (:func:`seal_hard_links`);
- rlimits: address space, CPU seconds, file size, open files, processes (a non-root user);
- Landlock: reads only where a command needs to read, writes only in the workspace;
- the mount namespace again: the workspace's control files mounted read-only over
  themselves (:func:`_read_only`);
- seccomp (:func:`seccomp`): no Unix or vsock socket (IP and netlink only), no io_uring, no
  fallocate;
- the outer process counts what the sandbox writes and kills it past ``write_total``.

Landlock is Linux's unprivileged access control, called here through ``ctypes``: a process builds
a ruleset (which rights it handles, and which folders or files keep which of them), then
restricts itself, for good, with every child it makes. What each ABI version adds:

    1  (5.13) files and folders: read, write, execute, make, remove
    2  (5.19) REFER: renaming or linking a file into another folder
    3  (6.2)  TRUNCATE
    4  (6.7)  TCP bind and connect
    5  (6.10) IOCTL on devices
    6  (6.12) scopes: no signals to, and no abstract Unix sockets of, processes outside

The launcher: ``python -E -s -S _confine.py SPEC`` (no site packages, no environment variables
read, so it starts in a few milliseconds and nothing installed can change what it does).
``SPEC`` is one dict in :mod:`marshal` format, hex-encoded: the confinement (see :func:`enter`),
``argv`` and ``env``. When a step of the confinement fails, the command is not run: the
launcher writes ``ipyagent-sandbox: why`` to stderr and exits with status 125.

Standard library only, and only its cheapest modules: no ``json`` (it imports ``re`` and
``enum``), no ``signal`` (``enum``), ``typing`` only for the type checker — together they took
longer than the rest of the launcher.
"""

from __future__ import annotations

import ctypes
import marshal
import os
import struct
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

__all__ = ["CONFINE_FAILED", "ConfineError", "abi_version", "enter", "landlock", "seal_hard_links", "seccomp"]

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
_PR_SET_PDEATHSIG = 1
_SIGKILL = 9  # the same on every Linux architecture
#: The kernel will not take a per-namespace pid_max below RESERVED_PIDS + 1.
PID_MAX_FLOOR = 301
#: Exit status of the outer process when the confinement itself failed (told apart by a message
#: on stderr that starts with ``ipyagent-sandbox:``).
CONFINE_FAILED = 125


class ConfineError(OSError):
    """A step of the confinement failed; the command was not run."""


def enter(spec: dict[str, Any]) -> None:
    """Confine this (single-threaded) process as ``spec`` says; returns only in the confined
    child (see the module docstring). ``spec``: ``read``, ``write``, ``files`` (Landlock rules),
    ``network``, ``memory`` (bytes of address space, or None), ``cpu_seconds``, ``max_procs`` (or None),
    ``file_size``, ``write_total`` (or None), ``open_files``, ``cwd``, ``private`` (folders
    that get a tmpfs of their own, before Landlock: list them in ``write`` too); ``read_only``:
    ``(entry, source)`` pairs mounted read-only (control files, :func:`_read_only`)."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    flags = _CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWIPC | _CLONE_NEWNS
    flags |= 0 if spec["network"] else _CLONE_NEWNET
    if libc.unshare(flags) != 0:
        errno = ctypes.get_errno()
        raise ConfineError(errno, f"could not make user namespaces: {os.strerror(errno)}")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    # Before the child mounts its own /proc and private folders: a changed device says it has.
    before = {folder: os.stat(folder).st_dev for folder in ["/proc", *spec["private"]]}
    child = os.fork()
    if child:
        _stay_outside(child, spec["write_total"], before)
    import resource  # here, not above: Unix only, and this module is imported everywhere

    libc.prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)  # the outer one killed: so is this one
    read = list(spec["read"])
    if "/proc" in read and not _own_proc(libc):
        read.remove("/proc")  # the machine's /proc would show every process's command line
    _read_only(libc, spec.get("read_only", ()))
    for folder in spec["private"]:
        _private_tmpfs(libc, folder, spec["write_total"])
    for folder in spec["write"]:
        seal_hard_links(folder)
    _limit_processes(spec["max_procs"], root=uid == 0)
    _limit(resource.RLIMIT_CPU, spec["cpu_seconds"])
    _limit(resource.RLIMIT_FSIZE, spec["file_size"])
    _limit(resource.RLIMIT_NOFILE, spec["open_files"])
    _limit(resource.RLIMIT_CORE, 0)
    if spec["memory"] is not None:
        _limit(resource.RLIMIT_AS, spec["memory"])
    landlock(
        read=read,
        write=spec["write"],
        files=[(path, rights) for path, rights in spec["files"]],
        network=spec["network"],
    )
    seccomp()  # after Landlock, which set no_new_privs (a filter needs it)
    os.chdir(spec["cwd"])


def _own_proc(libc: ctypes.CDLL) -> bool:
    """Mount a /proc that shows only this PID namespace's processes (in this mount namespace).
    Fails where the machine's /proc is partly masked (as in many containers): then no /proc."""
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return False
    return bool(libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) == 0)


_OPEN_TREE, _MOVE_MOUNT, _MOUNT_SETATTR = 428, 429, 442  # the same on every architecture
_OPEN_TREE_CLONE, _OPEN_TREE_CLOEXEC = 1, 0o2000000
_AT_FDCWD, _AT_EMPTY_PATH, _MOVE_MOUNT_F_EMPTY_PATH, _MOUNT_ATTR_RDONLY = -100, 0x1000, 4, 1


def _read_only(libc: ctypes.CDLL, pairs: Iterable[tuple[str, str]]) -> None:
    """Mount each ``(entry, source)``'s source read-only on the entry, in this mount namespace:
    the workspace's control files (see :mod:`._guard`). ``move_mount`` without following the
    entry's last link puts the mount on a symbolic link itself, so the link cannot be replaced."""
    pairs = list(pairs)
    if not pairs:
        return
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise _failed("make this process's mounts private (to guard control files)")
    attr = struct.pack("=QQQQ", _MOUNT_ATTR_RDONLY, 0, 0, 0)
    for entry, source in pairs:
        fd = libc.syscall(
            _OPEN_TREE, _AT_FDCWD, source.encode(), ctypes.c_uint(_OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC)
        )
        if fd < 0:
            raise _failed(f"guard the control file {entry}")
        try:
            if libc.syscall(_MOUNT_SETATTR, fd, b"", _AT_EMPTY_PATH, attr, ctypes.c_size_t(len(attr))) != 0:
                raise _failed(f"make the control file {entry} read-only")
            if libc.syscall(_MOVE_MOUNT, fd, b"", _AT_FDCWD, entry.encode(), _MOVE_MOUNT_F_EMPTY_PATH) != 0:
                raise _failed(f"guard the control file {entry}")
        finally:
            os.close(fd)


def _stay_outside(child: int, write_total: int | None, before: dict[str, int]) -> None:
    """The outer process: wait for the confined child and leave as it did — or, once the
    sandbox's processes have written more than ``write_total`` bytes, kill them all and leave by
    SIGXFSZ, as a process past its file-size limit does."""
    if write_total is not None and _watch_writes(child, write_total, before):
        os.kill(child, _SIGKILL)  # the PID namespace's first process: the kernel kills the rest
        os.waitpid(child, 0)
        _leave_by(_SIGXFSZ)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for clarity
            continue
    if os.WIFSIGNALED(status):
        # Leave the same way, so the caller can tell "killed by SIGKILL" from an exit code.
        _leave_by(os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _leave_by(signal_number: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal(signal_number, ctypes.c_void_p(0))  # SIG_DFL: Python ignores some (SIGXFSZ)
    os.kill(os.getpid(), signal_number)
    os._exit(128 + signal_number)  # pragma: no cover - the signal ends the process first


# -- the total written per call ----------------------------------------------------------------------
#
# RLIMIT_FSIZE caps each file; many files each under it could still fill the disk. Nothing
# unprivileged caps a total (disk quotas and cgroup I/O limits need root), so the outer process
# counts: the kernel's I/O accounting (``/proc/PID/io``) says how many bytes each process sent
# to storage — page cache pages it dirtied, direct and mmap writes included — less what was
# truncated before it reached the disk; a process's count includes its children once it has
# reaped them. Every WATCH_SECONDS the outer process adds up the sandbox's processes (each listed
# once, parents before children, so none is counted twice) and kills them all past the limit.
# Overshoot: what the sandbox writes in one interval. fallocate(), which reserves space without
# writing, is refused by the seccomp filter. A tmpfs has no storage layer, so its writes are not
# in that count: the call's temporary folder and /dev/shm are tmpfs of its own (in the sandbox's
# mount namespace, each no larger than the limit, gone with the call), whose use is added
# instead. Files on another tmpfs the workspace holds are not counted.

WATCH_SECONDS = 0.02
_SIGXFSZ = 25  # x86_64, arm64, riscv64 (the architectures the seccomp filter knows)


def _private_tmpfs(libc: ctypes.CDLL, folder: str, size: int | None) -> None:
    """Mount a tmpfs (of at most ``size`` bytes) over ``folder``, for this mount namespace only:
    the call's temporary folder, and /dev/shm (POSIX semaphores and shared memory, which
    multiprocessing needs; the machine's own stays out of reach)."""
    options = f"mode=700,size={max(size, 4096)}" if size is not None else "mode=700"
    if libc.mount(b"tmpfs", folder.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options.encode()) != 0:
        raise _failed(f"mount a private temporary folder at {folder}")


def _watch_writes(child: int, write_total: int, before: dict[str, int]) -> bool:
    """Wait for ``child`` to end; True as soon as the sandbox has written more than
    ``write_total`` bytes (the child still runs then)."""
    import select

    pidfd = os.pidfd_open(child)
    try:
        ended = select.poll()
        ended.register(pidfd, select.POLLIN)
        while not ended.poll(int(WATCH_SECONDS * 1000)):
            if written(child, before["/proc"]) + _private_used(before) > write_total:
                return True
        return False
    finally:
        os.close(pidfd)


def written(child: int, host_proc: int) -> int:
    """Bytes the sandbox whose first process is ``child`` has written so far."""
    if os.stat("/proc").st_dev != host_proc:
        pids = _numbers("/proc")  # the sandbox's own /proc: only its processes
    else:  # not mounted yet, or it could not be: pick the sandbox's out of the machine's
        ns = _pid_ns(child)
        pids = [pid for pid in _numbers("/proc") if ns is not None and _pid_ns(pid) == ns]
    return sum(_bytes_written(pid) for pid in sorted(pids))


def _private_used(before: dict[str, int]) -> int:
    """Bytes held by the call's private tmpfs (seen here too: one mount namespace), each once it
    is mounted (its folder no longer on the device it was on ``before``)."""
    used = 0
    for folder, unmounted in before.items():
        try:
            if folder == "/proc" or os.stat(folder).st_dev == unmounted:
                continue
            info = os.statvfs(folder)
        except OSError:
            continue
        used += (info.f_blocks - info.f_bfree) * info.f_frsize
    return used


def _numbers(folder: str) -> list[int]:
    return [int(name) for name in os.listdir(folder) if name.isdigit()]


def _pid_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _bytes_written(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/io", "rb") as io:
            fields = dict(line.split(b":") for line in io.read().splitlines())
    except (OSError, ValueError):
        return 0  # ended since the listing: counted in its parent's once reaped
    return int(fields.get(b"write_bytes", 0)) - int(fields.get(b"cancelled_write_bytes", 0))


def _limit_processes(max_procs: int | None, *, root: bool) -> None:
    """``None``: no limit, for code that starts no process (the file tools' own writes)."""
    import resource

    if max_procs is None:
        return
    if not root:
        # Counted per user in this user namespace: only the sandbox's own processes.
        _limit(resource.RLIMIT_NPROC, max_procs)
        return
    # Root is never held by RLIMIT_NPROC; a PID namespace's own pid_max (Linux 6.14+) holds it.
    try:
        _write("/proc/sys/kernel/pid_max", str(max(max_procs + 1, PID_MAX_FLOOR)))
    except OSError as exc:
        raise ConfineError(
            exc.errno or 0,
            "cannot limit the number of processes: RLIMIT_NPROC does not apply to root, and this "
            f"kernel has no pid_max per PID namespace (Linux 6.14 or later) ({exc.strerror})",
        ) from exc


def _limit(which: int, value: int) -> None:
    import resource

    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


# -- hard links: read-only where the sandbox may write ----------------------------------------------
#
# Landlock decides by path: a file outside the workspace that something hard-linked into it is,
# under its workspace name, writable — and a write through that name changes the outside file
# (another project's file, a package cache's, a shared config). Where the sandbox may write, each
# regular file with more than one link is covered by a read-only bind mount of itself, in the
# sandbox's own mount namespace: reading it works, writing, truncating or chmod-ing it fails with
# EROFS, removing or renaming it with EBUSY; nothing changes outside. The sandbox cannot undo the
# mount (Landlock denies mount changes) nor link it elsewhere (a link across mounts is EXDEV).
# Files are found by walking the folder once, at the start of each call; a folder the walk may
# not list is made read-only whole. A link made outside while the call runs is not covered.

_OPEN_TREE, _MOVE_MOUNT, _MOUNT_SETATTR = 428, 429, 442  # the same on every architecture
_OPEN_TREE_CLONE, _AT_EMPTY_PATH, _MOUNT_ATTR_RDONLY = 1, 0x1000, 1
_MOVE_MOUNT_F_EMPTY_PATH, _MOVE_MOUNT_T_EMPTY_PATH = 0x4, 0x40


def seal_hard_links(folder: str) -> int:
    """Make every regular file under ``folder`` that has more than one link read-only in this
    mount namespace (see above); returns how many mounts it made. A folder the walk may not
    list (another user's, 0o703) could hide such a link: it is made read-only whole. Folders are
    opened without following links, one open descriptor per level, and each file or folder is
    mounted through its own descriptor, so nothing swapped in during the walk is mounted in its
    place."""
    try:
        top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return 0  # not there: nothing to write in
    sealed = 0
    # One frame per level: the folder's descriptor, its path (for messages), what is left of it.
    stack: list[tuple[int, str, list[os.DirEntry[str]]]] = []
    sealed += _enter(stack, top, folder)
    while stack:
        dir_fd, shown, left = stack[-1]
        if not left:
            os.close(dir_fd)
            stack.pop()
            continue
        entry = left.pop()
        path = f"{shown}/{entry.name}"
        try:
            if entry.is_dir(follow_symlinks=False):
                flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
                sealed += _enter(stack, os.open(entry.name, flags, dir_fd=dir_fd), path)
            elif entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_nlink > 1:
                sealed += _seal_at(dir_fd, entry.name, path)
        except PermissionError:
            sealed += _seal_at(dir_fd, entry.name, path)  # cannot be looked into: read-only whole
        except OSError:
            continue  # gone or swapped since the listing
    return sealed


def _enter(stack: list[tuple[int, str, list[os.DirEntry[str]]]], dir_fd: int, shown: str) -> int:
    """Push the folder ``dir_fd`` to be walked; one it may not list is made read-only instead
    (returns 1 then)."""
    try:
        with os.scandir(dir_fd) as entries:
            stack.append((dir_fd, shown, list(entries)))
        return 0
    except PermissionError:
        try:
            return _seal(dir_fd, shown)
        finally:
            os.close(dir_fd)


def _seal_at(dir_fd: int, name: str, shown: str) -> int:
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        return _seal(fd, shown)
    finally:
        os.close(fd)


def _seal(fd: int, shown: str) -> int:
    """Make the file or folder ``fd`` read-only, if it is still one to seal; 1 if it was."""
    import stat

    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) and info.st_nlink < 2:
        return 0
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        return 0
    _read_only_mount(fd, shown)
    return 1


def _read_only_mount(fd: int, shown: str) -> None:
    """Cover the file ``fd`` with a read-only bind mount of itself: a clone of it made read-only
    before it is attached, so it is never writable there for an instant."""
    libc = _libc()
    empty = ctypes.c_char_p(b"")
    tree = libc.syscall(
        _OPEN_TREE, fd, empty, ctypes.c_uint(_OPEN_TREE_CLONE | _AT_EMPTY_PATH | os.O_CLOEXEC)
    )
    if tree < 0:
        raise _failed(f"make {shown} (a file with more than one link) read-only")
    try:
        attr = struct.pack("=QQQQ", _MOUNT_ATTR_RDONLY, 0, 0, 0)
        if libc.syscall(
            _MOUNT_SETATTR, tree, empty, ctypes.c_uint(_AT_EMPTY_PATH), attr, ctypes.c_size_t(len(attr))
        ):
            raise _failed(f"make {shown} (a file with more than one link) read-only")
        flags = ctypes.c_uint(_MOVE_MOUNT_F_EMPTY_PATH | _MOVE_MOUNT_T_EMPTY_PATH)
        if libc.syscall(_MOVE_MOUNT, tree, empty, fd, empty, flags) != 0:
            raise _failed(f"make {shown} (a file with more than one link) read-only")
    finally:
        os.close(tree)


# -- Landlock --------------------------------------------------------------------------------------

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


def landlock(
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
        raise ConfineError(0, "Landlock is not available in this kernel")
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


def _failed(what: str) -> ConfineError:
    errno = ctypes.get_errno()
    return ConfineError(errno, f"could not {what}: {os.strerror(errno)}")


# -- seccomp: no Unix sockets, no io_uring, no fallocate ---------------------------------------------
#
# Connecting to a pathname Unix socket is not a file access Landlock sees (ABI 7 has no such right),
# and the network namespace holds only network sockets: a sandboxed process could reach every host
# service that listens on a path — the session bus (``systemd-run``: unconfined execution), Docker,
# X11, ssh-agent, gpg-agent — wherever the socket is. A seccomp filter reads a system call's
# integer arguments, never the address connect() points at, so it refuses the socket itself:
# ``socket(AF_UNIX, ...)`` fails with EACCES, whatever path it would have reached, the workspace's
# included. ``socketpair()`` (pipes between the sandbox's own processes, asyncio's wakeup) is a
# call of its own and stays allowed. Of the other families only those a network namespace
# confines are made (IP, netlink); vsock, which none confines, is not. io_uring can make sockets
# without socket(): refused.
# fallocate() reserves disk space without writing a byte, where the total-written limit (the
# kernel's I/O accounting) would not see it: refused with EOPNOTSUPP, which glibc's
# posix_fallocate() and the programs that call fallocate() answer by writing.

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JGE_K, _BPF_RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_ERRNO, _RET_KILL = 0x7FFF0000, 0x00050000, 0x80000000
_AF_UNIX, _EPERM, _EACCES, _EOPNOTSUPP, _EAFNOSUPPORT = 1, 1, 13, 95, 97
#: The only families a socket may have (AF_INET, AF_INET6, AF_NETLINK): what a network namespace
#: confines. Any other is "not supported" — AF_VSOCK above all, which reaches the hypervisor and
#: other VMs whatever the network namespace, and raw packet or XDP sockets.
_NETWORK_FAMILIES = (2, 10, 16)
_IO_URING = (425, 426, 427)  # setup, enter, register: the same numbers on every architecture
_X32_BIT = 0x40000000
#: machine -> (AUDIT_ARCH_*, socket, fallocate); x86_64's i386 and x32 calls are refused whole.
_ARCHES = {
    "x86_64": (0xC000003E, 41, 285),
    "aarch64": (0xC00000B7, 198, 47),
    "riscv64": (0xC00000F3, 198, 47),
}


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def seccomp_program(machine: str) -> bytes:
    """The filter for ``machine`` (``os.uname().machine``), as the kernel reads it."""
    if machine not in _ARCHES:
        raise ConfineError(
            0, f"no seccomp filter for this architecture ({machine}): Unix sockets could not be closed"
        )
    arch, socket_nr, fallocate_nr = _ARCHES[machine]
    code: list[tuple[int, int, int, int]] = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_BPF_JEQ_K, 1, 0, arch),
        (_BPF_RET_K, 0, 0, _RET_KILL),  # another ABI (i386 on x86_64 has socketcall()): not here
        (_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if machine == "x86_64":
        code += [(_BPF_JGE_K, 0, 1, _X32_BIT), (_BPF_RET_K, 0, 0, _RET_KILL)]
    refused = [(nr, _RET_ERRNO | _EPERM) for nr in _IO_URING]
    refused.append((fallocate_nr, _RET_ERRNO | _EOPNOTSUPP))
    for nr, action in refused:
        code += [(_BPF_JEQ_K, 0, 1, nr), (_BPF_RET_K, 0, 0, action)]
    low_half = 16 if sys.byteorder == "little" else 20  # seccomp_data.args[0]; the family is an int
    code += [
        (_BPF_JEQ_K, 1, 0, socket_nr),
        (_BPF_RET_K, 0, 0, _RET_ALLOW),
        (_BPF_LD_W_ABS, 0, 0, low_half),
        (_BPF_JEQ_K, 0, 1, _AF_UNIX),
        (_BPF_RET_K, 0, 0, _RET_ERRNO | _EACCES),
    ]
    for family in _NETWORK_FAMILIES:
        code += [(_BPF_JEQ_K, 0, 1, family), (_BPF_RET_K, 0, 0, _RET_ALLOW)]
    code.append((_BPF_RET_K, 0, 0, _RET_ERRNO | _EAFNOSUPPORT))
    return b"".join(struct.pack("=HBBI", op, jt, jf, k) for op, jt, jf, k in code)


def seccomp() -> None:
    """Install the filter on this process (and what it starts), for good; needs no_new_privs."""
    program = seccomp_program(os.uname().machine)
    fprog = _Program(len(program) // 8, program)
    if _libc().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise _failed("install the seccomp filter")


# -- the launcher ----------------------------------------------------------------------------------


def main() -> None:
    spec = marshal.loads(bytes.fromhex(sys.argv[1]))
    try:
        enter(spec)
    except OSError as exc:
        os.write(2, f"ipyagent-sandbox: {exc.strerror or exc}\n".encode())
        os._exit(CONFINE_FAILED)
    try:
        os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
    except OSError as exc:  # as a shell says it: the command is not there, or not runnable
        os.write(2, f"{spec['argv'][0]}: {exc.strerror}\n".encode())
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


if __name__ == "__main__":
    main()
