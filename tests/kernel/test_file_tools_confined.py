"""write_file and edit_file write from a child the OS confines to the workspace: a path that got
past the tools' own checks is still refused by the kernel, and without a sandbox nothing is
written at all."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ipyagent import Agent
from ipyagent.agentlib import sandbox
from ipyagent.agentlib.messages import ToolResultBlock
from ipyagent.kernel.tools import files
from ipyagent.testing import ScriptedModel, tool_call

STATE = sandbox.available()
needs_sandbox = pytest.mark.skipif(not STATE, reason=f"no OS sandbox on this machine: {STATE}")


async def call(workspace: Path, name: str, arguments: dict[str, Any]) -> ToolResultBlock:
    agent = Agent(
        model=ScriptedModel([tool_call(name, arguments), "done"]),
        tools=files.file_tools(workspace),
        auto_approve=True,
        workspace=workspace,
    )
    result = await agent.run("go")
    return result.messages[2].tool_results[0]


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    workspace, outside = tmp_path / "workspace", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (workspace / "notes.txt").write_text("old text\n")
    return workspace, outside


@needs_sandbox
async def test_a_write_that_slipped_past_the_checks_is_refused_by_the_os(
    folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, outside = folders

    def buggy_write(root: str, parts: list[str], data: bytes, refuse: object) -> bool:
        (outside / parts[-1]).write_bytes(data)  # as if a check had let the path out
        return False

    monkeypatch.setattr(files, "_write", buggy_write)
    block = await call(workspace, "write_file", {"path": "escaped.txt", "content": "x"})
    assert block.is_error and "Permission denied" in block.content
    assert os.listdir(outside) == []


@needs_sandbox
async def test_writes_and_edits_still_work(folders: tuple[Path, Path]) -> None:
    workspace, _ = folders
    block = await call(workspace, "edit_file", {"path": "notes.txt", "old": "old", "new": "new"})
    assert block.content == "Replaced 1 occurrence(s) in notes.txt."
    assert (workspace / "notes.txt").read_text() == "new text\n"


@needs_sandbox
async def test_writes_work_where_processes_cannot_be_limited(
    folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root on Linux before 6.14: the sandbox cannot limit processes, and the file tools' writes,
    which start none, still run confined."""
    workspace, _ = folders
    state = sandbox.Availability(
        STATE.mechanism, "(root on Linux 6.1)", STATE.landlock_abi, process_limit=False
    )
    monkeypatch.setattr(sandbox, "_probed", state)
    block = await call(workspace, "write_file", {"path": "new.txt", "content": "x"})
    assert block.content == "Created new.txt (1 characters)."


async def test_without_a_sandbox_nothing_is_written(
    folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace, _ = folders
    monkeypatch.setenv("IPYAGENT_SANDBOX", "off")
    block = await call(workspace, "write_file", {"path": "new.txt", "content": "x"})
    assert block.is_error and "Not run" in block.content and "IPYAGENT_SANDBOX" in block.content
    block = await call(workspace, "edit_file", {"path": "notes.txt", "old": "old", "new": "new"})
    assert block.is_error and "Not run" in block.content
    assert sorted(os.listdir(workspace)) == ["notes.txt"]
    assert (workspace / "notes.txt").read_text() == "old text\n"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("write_file", {"path": "linked.txt", "content": "new"}),
        ("edit_file", {"path": "linked.txt", "old": "outside", "new": "changed"}),
    ],
)
async def test_a_file_with_another_name_outside_is_not_changed_and_the_model_is_told_why(
    folders: tuple[Path, Path], name: str, arguments: dict[str, Any]
) -> None:
    workspace, outside = folders
    (outside / "original.txt").write_text("outside text\n")
    os.link(outside / "original.txt", workspace / "linked.txt")
    result = await call(workspace, name, arguments)
    assert result.is_error
    assert "hard links" in result.content and "Tell the user" in result.content
    assert (outside / "original.txt").read_text() == "outside text\n"
    assert (workspace / "linked.txt").read_text() == "outside text\n"
