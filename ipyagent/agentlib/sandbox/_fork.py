"""A Python function in a confined child forked from this process (:func:`sandbox.call`).

The child is a copy of the kernel: it has the function, its closure and the user's variables
without pickling them. It keeps only the descriptor it answers on: every other one — the kernel's
sockets to the Jupyter server and to model providers, which would still reach out from inside a
network namespace — is pointed at ``/dev/null`` (not closed: a number left free would be reused by
the function's own files, and a finalizer of the kernel's copy would close it under them; the
garbage collector is frozen for the same reason). It makes its own session, so it can be killed
with everything it starts,
confines itself (:func:`._confine.enter`), runs the function and writes back one pickle:
``("ok", value)`` or ``("error", exception or its description)``.

Forking a process that has threads copies only the calling thread; a lock another thread held at
that moment stays held in the child. The confinement and a plain function take none of the
kernel's locks; a function that does (an import another thread was in the middle of, say) waits
until its time limit and is killed, never forever.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import pickle
import select
import signal
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

from ._confine import CONFINE_FAILED, enter
from ._errors import SandboxError, SandboxTimeout, SandboxUnavailable
from ._guard import guarded
from ._policy import Limits, build_spec

__all__ = ["call_forked"]

MAX_RESULT_BYTES = 64 << 20


def call_forked(
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    cwd: str,
    limits: Limits,
    guard_control: bool = True,
) -> Any:
    with (
        tempfile.TemporaryDirectory(prefix="ipyagent-sandbox-", ignore_cleanup_errors=True) as tmp,
        guarded(cwd, tmp, enabled=guard_control) as read_only,
    ):
        spec = build_spec(cwd, tmp, limits, read_only)
        if limits.memory is not None:
            spec["memory"] = _address_space() + limits.memory  # the copy of the kernel, and then some
        read_end, write_end = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: "fork() with threads"
            pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child, reported through the pipe
            _child(function, args, kwargs, spec, read_end, write_end, tmp)
        os.close(write_end)
        data, timed_out = b"", True  # until the child has answered
        try:
            data, timed_out = _read_all(read_end, limits.timeout)
        finally:
            os.close(read_end)
            if timed_out:
                _kill(pid)
            _, status = os.waitpid(pid, 0)
    if timed_out:
        raise SandboxTimeout(
            f"The sandboxed call ran past its time limit of {limits.timeout:g} s and was killed.",
            hint="Give the tool a longer timeout, or make it do less per call.",
        )
    return _answer(data, status)


def _answer(data: bytes, status: int) -> Any:
    if not data:
        code = os.waitstatus_to_exitcode(status)
        if code == CONFINE_FAILED:
            raise SandboxUnavailable("Not run: the sandbox could not confine the call.")
        ended = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
        raise SandboxError(
            f"The sandboxed call {ended} before it answered (a limit on memory, CPU time, "
            "processes or bytes written may have stopped it)."
        )
    try:
        kind, payload = pickle.loads(data)
    except Exception as exc:
        raise SandboxError(f"The sandboxed call's answer could not be read: {exc}") from exc
    if kind == "ok":
        return payload
    if kind == "failed":
        raise SandboxUnavailable(f"Not run: the sandbox could not confine the call ({payload}).")
    if isinstance(payload, BaseException):
        raise payload
    raise SandboxError(str(payload))


def _child(
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    spec: dict[str, Any],
    read_end: int,
    write_end: int,
    tmp: str,
) -> None:  # pragma: no cover - runs in the child
    """Never returns: whatever happens, the child ends here."""
    code = 0
    try:
        os.close(read_end)
        os.setsid()
        gc.freeze()  # the kernel's objects are never collected here: their finalizers stay unrun
        _cut_off(write_end)
        sys.stdout = io.StringIO()  # the kernel's streams write to sockets that are cut off now
        sys.stderr = io.StringIO()
        os.environ.clear()
        os.environ.update({"HOME": tmp, "TMPDIR": tmp, "PATH": "/usr/local/bin:/usr/bin:/bin"})
        tempfile.tempdir = tmp
        try:
            enter(spec)
        except OSError as exc:
            _send(write_end, ("failed", exc.strerror or str(exc)))
            code = CONFINE_FAILED
            return
        try:
            value = function(*args, **kwargs)
            if hasattr(value, "__await__"):
                import asyncio

                async def wait() -> Any:
                    return await value

                value = asyncio.run(wait())
            _send(write_end, ("ok", value))
        except BaseException as exc:  # the function's failure goes back as its result
            _send(write_end, ("error", _portable(exc)))
    except BaseException:
        code = CONFINE_FAILED
    finally:
        os._exit(code)


def _portable(exc: BaseException) -> BaseException | str:
    """The exception itself when it survives pickling, else its description."""
    try:
        pickle.loads(pickle.dumps(exc))
        exc.__traceback__ = None
        return exc
    except Exception:
        return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def _send(fd: int, message: tuple[str, Any]) -> None:  # pragma: no cover - runs in the child
    try:
        data = pickle.dumps(message)
    except Exception as exc:
        data = pickle.dumps(("error", f"The result cannot be sent back (it cannot be pickled: {exc})."))
    if len(data) > MAX_RESULT_BYTES:
        data = pickle.dumps(("error", f"The result is too large to send back ({len(data):,} bytes)."))
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _cut_off(keep: int) -> None:  # pragma: no cover - runs in the child
    """Point every descriptor but ``keep`` at /dev/null."""
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in (keep, null):
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
                os.dup2(null, fd, inheritable=fd <= 2)
    os.close(null)


def _read_all(fd: int, timeout: float) -> tuple[bytes, bool]:
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"", True
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return b"", True
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks), False
        size += len(chunk)
        if size > MAX_RESULT_BYTES + (1 << 20):
            return b"", True
        chunks.append(chunk)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _address_space() -> int:
    """Bytes of address space this process holds now (VmSize)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0
