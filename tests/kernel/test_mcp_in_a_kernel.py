"""``%agent mcp`` and MCP servers' tools in a real kernel, driven by a scripted model."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from conftest import Kernel, text_of

DEMO = Path(__file__).parents[1] / "agentlib" / "mcp_demo_server.py"

SETUP = """
%load_ext ipyagent
from ipyagent.testing import ScriptedModel, tool_call
"""


def test_servers_are_added_listed_used_and_removed(jupyter_env: Path) -> None:
    (jupyter_env / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"demo": {"command": sys.executable, "args": [str(DEMO)]}}})
    )
    kernel = Kernel(jupyter_env, env={"IPYAGENT_CONFIG": str(jupyter_env / "none.toml")})
    try:
        kernel.run(SETUP)
        _, outputs = kernel.run("%agent mcp list")
        listed = text_of(outputs)
        assert "demo" in listed and "not enabled yet" in listed and ".mcp.json" in listed

        reply, outputs = kernel.run(f"%agent mcp add time --trust {sys.executable} -m mcp_server_time")
        assert reply["status"] == "ok", text_of(outputs)
        assert "Added the MCP server 'time'" in text_of(outputs)

        kernel.run(
            "m = ScriptedModel([tool_call('time__get_current_time', {'timezone': 'Etc/UTC'}),"
            " tool_call('demo__add', {'a': 1, 'b': 2}), 'It is time.'])"
        )
        reply, outputs = kernel.run("%%agent -m m -o res\nWhat time is it?", timeout=120)
        assert reply["status"] == "ok", text_of(outputs)
        # Nobody can allow the folder's server in a headless cell: the run goes on without it.
        assert "nobody could approve it" in text_of(outputs)
        _, outputs = kernel.run("print([r.content[:60] for m in res.messages for r in m.tool_results])")
        shown = text_of(outputs)
        assert '"timezone": "Etc/UTC"' in shown and "Unknown tool `demo__add`" in shown

        _, outputs = kernel.run("%agent mcp list")
        listed = text_of(outputs)
        assert "time" in listed and "running (2 tools)" in listed and "%agent mcp add" in listed

        _, outputs = kernel.run("%agent mcp remove time")
        assert "Removed the MCP server 'time'" in text_of(outputs)
        _, outputs = kernel.run("%agent mcp list")
        assert "running" not in text_of(outputs) and "time " not in text_of(outputs)

        reply, outputs = kernel.run("%agent mcp add broken")
        assert reply["status"] == "error" and "which command or URL?" in text_of(outputs)
    finally:
        kernel.close()


def test_shutting_the_kernel_down_stops_its_servers(jupyter_env: Path) -> None:
    kernel = Kernel(jupyter_env, env={"IPYAGENT_CONFIG": str(jupyter_env / "none.toml")})
    try:
        kernel.run(SETUP)
        kernel.run(f"%agent mcp add demo --trust {sys.executable} {DEMO}")
        kernel.run("m = ScriptedModel([tool_call('demo__pid'), 'ok'])")
        reply, outputs = kernel.run("%%agent -m m -o res\npid?", timeout=120)
        assert reply["status"] == "ok", text_of(outputs)
        _, outputs = kernel.run("print(res.messages[2].tool_results[0].content)")
        pid = int(text_of(outputs).strip())
        os.kill(pid, 0)  # running
    finally:
        kernel.kc.stop_channels()
        kernel.km.shutdown_kernel(now=False)  # a shutdown request: the kernel exits on its own
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"the MCP server (pid {pid}) outlived its kernel")
