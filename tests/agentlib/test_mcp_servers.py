"""MCP servers' tools in a run, against real servers: one written here with the SDK (over stdio
and over streamable HTTP on 127.0.0.1), and the published ``mcp-server-time``."""

from __future__ import annotations

import json
import os
import signal
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
from ipyagent.agentlib.events import AgentEvent, AskUserRequired, PermissionRequired, RunWarning
from ipyagent.agentlib.mcp_servers import McpServers, parse_servers
from ipyagent.agentlib.mcp_servers.mapping import tool_name
from ipyagent.testing import ScriptedModel, tool_call

DEMO = Path(__file__).with_name("mcp_demo_server.py")


def demo(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(DEMO)], **extra}


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IPYAGENT_CONFIG", str(tmp_path / "no-config.toml"))


def agent_with(model: ScriptedModel, tmp_path: Path, **servers: dict[str, Any]) -> Agent:
    return Agent(model=model, mcp=servers, workspace=tmp_path)


def events_of(agent: Agent) -> list[AgentEvent]:
    seen: list[AgentEvent] = []
    agent.on("*", seen.append)
    return seen


def results(messages: list[Any]) -> list[str]:
    return [r.content for m in messages for r in m.tool_results]


async def test_tools_are_listed_namespaced_with_the_servers_schemas(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("demo__add", {"a": 2, "b": 3}), "5"])
    agent = agent_with(model, tmp_path, demo=demo(trusted=True))
    try:
        result = await agent.run("add")
    finally:
        agent.close()
    assert result.status == "completed"
    offered = {spec.name: spec for spec in model.requests[0].tools}
    assert {"demo__add", "demo__wipe", "demo__note", "demo__nap", "demo__die"} <= set(offered)
    add = offered["demo__add"].parameters
    assert add["properties"]["a"]["type"] == "integer" and add["required"] == ["a", "b"]
    assert "Add two numbers." in offered["demo__add"].description
    assert "demo__add" in model.requests[0].system  # the system prompt names the run's tools
    assert results(result.messages) == ["5"]


async def test_read_only_hint_runs_without_asking_and_destructive_or_unhinted_tools_ask(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            tool_call("demo__add", {"a": 1, "b": 1}),
            tool_call("demo__wipe", {"path": "x"}),
            tool_call("demo__note", {"text": "hi"}),
            "done",
        ]
    )
    agent = agent_with(model, tmp_path, demo=demo(trusted=True))
    asked: list[str] = []

    def decide(event: PermissionRequired) -> None:
        asked.append(event.name)
        agent.resolve_permission(event.call_id, "allow" if event.name == "demo__note" else "deny")

    agent.on(PermissionRequired, decide)
    try:
        result = await agent.run("go")
    finally:
        agent.close()
    assert asked == ["demo__wipe", "demo__note"]
    add, wipe, note = results(result.messages)
    assert add == "2"
    assert "declined" in wipe
    assert note == "noted hi"


async def test_arguments_that_do_not_fit_the_schema_are_an_error_result(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("demo__add", {"a": "two"}), "ok"])
    agent = agent_with(model, tmp_path, demo=demo(trusted=True))
    try:
        result = await agent.run("add")
    finally:
        agent.close()
    (text,) = results(result.messages)
    assert "Invalid arguments for tool `demo__add`" in text and "'b' is a required property" in text


async def test_a_tool_that_fails_on_the_server_is_an_error_result(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("demo__fail"), "ok"])
    agent = agent_with(model, tmp_path, demo=demo(trusted=True))
    try:
        result = await agent.run("fail")
    finally:
        agent.close()
    block = result.messages[2].tool_results[0]
    assert block.is_error and "Error executing tool fail" in block.content  # the server words it
    assert result.status == "completed"


async def test_a_server_that_fails_to_start_is_told_to_the_model_and_the_run_completes(
    tmp_path: Path,
) -> None:
    broken = {"command": sys.executable, "args": ["-c", "import sys; sys.exit('no such database: sales.db')"]}
    model = ScriptedModel(["I cannot reach that server."])
    agent = agent_with(model, tmp_path, broken=broken | {"trusted": True})
    seen = events_of(agent)
    try:
        result = await agent.run("query sales")
        status = {s.name: s for s in agent.mcp.status()} if agent.mcp else {}
    finally:
        agent.close()
    assert result.status == "completed"
    told = model.requests[0].messages[-1].content[-1]
    assert told.attached == "MCP servers"
    assert "`broken` could not be started" in told.text and "no such database: sales.db" in told.text
    warnings = [e for e in seen if isinstance(e, RunWarning)]
    assert warnings and warnings[0].code == "mcp_server_unavailable"
    assert status["broken"].state == "failed" and "sales.db" in status["broken"].error


async def test_a_missing_command_says_so(tmp_path: Path) -> None:
    model = ScriptedModel(["ok"])
    agent = agent_with(model, tmp_path, gone={"command": "no-such-mcp-server-here", "trusted": True})
    try:
        await agent.run("hi")
    finally:
        agent.close()
    assert "its command was not found" in model.requests[0].messages[-1].content[-1].text


async def test_a_server_that_dies_mid_run_becomes_an_error_result_and_restarts_next_run(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            tool_call("demo__die"),
            tool_call("demo__add", {"a": 1, "b": 2}),
            "it died",
            tool_call("demo__add", {"a": 1, "b": 2}),
            "3",
        ]
    )
    agent = agent_with(model, tmp_path, demo=demo(trusted=True))
    try:
        first = await agent.run("die")
        state_after_death = agent.mcp.status()[0].state if agent.mcp else ""
        second = await agent.run("add")
    finally:
        agent.close()
    assert first.status == "completed"
    died, after = results(first.messages)
    assert "The MCP server `demo` is not available" in died and "stopped answering" in died
    assert "not available" in after
    assert state_after_death == "failed"
    assert results(second.messages) == ["3"]


async def test_a_server_that_went_away_between_runs_is_started_again(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("demo__pid"), "got it", tool_call("demo__pid"), "got it again"])
    agent = agent_with(model, tmp_path, demo=demo(trusted=True))
    try:
        first = await agent.run("pid")
        (pid,) = results(first.messages)
        os.kill(int(pid), signal.SIGKILL)
        second = await agent.run("pid")
    finally:
        agent.close()
    (again,) = results(second.messages)
    assert again.isdigit() and again != pid


async def test_a_call_that_takes_too_long_times_out(tmp_path: Path) -> None:
    model = ScriptedModel(
        [tool_call("demo__nap", {"seconds": 60}), tool_call("demo__add", {"a": 1, "b": 1}), "ok"]
    )
    agent = agent_with(model, tmp_path, demo=demo(trusted=True, timeout=0.5))
    try:
        result = await agent.run("nap")
    finally:
        agent.close()
    napped, added = results(result.messages)
    assert "`demo__nap` timed out after 0.5 s" in napped
    assert added == "2"  # the server still answers the next call


async def test_a_server_that_does_not_start_in_time_fails(tmp_path: Path) -> None:
    silent = {
        "command": sys.executable,
        "args": ["-c", "import time; time.sleep(60)"],
        "startup_timeout": 0.5,
    }
    model = ScriptedModel(["ok"])
    agent = agent_with(model, tmp_path, silent=silent | {"trusted": True})
    try:
        result = await agent.run("hi")
    finally:
        agent.close()
    assert result.status == "completed"
    assert "did not start within 0.5 s" in model.requests[0].messages[-1].content[-1].text


async def test_headless_enabling_is_denied_and_says_how_to_allow(tmp_path: Path) -> None:
    model = ScriptedModel(["no server"])
    agent = agent_with(model, tmp_path, demo=demo())
    seen = events_of(agent)
    try:
        result = await agent.run("add")
        state = agent.mcp.status()[0].state if agent.mcp else ""
    finally:
        agent.close()
    assert result.status == "completed"
    assert not any(spec.name.startswith("demo__") for spec in model.requests[0].tools)
    assert "nobody could approve it" in model.requests[0].messages[-1].content[-1].text
    (warning,) = [e for e in seen if isinstance(e, RunWarning)]
    assert "trusted = true" in warning.hint and "[mcp_servers.demo]" in warning.hint
    assert state == "not enabled yet"


async def test_enabling_is_asked_once_and_allowed(tmp_path: Path) -> None:
    model = ScriptedModel(
        [tool_call("demo__add", {"a": 1, "b": 2}), "3", tool_call("demo__add", {"a": 2, "b": 2}), "4"]
    )
    agent = agent_with(model, tmp_path, demo=demo())
    asked: list[AskUserRequired] = []

    def answer(event: AskUserRequired) -> None:
        asked.append(event)
        agent.answer(event.question_id, "Allow")

    agent.on(AskUserRequired, answer)
    try:
        first = await agent.run("add")
        second = await agent.run("add again")
    finally:
        agent.close()
    assert len(asked) == 1
    assert "Enable the MCP server `demo`?" in asked[0].question and asked[0].choices == ["Allow", "Deny"]
    assert results(first.messages) == ["3"] and results(second.messages) == ["4"]


async def test_a_declined_server_stays_off_until_allowed(tmp_path: Path) -> None:
    model = ScriptedModel(["off", "still off", tool_call("demo__add", {"a": 1, "b": 2}), "3"])
    agent = agent_with(model, tmp_path, demo=demo())
    asked: list[AskUserRequired] = []

    def answer(event: AskUserRequired) -> None:
        asked.append(event)
        agent.answer(event.question_id, "Deny")

    agent.on(AskUserRequired, answer)
    try:
        await agent.run("one")
        await agent.run("two")
        assert agent.mcp is not None and agent.mcp.status()[0].state == "denied"
        agent.mcp.allow("demo")
        third = await agent.run("three")
    finally:
        agent.close()
    assert len(asked) == 1
    assert "the user declined it" in model.requests[0].messages[-1].content[-1].text
    assert model.requests[1].messages[-1].content[-1].attached is None  # said once, not every run
    assert results(third.messages) == ["3"]


async def test_auto_approve_enables_servers(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("demo__note", {"text": "x"}), "ok"])
    agent = Agent(model=model, mcp={"demo": demo()}, workspace=tmp_path, auto_approve=True)
    try:
        result = await agent.run("note")
    finally:
        agent.close()
    assert results(result.messages) == ["noted x"]


def test_servers_outlive_the_loop_of_a_run(tmp_path: Path) -> None:
    model = ScriptedModel(
        [tool_call("demo__add", {"a": 1, "b": 2}), "3", tool_call("demo__add", {"a": 3, "b": 4}), "7"]
    )
    agent = agent_with(model, tmp_path, demo=demo(trusted=True))
    try:
        first = agent.run_sync("add")  # each run_sync is a new event loop
        second = agent.run_sync("add")
    finally:
        agent.close()
    assert results(first.messages) == ["3"] and results(second.messages) == ["7"]


async def test_closing_the_agent_stops_the_servers_process(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("demo__pid"), "ok"])
    agent = agent_with(model, tmp_path, demo=demo(trusted=True))
    try:
        result = await agent.run("pid")
    finally:
        agent.close()
    (pid,) = results(result.messages)
    with pytest.raises(ProcessLookupError):  # ended and reaped
        os.kill(int(pid), 0)
    assert agent.mcp is not None and agent.mcp.status()[0].state == "stopped"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def http_server_process() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The demo server over streamable HTTP on 127.0.0.1, requiring a bearer token."""
    port = free_port()
    env = {**os.environ, "DEMO_REQUIRE_TOKEN": "s3cret"}
    process = subprocess.Popen(
        [sys.executable, str(DEMO), "http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    said = process.stderr.read() if process.stderr else ""
                    raise RuntimeError(f"the demo HTTP server did not start: {said}") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=10)
        if process.stderr:
            process.stderr.close()


@pytest.fixture
def http_server(http_server_process: tuple[str, subprocess.Popen[bytes]]) -> str:
    return http_server_process[0]


async def test_a_streamable_http_server_that_goes_away_mid_run(
    tmp_path: Path, http_server_process: tuple[str, subprocess.Popen[bytes]]
) -> None:
    url, process = http_server_process
    model = ScriptedModel(
        [tool_call("web__add", {"a": 1, "b": 2}), tool_call("web__add", {"a": 2, "b": 2}), "ok", "gone"]
    )
    headers = {"Authorization": "Bearer s3cret"}
    agent = agent_with(model, tmp_path, web={"url": url, "headers": headers, "trusted": True})

    def stop_server_after_the_first_result(event: AgentEvent) -> None:
        if process.poll() is None:
            process.kill()
            process.wait()

    agent.on("tool_result", stop_server_after_the_first_result)
    try:
        first = await agent.run("add twice")
        second = await agent.run("again")
        state = agent.mcp.status()[0] if agent.mcp else None
    finally:
        agent.close()
    added, lost = results(first.messages)
    assert added == "3" and "The MCP server `web` is not available" in lost
    assert second.status == "completed"
    assert "`web` could not be started" in model.requests[-1].messages[-1].content[-1].text
    assert state is not None and state.state == "failed" and "ConnectError" in state.error


async def test_a_streamable_http_server_with_headers(
    tmp_path: Path, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEMO_TOKEN", "s3cret")
    model = ScriptedModel([tool_call("web__add", {"a": 20, "b": 22}), "42"])
    entry = {"url": http_server, "headers": {"Authorization": "Bearer ${DEMO_TOKEN}"}, "trusted": True}
    agent = agent_with(model, tmp_path, web=entry)
    try:
        result = await agent.run("add")
    finally:
        agent.close()
    assert results(result.messages) == ["42"]


async def test_a_streamable_http_server_refusing_the_client_is_a_failed_start(
    tmp_path: Path, http_server: str
) -> None:
    model = ScriptedModel(["ok"])
    agent = agent_with(model, tmp_path, web={"url": http_server, "trusted": True, "startup_timeout": 10})
    try:
        await agent.run("hi")
    finally:
        agent.close()
    assert "`web` could not be started" in model.requests[0].messages[-1].content[-1].text


async def test_the_published_time_server(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("time__get_current_time", {"timezone": "Etc/UTC"}), "done"])
    time_server = {"command": sys.executable, "args": ["-m", "mcp_server_time"], "trusted": True}
    agent = agent_with(model, tmp_path, time=time_server)
    try:
        result = await agent.run("what time is it?")
    finally:
        agent.close()
    (text,) = results(result.messages)
    answer = json.loads(text)
    assert answer["timezone"] == "Etc/UTC" and answer["datetime"].endswith("+00:00")
    read_only = {t.name for t in model.requests[0].tools} >= {"time__get_current_time", "time__convert_time"}
    assert read_only


# -- configuration --------------------------------------------------------------------------------


def test_a_bad_entry_names_the_key_and_what_to_write() -> None:
    with pytest.raises(UserError) as caught:
        parse_servers({"time": {"command": "python", "args": "-m mcp_server_time"}})
    assert "'args' must be a list of strings" in caught.value.info.message
    assert 'args = ["-m", "mcp_server_time"]' in caught.value.info.hint
    with pytest.raises(UserError, match="needs either 'command' or 'url'"):
        parse_servers({"x": {"command": "a", "url": "http://b"}})
    with pytest.raises(UserError, match="unknown keys: comand"):
        parse_servers({"x": {"comand": "a"}})
    with pytest.raises(UserError, match="is not allowed"):
        parse_servers({"my server": {"command": "a"}})
    with pytest.raises(UserError, match="SSE transport is not supported"):
        parse_servers({"x": {"type": "sse", "url": "http://b"}})


def test_servers_come_from_the_config_file_and_the_notebook_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[mcp_servers.time]\ncommand = "python"\nargs = ["-m", "mcp_server_time"]\ntrusted = true\n'
    )
    monkeypatch.setenv("IPYAGENT_CONFIG", str(config))
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"docs": {"url": "http://127.0.0.1:1/mcp"}}})
    )
    servers = McpServers(workspace=tmp_path)
    try:
        found = servers.servers()
    finally:
        servers.close()
    assert found["time"].trusted and found["time"].source == str(config)
    assert found["docs"].url == "http://127.0.0.1:1/mcp" and not found["docs"].trusted


async def test_a_notebook_folders_file_is_shared_with_other_clients(tmp_path: Path) -> None:
    """Other clients' keys are ignored, their ``disabled`` understood; an entry ipyagent cannot use
    (an SSE server, a folder that trusts a server) is listed with why, and runs go on."""
    entries = {
        "demo": demo(autoApprove=["add"], description="the demo server"),
        "off": demo(disabled=True),
        "old": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
        "sneaky": demo(trusted=True),
    }
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": entries}))
    model = ScriptedModel(["ok"])
    agent = Agent(model=model, workspace=tmp_path)
    seen = events_of(agent)
    try:
        result = await agent.run("hi")  # nobody to enable `demo`: it stays off too
        status = {s.name: s for s in agent.mcp.status()} if agent.mcp else {}
    finally:
        agent.close()
    assert result.status == "completed"
    assert status["demo"].state == "not enabled yet" and status["off"].state == "disabled"
    assert status["old"].state == "invalid" and "SSE transport is not supported" in status["old"].error
    assert status["sneaky"].state == "invalid" and "a notebook folder may not" in status["sneaky"].error
    told = model.requests[0].messages[-1].content[-1].text
    assert "`old` is misconfigured" in told and "`sneaky` is misconfigured" in told
    warned = {e.message for e in seen if isinstance(e, RunWarning)}
    assert any("a notebook folder may not" in m for m in warned)


def test_tool_names_are_safe_for_every_provider() -> None:
    assert tool_name("time", "get_current_time") == "time__get_current_time"
    assert tool_name("fs", "read.file/v2") == "fs__read_file_v2"
    long = tool_name("server", "x" * 100)
    assert len(long) == 64 and long == tool_name("server", "x" * 100)
    assert tool_name("fs", "a.b", taken={"fs__a_b"}) != "fs__a_b"


def test_without_the_sdk_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(UserError) as caught:
        Agent(model=ScriptedModel(["x"]), mcp={"time": {"command": "python"}})
    assert "pip install 'ipyagent[mcp]'" in caught.value.info.hint


async def test_configured_servers_without_the_sdk_leave_the_run_going(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"demo": demo()}}))
    monkeypatch.setitem(sys.modules, "mcp", None)
    model = ScriptedModel(["ok"])
    agent = Agent(model=model, workspace=tmp_path)  # the folder's servers, read at each run
    seen = events_of(agent)
    try:
        result = await agent.run("hi")
    finally:
        agent.close()
    assert result.status == "completed"
    assert "`mcp` package" in model.requests[0].messages[-1].content[-1].text
    (warning,) = [e for e in seen if isinstance(e, RunWarning)]
    assert "pip install 'ipyagent[mcp]'" in warning.hint


def test_results_map_to_what_the_model_reads() -> None:
    from mcp_types import (
        CallToolResult,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    from ipyagent.agentlib.mcp_servers.mapping import result_output

    mixed = CallToolResult(
        content=[
            TextContent(text="a chart:"),
            ImageContent(data="aGk=", mime_type="image/png"),
            EmbeddedResource(resource=TextResourceContents(uri="file:///notes.md", text="# Notes")),
            ResourceLink(name="report", uri="file:///report.pdf"),
        ]
    )
    output = result_output(mixed)
    assert output.text == "a chart:\n[image: image/png]\n# Notes\n[resource: report file:///report.pdf]"
    assert output.images is not None and output.images[0].data == "aGk=" and not output.is_error
    structured = result_output(CallToolResult(content=[], structured_content={"rows": 3}))
    assert structured.text == '{"rows": 3}'
    failed = result_output(CallToolResult(content=[TextContent(text="no such table")], is_error=True))
    assert failed.is_error and failed.text == "no such table"
