"""A file another process keeps locked: edit_file gives up at its deadline with an error that
names the file and its holder, and the tools go on working. A hard link to this kernel's own
(locked) session file is refused before any lock is taken. Real processes, real flocks."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipyagent import Agent
from ipyagent.agentlib.messages import ToolResultBlock
from ipyagent.agentlib.sessions import Session
from ipyagent.kernel.tools.files import file_tools
from ipyagent.testing import ScriptedModel, tool_call

pytest.importorskip("fcntl")

HOLD = (
    "import fcntl, sys\n"
    "f = open(sys.argv[1])\n"
    "fcntl.flock(f, fcntl.LOCK_EX)\n"
    "print('locked', flush=True)\n"
    "sys.stdin.read()\n"  # until the test closes our stdin
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nbeta\n")
    return root


@pytest.fixture
def holder(workspace: Path) -> Iterator[Any]:
    """Another process that holds an exclusive flock on a file until the test ends."""
    started: list[subprocess.Popen[str]] = []

    def hold(path: Path) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        started.append(process)
        assert process.stdout is not None and process.stdout.readline() == "locked\n"
        return process

    yield hold
    for process in started:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=30)
        assert process.stdout is not None
        process.stdout.close()


async def calls(workspace: Path, *turns: tuple[str, dict[str, Any]], **options: Any) -> list[ToolResultBlock]:
    given = {name: options.pop(name) for name in ("protected", "lock_seconds") if name in options}
    agent = Agent(
        model=ScriptedModel([*(tool_call(name, arguments) for name, arguments in turns), "done"]),
        tools=file_tools(workspace, **given),
        auto_approve=True,
        workspace=workspace,
        **options,
    )
    result = await agent.run("go")
    return [r for m in result.messages for r in m.tool_results]


@pytest.mark.parametrize(
    ("name", "arguments"), [("edit_file", {"old": "1", "new": "2"}), ("write_file", {"content": "{}"})]
)
async def test_a_write_to_a_file_another_process_locks_ends_at_its_deadline(
    workspace: Path, holder: Any, name: str, arguments: dict[str, str]
) -> None:
    other = workspace / "analysis.agent.jsonl"  # another kernel's open conversation file
    other.write_text('{"turn": 1}\n')
    process = holder(other)
    edit, read = await calls(
        workspace,
        (name, {"path": "analysis.agent.jsonl", **arguments}),
        ("read_file", {"path": "notes.txt"}),
        lock_seconds=0.5,
        tool_timeout=30,  # generous: before the deadline existed, the edit waited until this
    )
    assert edit.is_error
    assert "analysis.agent.jsonl stayed locked for 0.5 s, so nothing was changed" in edit.content
    assert f"process {process.pid} (python" in edit.content  # who holds it, from /proc/locks
    assert "conversation file of another agent or kernel" in edit.content
    assert other.read_text() == '{"turn": 1}\n'
    assert not read.is_error and "alpha" in read.content  # the tools still work


@pytest.mark.parametrize(
    ("name", "arguments"), [("edit_file", {"old": "ipyagent", "new": "x"}), ("write_file", {"content": "x"})]
)
async def test_a_hard_link_to_the_open_session_is_refused_before_any_lock(
    workspace: Path, name: str, arguments: dict[str, str]
) -> None:
    session = Session.open(workspace / "analysis.agent.jsonl")  # holds its flock while open
    try:
        link = workspace / "alias.txt"
        link.hardlink_to(session.path)
        before = session.path.read_bytes()
        (edit,) = await calls(
            workspace,
            (name, {"path": "alias.txt", **arguments}),
            protected={session.path: "the file this conversation is saved in"},
            tool_timeout=30,
        )
        assert edit.is_error
        assert "is off limits to the file tools: it is the file this conversation is saved in" in edit.content
        assert session.path.read_bytes() == before
    finally:
        session.close()
