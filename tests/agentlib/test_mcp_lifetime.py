"""No MCP server process outlives its kernel, however the kernel ends: a real Python process
plays the kernel (``mcp_kernel_stub.py``) and starts a server that ignores SIGTERM and the end
of its stdin and that has started a ``setsid`` grandchild; the kernel then closes its servers,
exits, or is killed with SIGTERM or SIGKILL."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

HERE = Path(__file__).parent
#: A generous bound: the servers are gone within about 3 s (bench/mcp.py measures it).
GONE_WITHIN = 20.0


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + GONE_WITHIN
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def start_kernel(flags: list[str]) -> tuple[subprocess.Popen[str], list[int]]:
    server = {"command": sys.executable, "args": [str(HERE / "mcp_raw_server.py"), *flags], "trusted": True}
    kernel = subprocess.Popen(
        [sys.executable, str(HERE / "mcp_kernel_stub.py"), json.dumps({"raw": server})],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert kernel.stdout is not None
    line = kernel.stdout.readline()
    assert line, "the kernel stub did not start its server"
    return kernel, json.loads(line)


@pytest.mark.parametrize("ending", ["close", "exit", "SIGTERM", "SIGKILL"])
def test_a_stubborn_server_and_its_setsid_grandchild_end_with_the_kernel(ending: str) -> None:
    kernel, pids = start_kernel(["stubborn", "grandchild"])
    try:
        assert len(pids) >= 2  # the server and its grandchild (and whatever starts them)
        assert kernel.stdin is not None
        if ending in ("close", "exit"):
            kernel.stdin.write(ending + "\n")
            kernel.stdin.flush()
        else:
            kernel.send_signal(getattr(signal, ending))
        kernel.wait(timeout=60)
        assert wait_gone(pids) == []
    finally:
        kernel.kill()
        kernel.wait()
        for stream in (kernel.stdin, kernel.stdout):
            if stream is not None:
                stream.close()
        for pid in pids:  # never leave them behind on a failure
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
