"""Confining the current process: namespaces, resource limits, then Landlock.

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
- rlimits: address space, CPU seconds, file size, open files, processes (a non-root user);
- Landlock: reads only where a command needs to read, writes only in the workspace.

Standard library only: the launcher loads this module by itself, before Python's site packages.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
from typing import Any

if __package__:
    from . import _landlock
else:  # loaded by the launcher, run as a script by path: this folder is sys.path[0]
    import _landlock  # type: ignore[import-not-found,no-redef]

__all__ = ["ConfineError", "enter"]

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWIPC = 0x08000000
_PR_SET_PDEATHSIG = 1
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
    ``network``, ``memory`` (bytes of address space, or None), ``cpu_seconds``, ``max_procs``,
    ``file_size``, ``open_files``, ``cwd``."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    flags = _CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWIPC | (0 if spec["network"] else _CLONE_NEWNET)
    if libc.unshare(flags) != 0:
        errno = ctypes.get_errno()
        raise ConfineError(errno, f"could not make user namespaces: {os.strerror(errno)}")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    child = os.fork()
    if child:
        _stay_outside(child)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the outer one killed: so is this one
    _limit_processes(spec["max_procs"], root=uid == 0)
    _limit(resource.RLIMIT_CPU, spec["cpu_seconds"])
    _limit(resource.RLIMIT_FSIZE, spec["file_size"])
    _limit(resource.RLIMIT_NOFILE, spec["open_files"])
    _limit(resource.RLIMIT_CORE, 0)
    if spec["memory"] is not None:
        _limit(resource.RLIMIT_AS, spec["memory"])
    _landlock.restrict(
        read=spec["read"],
        write=spec["write"],
        files=[(path, rights) for path, rights in spec["files"]],
        network=spec["network"],
    )
    os.chdir(spec["cwd"])


def _stay_outside(child: int) -> None:
    """The outer process: wait for the confined child and leave as it did."""
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for clarity
            continue
    if os.WIFSIGNALED(status):
        # Leave the same way, so the caller can tell "killed by SIGKILL" from an exit code.
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _limit_processes(max_procs: int, *, root: bool) -> None:
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
