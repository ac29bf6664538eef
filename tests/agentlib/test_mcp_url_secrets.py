"""An MCP server's URL is shown (the server list, the "Enable?" question, ``%agent mcp add``)
with its credentials masked: a hosted server often takes its key in the URL's path."""

from __future__ import annotations

from ipyagent.agentlib.mcp_servers import parse_servers

KEY = "sk-ak-Zq8x7Vb2Lm4Np6Rt1Yw3Kc5Hf9Jd0Gs"


def test_the_url_an_mcp_server_is_shown_by_hides_its_key() -> None:
    servers = parse_servers(
        {
            "path": {"url": f"https://mcp.example.com/api/{KEY}/mcp"},
            "query": {"url": f"https://mcp.example.com/mcp?api_key={KEY}"},
            "userinfo": {"url": f"https://me:{KEY}@mcp.example.com/mcp"},
        }
    )
    shown = {name: config.target for name, config in servers.items()}
    assert shown == {
        "path": "https://mcp.example.com/api/***/mcp",
        "query": "https://mcp.example.com/mcp?api_key=***",
        "userinfo": "https://***@mcp.example.com/mcp",
    }
    # The server is still reached at the URL as written.
    assert servers["path"].url == f"https://mcp.example.com/api/{KEY}/mcp"
