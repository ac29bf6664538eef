"""``%agent mcp`` parsed and applied, without a kernel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.mcp_servers import McpServers
from ipyagent.kernel.mcp_command import mcp_command


@pytest.fixture
def servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> McpServers:
    monkeypatch.setenv("IPYAGENT_CONFIG", str(tmp_path / "none.toml"))
    return McpServers(workspace=tmp_path)


def test_add_takes_a_command_or_a_url_with_env_and_headers(servers: McpServers) -> None:
    # The magic splits its line on spaces; quotes still group words.
    said = mcp_command(
        servers, ["add", "docs", "--header", '"Authorization=Bearer', '${TOKEN}"', "https://x.test/mcp"]
    )
    assert (
        "Added the MCP server 'docs' (https://x.test/mcp): it starts at the next run, once you allow it"
        in said
    )
    mcp_command(servers, ["add", "time", "--trust", "--env", "TZ=UTC", "python", "-m", "mcp_server_time"])
    found = servers.servers()
    assert found["docs"].url == "https://x.test/mcp"
    assert found["docs"].headers == {"Authorization": "Bearer ${TOKEN}"} and not found["docs"].trusted
    assert (found["time"].command, found["time"].args) == ("python", ("-m", "mcp_server_time"))
    assert found["time"].env == {"TZ": "UTC"} and found["time"].trusted
    listed = mcp_command(servers, ["list"])
    assert "docs           not enabled yet" in listed and "time           stopped" in listed


def test_remove_and_allow_name_a_known_server(servers: McpServers) -> None:
    mcp_command(servers, ["add", "time", "python", "-m", "mcp_server_time"])
    assert "enabled" in mcp_command(servers, ["allow", "time"])
    assert "time           stopped" in mcp_command(servers, [])
    assert "Removed" in mcp_command(servers, ["remove", "time"])
    assert mcp_command(servers, ["list"]).startswith("No MCP servers.")
    with pytest.raises(UserError, match="There is no MCP server 'time'"):
        mcp_command(servers, ["remove", "time"])
    with pytest.raises(UserError, match="--port is not understood"):
        mcp_command(servers, ["add", "x", "--port", "3", "python"])
    with pytest.raises(UserError, match="'args' must be"):  # the entry's own check
        servers.add("bad", {"command": "python", "args": "-m x"})


def test_list_and_allow_say_whether_a_folders_entry_is_approved(
    servers: McpServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEMO_TOKEN", "tok-0123456789abcdef")
    entry = {"command": "python", "args": ["server.py"], "env": {"TOKEN": "${DEMO_TOKEN}"}}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"docs": entry}}))
    digest = servers.servers()["docs"].digest()
    listed = mcp_command(servers, ["list"])
    assert "docs           not enabled yet" in listed
    assert f"a folder's entry, not approved (allow: %agent mcp allow docs); digest {digest}" in listed

    said = mcp_command(servers, ["allow", "docs"])
    assert "Approved the MCP server 'docs' of the folder's file" in said
    assert "command: python server.py" in said and "env: TOKEN = ${DEMO_TOKEN}" in said
    assert "tok-0123456789abcdef" not in said
    kept = json.loads((tmp_path / "mcp-approvals.json").read_text())
    assert digest in kept["approved"]
    again = McpServers(workspace=tmp_path)  # another kernel
    try:
        assert f"a folder's entry, approved; digest {digest}" in mcp_command(again, ["list"])
    finally:
        again.close()
