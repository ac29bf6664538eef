"""Starts one stdio MCP server and makes sure nothing it started outlives the kernel.

Run by :mod:`.stdio` as ``python -I -S _launcher.py KERNEL_PID COMMAND [ARG ...]`` (a script of
the standard library alone: no imports from ipyagent, so it starts in milliseconds). It stands
between the kernel and the server:

- it is a *child subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``): whatever the server starts, even
  a ``setsid`` daemon whose parent exits, stays below it, so it can find them all in ``/proc``;
- it gets SIGTERM when the kernel's thread that started it ends (``PR_SET_PDEATHSIG``: the
  kernel was killed, or the MCP loop stopped), and it checks the kernel's pid every second too;
- on SIGTERM, on the kernel's death, or when the server itself exits, it ends every process
  below it: SIGTERM, then SIGKILL to what is left after a second, then it exits (with the
  server's exit status when the server ended on its own).

The server inherits stdin, stdout and stderr; the launcher closes its own copies, so the pipes
end when the server's side does. Not covered: a process that leaves the tree by other means
than orphaning (a subreaper of its own below the launcher keeps its orphans, and they are found
through it; a process started through another service, such as ``systemd-run`` or a D-Bus
activation, is that service's child, not the server's), and the launcher being SIGKILLed itself
(what is below it then goes to init). Elsewhere than Linux there is no subreaper nor parent-death
signal: the launcher sees the kernel's death within a second, and ends what is still below it
(``ps``); a daemon that left the tree is not found.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
#: Seconds between SIGTERM and SIGKILL for what is below the launcher.
_TERM_GRACE = 1.0
#: Seconds between checks that the kernel is still there (PR_SET_PDEATHSIG is the fast path).
_PARENT_POLL = 1.0
#: Seconds the launcher keeps killing before it gives up on what it cannot end.
_GIVE_UP = 10.0


def main(argv: list[str]) -> int:
    kernel, command = int(argv[1]), argv[2:]
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != kernel:  # the kernel died before the signal was armed
        return 1
    # Waited for with sigtimedwait, so they are blocked here and unblocked in the server.
    waited = {signal.SIGTERM, signal.SIGCHLD}
    signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of the kernel's terminal is the kernel's
    pid = os.fork()
    if pid == 0:
        # As subprocess does: the server starts with default signals, nothing blocked.
        for number in (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(2, f"could not start {command[0]}: {exc}\n".encode())
        os._exit(127)
    # The server holds the pipes now: the kernel sees them end when the server's side does.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    status: int | None = None
    while status is None and os.getppid() == kernel:
        received = signal.sigtimedwait(waited, _PARENT_POLL)
        if received is not None and received.si_signo == signal.SIGTERM:
            break
        status = _reap(pid)
    _end_all(os.getpid())
    return status if status is not None else 0


def _reap(server: int) -> int | None:
    """Reap every ended child (orphans land here too); the server's exit status once it ended."""
    status = None
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status if status is not None else 0
        if pid == 0:
            return status
        if pid == server:
            status = os.waitstatus_to_exitcode(code)
            status = status if status >= 0 else 128 - status


def _end_all(me: int) -> None:
    """SIGTERM everything below the launcher, then SIGKILL what is left, until none is."""
    started = time.monotonic()
    sent_term: set[int] = set()
    # Bounded: a process it may not signal (another user's) must not keep the launcher here.
    while (below := _below(me)) and time.monotonic() - started < _GIVE_UP:
        hard = time.monotonic() - started >= _TERM_GRACE
        for pid in below:
            if hard or pid not in sent_term:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL if hard else signal.SIGTERM)
                sent_term.add(pid)
        _reap(-1)
        time.sleep(0.01)
    _reap(-1)


def _below(root: int) -> list[int]:
    """The live processes below ``root`` (zombies are reaped, not killed)."""
    children: dict[int, list[int]] = {}
    for pid, parent in _processes():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _processes() -> list[tuple[int, int]]:
    """(pid, parent pid) of every live process: from /proc, or from ``ps`` where there is none."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        entries = []
    if "self" not in entries:  # macOS, the BSDs
        try:
            out = subprocess.run(["ps", "-axo", "pid=,ppid=,stat="], capture_output=True, text=True).stdout
        except OSError:
            return []
        rows = [line.split() for line in out.splitlines()]
        return [(int(r[0]), int(r[1])) for r in rows if len(r) == 3 and not r[2].startswith("Z")]
    found = []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z":
            found.append((int(name), int(fields[1])))
    return found


def _prctl(option: int, value: int) -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(option, value, 0, 0, 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
