"""The OS sandbox's cost: a sandboxed ``shell`` call against an unconfined subprocess.

Each row runs the same command N times one after another and reports the median and the 90th
percentile in milliseconds. "unconfined" is ``asyncio.create_subprocess_exec`` of the command,
which is what a shell tool without a sandbox would do; "sandboxed" is :func:`sandbox.run` (the
launcher's Python start, namespaces, rlimits, Landlock, then the command). For reference, the
same command under ``unshare -Urnp`` and ``bwrap`` when they are installed, and the parts of the
sandbox's own cost: the launcher's bare Python start and building the Landlock path list. The
function rows compare a plain call with :func:`sandbox.call` (a fork of this process, confined),
also from a process holding ~1 GB, as a kernel with data loaded does.

Two more tables say what holds rather than what it costs. "unix sockets": a listening pathname
Unix socket in each folder where host services keep theirs (and one in a folder of no special
name), and whether a sandboxed ``shell`` command and a sandboxed function reach it. "what runs":
everyday commands inside the sandbox, and whether they still work.

    python bench/sandbox.py [--runs 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _report import report_sections

from ipyagent.agentlib import sandbox
from ipyagent.agentlib.sandbox._policy import read_paths


def timed(fn: Callable[[], Any], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


async def atimed(fn: Callable[[], Awaitable[Any]], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


async def unconfined(argv: list[str], cwd: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    await process.communicate()
    assert process.returncode == 0, argv


async def confined(command: str, cwd: str) -> None:
    result = await sandbox.run(command, cwd=cwd)
    assert result.ok, result


def row(name: str, samples: list[float]) -> list[Any]:
    ordered = sorted(samples)
    return [name, statistics.median(ordered), ordered[int(len(ordered) * 0.9) - 1], len(ordered)]


async def main(runs: int) -> None:
    state = sandbox.available()
    if not state:
        sys.exit(f"No sandbox here: {state}")
    rows: list[list[Any]] = []
    py = sys.executable
    with tempfile.TemporaryDirectory() as cwd:
        for label, command in (("sh -c true", "true"), ("python -c pass", f"{py} -c pass")):
            argv = ["/bin/sh", "-c", command]
            rows.append(row(f"unconfined: {label}", await atimed(lambda a=argv: unconfined(a, cwd), runs)))
            rows.append(row(f"sandboxed:  {label}", await atimed(lambda c=command: confined(c, cwd), runs)))
            if shutil.which("unshare"):
                ns = ["unshare", "-Urnpf", *argv]
                rows.append(
                    row(f"unshare -Urnpf: {label}", await atimed(lambda a=ns: unconfined(a, cwd), runs))
                )
            if shutil.which("bwrap"):
                bw = [
                    "bwrap",
                    "--ro-bind",
                    "/",
                    "/",
                    "--bind",
                    cwd,
                    cwd,
                    "--unshare-all",
                    "--die-with-parent",
                ]
                bw += argv
                rows.append(row(f"bwrap: {label}", await atimed(lambda a=bw: unconfined(a, cwd), runs)))
        for label, files, linked in (("10,000 files", 10_000, 0), ("1,000 hard-linked files", 1_000, 1_000)):
            with tempfile.TemporaryDirectory() as big, tempfile.TemporaryDirectory() as store:
                populate(big, store, files, linked)
                samples = await atimed(lambda b=big: confined("true", b), max(5, runs // 4))
                rows.append(row(f"sandboxed:  sh -c true, workspace of {label}", samples))
        bare = [py, "-E", "-s", "-S", "-c", "pass"]
        rows.append(
            row("part: launcher's bare python start", await atimed(lambda: unconfined(bare, cwd), runs))
        )
        rows.append(row("part: Landlock path list", timed(read_paths, runs)))
        rows.append(row("function: plain call", timed(lambda: len("x"), runs)))
        call = lambda: sandbox.call(len, ("x",), cwd=cwd)  # noqa: E731
        rows.append(row("function: sandbox.call", timed(call, runs)))
        ballast = bytearray(1 << 30)
        ballast[:: 1 << 12] = b"x" * len(ballast[:: 1 << 12])  # touch every page: really resident
        rows.append(
            row(
                "function: sandbox.call, 1 GB resident",
                timed(lambda: sandbox.call(len, ("x",), cwd=cwd), runs),
            )
        )
        del ballast
        sockets = await socket_rows(cwd)
        runs_rows = await what_runs(cwd)
    report_sections(
        "sandbox",
        [
            ("cost", ["case", "median ms", "p90 ms", "runs"], rows),
            ("unix sockets", ["listening socket in", "sandboxed shell", "sandboxed function"], sockets),
            ("what runs", ["command in the sandbox", "exit", "first line of output"], runs_rows),
        ],
        {"mechanism": state.mechanism, "landlock_abi": state.landlock_abi, "detail": str(state)},
    )


def populate(folder: str, store: str, files: int, linked: int) -> None:
    """``files`` small files in folders of 100, the first ``linked`` of them hard links to files
    in ``store`` (as a package manager's cache links its files into a virtualenv)."""
    for i in range(files):
        sub = os.path.join(folder, f"d{i // 100}")
        os.makedirs(sub, exist_ok=True)
        path = os.path.join(sub, f"f{i}")
        with open(os.path.join(store, f"f{i}") if i < linked else path, "w") as handle:
            handle.write("x")
        if i < linked:
            os.link(os.path.join(store, f"f{i}"), path)


SOCKET_FOLDERS = ("/tmp", "/run", "/var/run", "/var/tmp", "/dev/shm")
CONNECT = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "s.connect(sys.argv[1]); s.sendall(b'x'); print('reached')\n"
)


def _connect(path: str) -> str:
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(path)
        return "reached"
    except OSError as exc:
        return f"refused ({os.strerror(exc.errno or 0)})"


async def socket_rows(cwd: str) -> list[list[Any]]:
    """One listener per folder; what a sandboxed command and function make of it."""
    out: list[list[Any]] = []
    outside = tempfile.mkdtemp(prefix="ipyagent-bench-outside-")
    for folder in (*SOCKET_FOLDERS, outside, cwd):
        if not os.access(folder, os.W_OK):
            out.append([folder, "(not writable here)", ""])
            continue
        made = tempfile.mkdtemp(prefix="ipyagent-bench-sock-", dir=folder)
        path = os.path.join(made, "s.sock")
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(path)
            listener.listen()
            done = await sandbox.run([sys.executable, "-c", CONNECT, path], cwd=cwd)
            shell = (
                "reached" if "reached" in done.stdout else "refused: " + done.stderr.strip().splitlines()[-1]
            )
            function = sandbox.call(_connect, (path,), cwd=cwd)
        os.unlink(path)
        os.rmdir(made)
        name = "the workspace" if folder == cwd else "a folder outside" if folder == outside else folder
        out.append([name, shell[:60], function])
    os.rmdir(outside)
    return out


WHAT_RUNS = (
    "sh -c 'echo a | sort'",
    "git init -q repo && git -C repo status --short && echo git ok",
    f"{sys.executable} -m pip --version",
    f"{sys.executable} -c 'import multiprocessing as m; print(m.Pool(2).map(abs, [-1, -2]))'",
    f'{sys.executable} -c \'import multiprocessing as m; m.set_start_method("forkserver"); '
    "print(m.Pool(2).map(abs, [-1, -2]))'",
    f"{sys.executable} -c 'import multiprocessing as m; print(m.Manager().list([1]))'",
    f"{sys.executable} -c 'import asyncio; asyncio.run(asyncio.sleep(0)); print(\"asyncio ok\")'",
    "ls -la /dev/shm | head -1",
)


async def what_runs(cwd: str) -> list[list[Any]]:
    out: list[list[Any]] = []
    for command in WHAT_RUNS:
        done = await sandbox.run(command, cwd=cwd)
        text = (done.stdout.strip() or done.stderr.strip()).splitlines()
        out.append(
            [
                command[-70:],
                done.exit_code if done.reason == "exited" else done.signal,
                (text or [""])[-1][:70],
            ]
        )
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=50)
    asyncio.run(main(parser.parse_args().runs))
