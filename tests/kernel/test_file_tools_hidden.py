"""What the file tools must not hide or hand over by another name: a hard link to a secrets
file is that secrets file (read_file asks, search_files skips it), and a search says which files
it did not look into (too large, binary), so "(no matches)" is never taken for a definite answer.
Real files in a temporary folder, driven through a real Agent."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ipyagent import Agent
from ipyagent.agentlib.messages import ToolResultBlock
from ipyagent.kernel.tools.files import file_tools
from ipyagent.testing import ScriptedModel, tool_call


async def call(
    workspace: Path, name: str, arguments: dict[str, Any], *, answer: str | None = None
) -> ToolResultBlock:
    """One call of one file tool; ``answer``: what the user says if the tool asks something
    (``None``: nobody is there to answer)."""
    agent = Agent(
        model=ScriptedModel([tool_call(name, arguments), "done"]),
        tools=file_tools(workspace),
        auto_approve=True,
        workspace=workspace,
    )
    if answer is not None:
        agent.on("ask_user_required", lambda e: agent.answer(e.question_id, answer))
    result = await agent.run("go")
    return result.messages[2].tool_results[0]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "readme.txt").write_text("hello\n")
    return root


# -- a hard link to a secrets file ---------------------------------------------------------------


@pytest.mark.parametrize("secret", [".env", "deploy/.aws/credentials", "keys/server.pem"])
async def test_reading_a_hard_link_to_a_secrets_file_asks_like_the_file_itself(
    workspace: Path, secret: str
) -> None:
    (workspace / secret).parent.mkdir(parents=True, exist_ok=True)
    (workspace / secret).write_text("TOKEN=sk-live-123\n")
    os.link(workspace / secret, workspace / "notes.txt")
    block = await call(workspace, "read_file", {"path": "notes.txt"})
    assert block.is_error
    assert "sk-live-123" not in block.content
    assert "holds secrets" in block.content
    assert secret in block.content  # says which secrets file it is
    block = await call(workspace, "read_file", {"path": "notes.txt"}, answer="Allow once")
    assert block.content == "     1  TOKEN=sk-live-123"


async def test_a_file_with_other_links_that_are_not_secret_is_read(workspace: Path) -> None:
    (workspace / "a.txt").write_text("plain\n")
    os.link(workspace / "a.txt", workspace / "b.txt")
    block = await call(workspace, "read_file", {"path": "b.txt"})
    assert block.content == "     1  plain"


async def test_search_skips_a_hard_link_to_a_secrets_file(workspace: Path) -> None:
    (workspace / ".env").write_text("TOKEN=sk-live-123\n")
    os.link(workspace / ".env", workspace / "notes.txt")
    block = await call(workspace, "search_files", {"pattern": "sk-live"})
    assert "sk-live-123" not in block.content
    assert block.content.splitlines() == [
        "(no matches)",
        "… (skipped 2 file(s) that hold secrets by convention, such as .env or private keys; "
        "read_file asks the user before reading one)",
    ]


# -- what a search did not look into -------------------------------------------------------------


async def test_search_says_which_files_it_skipped_and_why(workspace: Path) -> None:
    for name in ("a.csv", "b.bin"):
        (workspace / name).touch()
        os.truncate(workspace / name, 6_000_000)  # sparse: over 5 MB without writing it
    for name in ("c.png", "d.db", "e.pyc"):
        (workspace / name).write_bytes(b"needle\0\1\2")
    block = await call(workspace, "search_files", {"pattern": "needle"})
    assert block.content.splitlines() == [
        "(no matches)",
        "… (not searched: 2 file(s) over 5 MB: a.csv, b.bin; 3 binary file(s): c.png, d.db, e.pyc)",
    ]


async def test_search_names_only_the_first_skipped_files(workspace: Path) -> None:
    for index in range(8):
        (workspace / f"f{index}.bin").write_bytes(b"\0")
    block = await call(workspace, "search_files", {"pattern": "x"})
    assert block.content.splitlines()[1] == (
        "… (not searched: 8 binary file(s): f0.bin, f1.bin, f2.bin, f3.bin, f4.bin, and 3 more)"
    )


async def test_a_search_that_skipped_nothing_says_no_more(workspace: Path) -> None:
    block = await call(workspace, "search_files", {"pattern": "absent"})
    assert block.content == "(no matches)"
