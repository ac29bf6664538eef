"""Real kernels for the kernel-layer tests: a kernelspec pointing at this interpreter, Jupyter's
folders in a temporary directory, and a small client that runs cells and collects outputs."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipyagent.agentlib.endpoints import DEFAULT_BY_KEY


@pytest.fixture
def jupyter_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Isolated Jupyter/IPython folders with a kernelspec ``ipyagent-test`` for this Python."""
    data = tmp_path / "jupyter"
    spec = data / "kernels" / "ipyagent-test"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "test", "language": "python"})
    )
    monkeypatch.setenv("JUPYTER_PATH", str(data))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    # Every key that would pick a provider (Colab sets GOOGLE_API_KEY, the Hub HF_TOKEN).
    for key in [env for env, _ in DEFAULT_BY_KEY] + [
        "IPYAGENT_MODEL", "JPY_SESSION_NAME", "IPYAGENT_REPLAY", "IPYAGENT_CASSETTE", "IPYAGENT_HEADLESS",
    ]:  # fmt: skip
        monkeypatch.delenv(key, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    return work


class Kernel:
    """A started kernel and a blocking client; ``run`` executes one cell and returns its outputs."""

    def __init__(self, cwd: Path, env: dict[str, str] | None = None) -> None:
        from jupyter_client.manager import KernelManager

        self.km = KernelManager(kernel_name="ipyagent-test")
        self.km.start_kernel(cwd=str(cwd), env={**os.environ, **(env or {})})
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def send(self, code: str, *, as_page: bool = False, cell_id: str = "test-cell") -> str:
        """Execute ``code`` as nbclient does (no input, no cell id: headless), or ``as_page``: as
        a notebook page does (input allowed, a cell id), which the kernel cannot tell from one
        showing the cell."""
        if not as_page:
            return self.kc.execute(code, allow_stdin=False)
        msg = self.kc.session.msg(
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": True,
                "user_expressions": {},
                "allow_stdin": True,
                "stop_on_error": True,
            },
            metadata={"cellId": cell_id},
        )
        self.kc.shell_channel.send(msg)
        return str(msg["header"]["msg_id"])

    def collect(self, msg_id: str, timeout: float = 60) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Outputs of ``msg_id`` (display updates applied in place), then its execute_reply."""
        outputs: list[dict[str, Any]] = []
        by_display: dict[str, int] = {}
        while True:
            msg = self.kc.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "status" and content["execution_state"] == "idle":
                break
            if kind == "update_display_data":
                index = by_display.get(content.get("transient", {}).get("display_id", ""))
                if index is not None:
                    outputs[index] = {"type": "display", **content}
            elif kind in ("stream", "display_data", "execute_result", "error"):
                display_id = content.get("transient", {}).get("display_id")
                if display_id:
                    by_display[display_id] = len(outputs)
                outputs.append({"type": kind if kind != "display_data" else "display", **content})
        while True:  # the reply to *this* request (an earlier one may still be queued)
            reply = self.kc.get_shell_msg(timeout=timeout)
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"], outputs

    def run(
        self, code: str, timeout: float = 60, *, as_page: bool = False, cell_id: str = "test-cell"
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        return self.collect(self.send(code, as_page=as_page, cell_id=cell_id), timeout)

    def restart(self) -> None:
        self.km.restart_kernel(now=True)
        self.kc.wait_for_ready(timeout=60)

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def text_of(outputs: list[dict[str, Any]]) -> str:
    """Everything a reader would see as text: streams, text/plain of displays, errors.

    Consecutive writes to one stream are joined as a front end joins them: the kernel flushes
    its buffer on a timer, so one ``print`` may arrive as two stream messages."""
    parts = []
    previous: dict[str, Any] | None = None
    for output in outputs:
        if output["type"] == "stream":
            if previous is not None and previous["type"] == "stream" and previous["name"] == output["name"]:
                parts[-1] += output["text"]
            else:
                parts.append(output["text"])
        elif output["type"] == "error":
            parts.append("\n".join(output["traceback"]))
        elif "data" in output:
            parts.append(output["data"].get("text/plain", ""))
        previous = output
    return "\n".join(parts)


@pytest.fixture
def kernel(jupyter_env: Path) -> Iterator[Kernel]:
    k = Kernel(jupyter_env)
    yield k
    k.close()
