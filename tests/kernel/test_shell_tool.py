"""The ``shell`` tool: offered only when named, asks before it runs, runs confined in the
notebook's folder and tells the model how the command ended."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Kernel, text_of

from ipyagent import Agent
from ipyagent.agentlib import sandbox
from ipyagent.agentlib.messages import ToolResultBlock
from ipyagent.kernel.tools import GROUPS, kernel_tools
from ipyagent.kernel.tools.shell import shell_tools
from ipyagent.testing import ScriptedModel, tool_call

STATE = sandbox.available()
needs_sandbox = pytest.mark.skipif(
    not (STATE and STATE.process_limit), reason=f"no OS sandbox for commands on this machine: {STATE}"
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path.resolve()  # as the sandbox reports it (pwd)


async def call(
    workspace: Path, arguments: dict[str, object], *, auto_approve: bool = True
) -> ToolResultBlock:
    agent = Agent(
        model=ScriptedModel([tool_call("shell", arguments), "done"]),
        tools=shell_tools(workspace),
        auto_approve=auto_approve,
        workspace=workspace,
    )
    result = await agent.run("go")
    return result.messages[2].tool_results[0]


def test_shell_is_offered_only_when_named(tmp_path: Path) -> None:
    named = kernel_tools(["shell"], shell=None, main=None, workspace=tmp_path, notebook=None)  # type: ignore[arg-type]
    assert [t.name for t in named] == ["shell"]
    assert not named[0].read_only
    assert "shell" not in GROUPS


@needs_sandbox
async def test_a_command_runs_in_the_notebooks_folder(workspace: Path) -> None:
    block = await call(workspace, {"command": "pwd; echo made > made.txt; echo oops >&2; exit 3"})
    assert block.is_error
    assert block.content == f"[exit code 3]\n[stdout]\n{workspace}\n[stderr]\noops"
    assert (workspace / "made.txt").read_text() == "made\n"


@needs_sandbox
async def test_a_command_past_its_timeout_is_killed_and_said_so(tmp_path: Path) -> None:
    block = await call(tmp_path, {"command": "echo begun; sleep 100", "timeout": 1})
    assert block.is_error
    assert block.content == "[killed: ran past the time limit of 1 s]\n[stdout]\nbegun"


async def test_shell_asks_before_it_runs(tmp_path: Path) -> None:
    block = await call(tmp_path, {"command": "touch ran.txt"}, auto_approve=False)
    assert block.is_error and block.content.startswith("Denied:")
    assert not (tmp_path / "ran.txt").exists()


async def test_without_a_sandbox_shell_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IPYAGENT_SANDBOX", "off")
    block = await call(tmp_path, {"command": "touch ran.txt"})
    assert block.is_error
    assert "Not run" in block.content and "IPYAGENT_SANDBOX" in block.content
    assert not (tmp_path / "ran.txt").exists()


@needs_sandbox
def test_in_a_kernel_shell_is_offered_by_name_and_runs_confined_in_the_notebooks_folder(
    kernel: Kernel, jupyter_env: Path
) -> None:
    kernel.run(
        "%load_ext ipyagent\nfrom ipyagent.testing import ScriptedModel, tool_call\n"
        "m = ScriptedModel([[tool_call('shell', {'command': 'pwd; echo hi > made.txt; ls ~'})], 'Done.',"
        " 'Nothing to run.'])"
    )
    reply, outputs = kernel.run("%%agent -y -m m --tools shell -o r\nMake a file.")
    assert reply["status"] == "ok", text_of(outputs)
    _, outputs = kernel.run("print(r.messages[2].tool_results[0].content)")
    assert text_of(outputs).strip() == f"[exit code 0]\n[stdout]\n{jupyter_env.resolve()}"
    assert (jupyter_env / "made.txt").read_text() == "hi\n"
    # Not named, not offered.
    kernel.run("%%agent -y -m m\nAnything?")
    _, outputs = kernel.run("print('shell' in [t.name for t in m.requests[-1].tools])")
    assert text_of(outputs).strip() == "False"
