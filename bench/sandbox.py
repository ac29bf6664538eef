"""The OS sandbox's cost: a sandboxed ``shell`` call against an unconfined subprocess.

Each row runs the same command N times one after another and reports the median and the 90th
percentile in milliseconds. "unconfined" is ``asyncio.create_subprocess_exec`` of the command,
which is what a shell tool without a sandbox would do; "sandboxed" is :func:`sandbox.run` (the
launcher's Python start, namespaces, rlimits, Landlock, then the command). For reference, the
same command under ``unshare -Urnp`` and ``bwrap`` when they are installed, and the parts of the
sandbox's own cost: the launcher's bare Python start and building the Landlock path list. The
function rows compare a plain call with :func:`sandbox.call` (a fork of this process, confined),
also from a process holding ~1 GB, as a kernel with data loaded does.

    python bench/sandbox.py [--runs 50]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _report import report

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
    report(
        "sandbox",
        ["case", "median ms", "p90 ms", "runs"],
        rows,
        {"mechanism": state.mechanism, "landlock_abi": state.landlock_abi, "detail": str(state)},
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=50)
    asyncio.run(main(parser.parse_args().runs))
