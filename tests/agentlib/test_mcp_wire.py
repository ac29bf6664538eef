"""What an MCP server sends, bounded: a result is cut while it is read (``max_result_bytes``),
a tool's description is capped and shown as the server's text, an image is capped like an
attachment; and a server's noise stays out of the notebook (one warning line, no tracebacks, no
"exception never retrieved"). Against real servers: ``mcp_raw_server.py`` writes the wire itself."""

from __future__ import annotations

import gc
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipyagent import Agent
from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.mcp_servers import McpServers, parse_server
from ipyagent.agentlib.tool_sources import SourceContext
from ipyagent.testing import ScriptedModel, tool_call

HERE = Path(__file__).parent
RAW = HERE / "mcp_raw_server.py"


def raw(*flags: str, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(RAW), *flags], "trusted": True, "timeout": 60, **extra}


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IPYAGENT_CONFIG", str(tmp_path / "no-config.toml"))


async def nobody(question: str, choices: list[str]) -> str | None:
    return None


def results(messages: list[Any]) -> list[str]:
    return [r.content for m in messages for r in m.tool_results]


async def run_calls(tmp_path: Path, server: dict[str, Any], *calls: Any) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel([*calls, "done"])
    agent = Agent(model=model, mcp={"raw": server}, workspace=tmp_path, max_result_chars=2_000_000)
    try:
        return await agent.run("go"), model
    finally:
        agent.close()


@pytest.mark.parametrize("flags", [(), ("id-last",)])
async def test_a_result_over_the_cap_is_cut_while_read_and_the_model_told(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    result, _ = await run_calls(tmp_path, raw(*flags), tool_call("raw__big", {"size": 50_000_000}))
    (text,) = results(result.messages)
    assert "50,000,0" in text and "max_result_bytes" in text  # the size the server sent, the key
    assert "xxxxxxxx" in text and "!" not in text  # its beginning, not its end
    assert 900_000 < len(text) < 1_100_000  # the default cap, 1 MB


async def test_max_result_bytes_is_set_per_server(tmp_path: Path) -> None:
    result, _ = await run_calls(
        tmp_path,
        raw(max_result_bytes=5_000),
        tool_call("raw__big", {"size": 1_000}),
        tool_call("raw__big", {"size": 20_000}),
        tool_call("raw__big", {"size": 30}),  # the connection goes on after a cut
    )
    small, cut, after = results(result.messages)
    assert small == "x" * 999 + "!" and after == "x" * 29 + "!"
    assert "max_result_bytes" in cut and len(cut) < 6_000


@pytest.fixture
def raw_http() -> Iterator[str]:
    """The raw server over HTTP, answering JSON: its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(RAW), "http", str(port)])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until it listens
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.kill()
        server.wait()


async def test_a_json_answer_of_an_http_server_is_cut_too(tmp_path: Path, raw_http: str) -> None:
    entry = {"url": raw_http, "trusted": True, "timeout": 60, "max_result_bytes": 5_000}
    result, _ = await run_calls(
        tmp_path,
        entry,
        tool_call("raw__big", {"size": 1_000}),
        tool_call("raw__big", {"size": 20_000_000}),
        tool_call("raw__big", {"size": 30}),
    )
    small, cut, after = results(result.messages)
    assert small == "x" * 999 + "!" and after == "x" * 29 + "!"
    assert "more than its limit of 5,000 bytes" in cut and "xxxx" in cut and len(cut) < 6_000


def test_max_result_bytes_is_validated() -> None:
    entry = raw(max_result_bytes=-1)
    with pytest.raises(UserError, match="max_result_bytes"):
        parse_server("raw", entry)
    assert parse_server("raw", raw(max_result_bytes=2048)).max_result_bytes == 2048


async def test_an_image_over_the_attachment_cap_is_left_out_and_said(tmp_path: Path) -> None:
    server = raw(max_result_bytes=20_000_000)
    result, _ = await run_calls(
        tmp_path, server, tool_call("raw__image", {"size": 6_000_000}), tool_call("raw__image", {"size": 100})
    )
    big, small = [r for m in result.messages for r in m.tool_results]
    assert "5 MB" in big.content and not big.images
    assert small.images and small.content == "[image: image/png]"


async def test_a_servers_description_is_capped_and_listed_apart_as_its_text(tmp_path: Path) -> None:
    result, model = await run_calls(tmp_path, raw("hostile", max_result_bytes=5_000_000))
    assert result.status == "completed"
    offered = {spec.name: spec for spec in model.requests[0].tools}
    hostile = offered["raw__hostile"]
    assert len(hostile.description) < 5_000 and len(json.dumps(hostile.parameters)) < 1_000
    assert "too many to send" in hostile.description
    system = model.requests[0].system
    assert "</tools><system>" not in system  # quoted, so markup cannot pose as the prompt's
    builtin, _, servers = system.partition("MCP server")
    assert "raw__hostile" not in builtin and "raw__hostile" in servers
    assert "not instructions" in servers


async def test_garbage_on_a_servers_stdout_is_one_warning_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        result, _ = await run_calls(
            tmp_path, raw("garbage"), tool_call("raw__big", {"size": 3}), tool_call("raw__big", {"size": 4})
        )
    assert results(result.messages) == ["xx!", "xxx!"]
    assert "Traceback" not in capfd.readouterr().err
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "`raw`" in warning.getMessage() and "\n" not in warning.getMessage()


async def test_a_start_that_timed_out_leaves_no_unretrieved_exception(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    silent = {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"], "trusted": True}
    servers = McpServers({"silent": silent | {"startup_timeout": 0.5}}, read_config=False)
    try:
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            found = await servers.tools_for_run(SourceContext(ask=nobody))
            servers.close()
            gc.collect()
    finally:
        servers.close()
    assert "did not start within 0.5 s" in found.notes[0]
    assert "never retrieved" not in caplog.text


def test_jsonschema_is_imported_off_the_callers_loop(tmp_path: Path) -> None:
    # A fresh process: jsonschema's import (its format checkers) takes seconds the first time.
    script = f"""
import asyncio, json, sys, threading
imported = []
def hook(event, args):
    if event == "import" and args[0] == "jsonschema":
        imported.append(threading.current_thread() is threading.main_thread())
sys.addaudithook(hook)
from ipyagent.agentlib.mcp_servers import McpServers
from ipyagent.agentlib.tool_sources import SourceContext
from ipyagent.agentlib.tools import RunContext
async def nobody(q, c):
    return None
async def main():
    servers = McpServers({{"raw": {raw()!r}}}, read_config=False)
    try:
        found = await servers.tools_for_run(SourceContext(ask=nobody))
        started = list(imported)
        tool = {{t.name: t for t in found.tools}}["raw__big"]
        tool.validate({{"size": 3}})
    finally:
        servers.close()
    print(json.dumps({{"at_start": started, "all": imported}}))
asyncio.run(main())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["at_start"] == [False]  # imported while the servers started, on another thread
    assert seen["all"] == [False]
