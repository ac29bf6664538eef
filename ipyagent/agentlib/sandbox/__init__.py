"""An operating-system sandbox for tools that touch the system.

A command (:func:`run`) or a Python function (:func:`call`) runs in a child process that the
kernel confines: it writes only inside the workspace (and a private temporary folder), never
through a file with more than one link, reads only the system's programs and libraries, the
running Python and the workspace, has no network unless allowed and no Unix socket at all, and
is held to limits on time, memory, processes, file size, bytes written in all and open files.
Where this machine cannot confine a child, nothing runs: :class:`SandboxUnavailable` says what
is missing.

The mechanism — user, network, PID and mount namespaces, resource limits, Landlock and a small
seccomp filter, all from the kernel, nothing to install — and why it was chosen are in
docs/sandbox.md. This package owns the
confinement; the tools that use it (``shell``, ``@tool(sandboxed=True)``) live with the tools.

Set ``IPYAGENT_SANDBOX=off`` to turn the sandbox off on purpose: sandboxed tools are then refused
(never run unconfined), which is also how the refusal is tested.

::

    SandboxError
    ├── SandboxUnavailable   this machine cannot confine a child: nothing was run
    └── SandboxTimeout       a sandboxed function ran past its time and was killed
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from . import _confine
from ._confine import CONFINE_FAILED
from ._errors import SandboxError, SandboxTimeout, SandboxUnavailable
from ._fork import call_forked
from ._guard import guarded
from ._policy import Limits, holds_home, launcher_argv

__all__ = [
    "Availability",
    "Limits",
    "SandboxError",
    "SandboxResult",
    "SandboxTimeout",
    "SandboxUnavailable",
    "available",
    "call",
    "run",
]

OFF_VALUES = ("off", "0", "false", "no", "none")


@dataclass(frozen=True)
class Availability:
    """Whether this machine can sandbox, with what, or why not (``str()`` says it)."""

    mechanism: str | None
    reason: str
    landlock_abi: int = 0
    #: Whether the number of processes can be limited. Root on Linux before 6.14 cannot be (see
    #: docs/sandbox.md): there only calls with ``Limits(max_procs=None)`` — the file tools' own
    #: writes — run; a ``shell`` command or a sandboxed tool is refused.
    process_limit: bool = True

    def __bool__(self) -> bool:
        return self.mechanism is not None

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class SandboxResult:
    """How a sandboxed command ended. ``reason``: ``exited`` (see ``exit_code``), ``timeout``
    (killed at the time limit), ``signal`` (killed by ``signal``: ``SIGXCPU`` is the CPU limit,
    ``SIGXFSZ`` the file-size limit, of one file or the call's total). ``stdout``/``stderr``
    keep the first ``Limits.output`` bytes; ``truncated`` says whether more was cut."""

    exit_code: int | None
    stdout: str
    stderr: str
    reason: Literal["exited", "timeout", "signal"]
    signal: str | None = None
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.reason == "exited" and self.exit_code == 0


_probed: Availability | None = None


def available(*, refresh: bool = False) -> Availability:
    """Whether sandboxed tools can run here; ``str()`` of the answer says why or why not. The
    first call tries a real confined command (a few milliseconds); the answer is kept."""
    global _probed
    if _override_off():
        return Availability(
            None,
            "The sandbox is turned off (IPYAGENT_SANDBOX=off), so tools that must run confined are "
            "refused. Unset IPYAGENT_SANDBOX to turn it back on.",
        )
    if _probed is None or refresh:
        _probed = _probe()
    return _probed


def _override_off() -> bool:
    return os.environ.get("IPYAGENT_SANDBOX", "").strip().lower() in OFF_VALUES


def _probe() -> Availability:
    if not sys.platform.startswith("linux"):
        return Availability(
            None,
            f"The sandbox needs Linux (Landlock and namespaces); this is {sys.platform}. Tools that must "
            "run confined are refused here: run the notebook on Linux, e.g. in a container or VM.",
        )
    abi = _confine.abi_version()
    if abi < 1:
        return Availability(
            None,
            f"This Linux kernel ({os.uname().release}) has no Landlock, so writes cannot be confined to "
            "the workspace. Use Linux 5.13 or later with Landlock enabled (landlock in the kernel's "
            "lsm= list).",
        )
    done = _try_launcher(Limits(timeout=10))
    if isinstance(done, Availability):
        return done
    how = "namespaces (user, network, PID, mount, IPC) + rlimits + Landlock + seccomp"
    if done.returncode == 0:
        return Availability(f"landlock-v{abi}", f"Sandbox: {how}, Landlock ABI {abi}.", abi)
    why = _why(done)
    if "processes" in why:  # root on a kernel without a per-namespace pid_max
        unlimited = _try_launcher(Limits(timeout=10, max_procs=None))
        if not isinstance(unlimited, Availability) and unlimited.returncode == 0:
            return Availability(
                f"landlock-v{abi}",
                f"Sandbox: {how}, Landlock ABI {abi}; but {why}. Commands and sandboxed tools are "
                "refused (they could start processes without end); the file tools' writes run. "
                "Run the kernel as a normal user, or on Linux 6.14 or later.",
                abi,
                process_limit=False,
            )
    hint = ""
    if "namespace" in why:
        hint = (
            " Allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 on Debian; "
            "on Ubuntu, kernel.apparmor_restrict_unprivileged_userns=0), or run in a container that "
            "permits them."
        )
    return Availability(None, f"This machine cannot confine a child process: {why}.{hint}", abi)


def _try_launcher(limits: Limits) -> subprocess.CompletedProcess[bytes] | Availability:
    """The launcher run once on ``true``; an :class:`Availability` when it cannot even start."""
    with tempfile.TemporaryDirectory(prefix="ipyagent-probe-") as folder:
        try:
            argv = launcher_argv(["true"], cwd=folder, tmp=folder, limits=limits)
            return subprocess.run(argv, env={}, capture_output=True, timeout=20, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return Availability(None, f"The sandbox's launcher could not start: {exc}.")


def _why(done: subprocess.CompletedProcess[bytes]) -> str:
    why = done.stderr.decode(errors="replace").strip().removeprefix("ipyagent-sandbox:").strip()
    return why or f"the launcher exited with status {done.returncode}"


def require(
    workspace: str | os.PathLike[str] | None = None,
    *,
    limits: Limits | None = None,
    allow_home: bool = False,
) -> Availability:
    """The availability, or :class:`SandboxUnavailable` saying what is missing (for ``limits``,
    when given: a process limit this machine cannot hold). With a ``workspace``:
    :class:`SandboxError` when it is the home folder or holds it (unless ``allow_home``), since
    the sandbox would then open the user's keys and settings."""
    state = available()
    if not state:
        raise SandboxUnavailable(
            f"Not run: this tool runs only inside the sandbox, and here it cannot. {state.reason}",
            hint="Tools that must run confined are never run unconfined; see docs/sandbox.md.",
        )
    if limits is not None and limits.max_procs is not None and not state.process_limit:
        raise SandboxUnavailable(
            f"Not run: this tool runs only inside the sandbox, and here the sandbox cannot limit "
            f"its processes. {state.reason}",
            hint="Tools that must run confined are never run unconfined; see docs/sandbox.md.",
        )
    if workspace is not None and not allow_home and holds_home(os.fspath(workspace)):
        raise SandboxError(
            f"Not run: the workspace {os.fspath(workspace)!r} is the home folder or holds it, so "
            "the sandbox would let this tool read and change the user's keys and settings.",
            hint="Keep the notebook in a folder of its own (a project folder under home), and "
            "start Jupyter there.",
            code="sandbox_home_workspace",
        )
    return state


async def run(
    command: str | Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    limits: Limits | None = None,
    env: Mapping[str, str] | None = None,
    allow_home: bool = False,
    guard_control: bool = True,
) -> SandboxResult:
    """Run ``command`` (a shell command line, or an argv list) confined, in ``cwd`` (the
    workspace: the only folder it may write). Raises :class:`SandboxUnavailable` when this machine
    cannot confine it — then nothing was run — and :class:`SandboxError` when ``cwd`` is the home
    folder or holds it, unless ``allow_home``. ``env`` adds variables (the kernel's own, keys
    included, are never passed). The workspace's control files (``.mcp.json``, ``AGENTS.md``,
    ``.ipyagent/``, skill folders) are read-only to the command unless ``guard_control`` is
    False (see :mod:`._guard`)."""
    limits = limits or Limits()
    require(cwd, limits=limits, allow_home=allow_home)
    argv_command = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    # What the command leaves in its temporary folder may be hard to remove (mode 000): never an error.
    with (
        tempfile.TemporaryDirectory(prefix="ipyagent-sandbox-", ignore_cleanup_errors=True) as tmp,
        guarded(os.fspath(cwd), tmp, enabled=guard_control) as read_only,
    ):
        argv = launcher_argv(
            argv_command, cwd=os.fspath(cwd), tmp=tmp, limits=limits, env=env, read_only=read_only
        )
        process = await asyncio.create_subprocess_exec(
            *argv,
            env={},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # one process group: killed together at the time limit
        )
        return await _collect(process, limits)


async def _collect(process: asyncio.subprocess.Process, limits: Limits) -> SandboxResult:
    assert process.stdout is not None and process.stderr is not None
    cut = [False]

    async def drain(stream: asyncio.StreamReader) -> bytes:
        kept = bytearray()
        while chunk := await stream.read(1 << 16):
            room = limits.output - len(kept)
            if len(chunk) > room:
                cut[0] = True
            kept += chunk[: max(0, room)]
        return bytes(kept)

    readers = asyncio.gather(drain(process.stdout), drain(process.stderr), process.wait())
    timed_out = False
    try:
        out, err, status = await asyncio.wait_for(asyncio.shield(readers), limits.timeout)
    except asyncio.TimeoutError:
        timed_out = True
        _kill_group(process.pid)
        out, err, status = await readers
    except BaseException:  # cancelled: nothing may outlive the call
        _kill_group(process.pid)
        with contextlib.suppress(BaseException):
            await readers
        raise
    stderr = err.decode(errors="replace")
    if status == CONFINE_FAILED and stderr.startswith("ipyagent-sandbox:"):
        raise SandboxUnavailable(
            f"Not run: the sandbox could not confine the command ({stderr.strip()}).",
            hint="See sandbox.available() and docs/sandbox.md.",
        )
    stdout = out.decode(errors="replace")
    if timed_out:
        return SandboxResult(None, stdout, stderr, "timeout", truncated=cut[0])
    if status < 0:
        return SandboxResult(None, stdout, stderr, "signal", signal.Signals(-status).name, cut[0])
    return SandboxResult(status, stdout, stderr, "exited", truncated=cut[0])


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def call(
    function: Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    cwd: str | os.PathLike[str],
    limits: Limits | None = None,
    allow_home: bool = False,
    guard_control: bool = True,
) -> Any:
    """``function(*args, **kwargs)`` in a child forked from this process and confined like
    :func:`run` (workspace ``cwd``). Its return value comes back pickled; an exception it raises
    is raised here again (as :class:`SandboxError` when it cannot be pickled);
    :class:`SandboxTimeout` when it runs past ``limits.timeout``. The child starts as a copy of this
    process: it sees the same variables, but what it changes stays in the child. Blocks; an async
    function is run to completion in the child. ``allow_home``, ``guard_control``: as for :func:`run`."""
    limits = limits or Limits()
    require(cwd, limits=limits, allow_home=allow_home)
    return call_forked(
        function,
        tuple(args),
        dict(kwargs or {}),
        cwd=os.fspath(cwd),
        limits=limits,
        guard_control=guard_control,
    )
