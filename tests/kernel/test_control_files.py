"""Control files — ``.mcp.json``, ``AGENTS.md``, a skill's ``SKILL.md``, anything under
``.ipyagent/`` — tell the agent what to do or which programs to start. A write to one is asked
about even under auto-approve, the question says what the file is, and a run with nobody to ask
refuses it; a sandboxed ``shell`` command cannot write one at all. Real files, a real Agent (the
model is scripted), real sandboxed commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import Kernel, text_of

from ipyagent import Agent, tool
from ipyagent.agentlib import events as ev
from ipyagent.agentlib import sandbox
from ipyagent.agentlib.control_files import control_kind
from ipyagent.kernel.tools.files import file_tools
from ipyagent.kernel.tools.shell import shell_tools
from ipyagent.testing import ScriptedModel, tool_call

CONTROL = {
    ".mcp.json": "will start",
    "AGENTS.md": "will be told",
    "skills/plot/SKILL.md": "will be told",
    ".agents/skills/plot/SKILL.md": "will be told",
    ".ipyagent/config.toml": "settings",
}
ROUTES = {
    "write_file": lambda path: tool_call("write_file", {"path": path, "content": "EVIL"}),
    "edit_file": lambda path: tool_call("edit_file", {"path": path, "old": "good", "new": "EVIL"}),
}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


#: What a planted control file holds: valid JSON (the agent reads .mcp.json as it starts).
GOOD = '{"x": "good"}\n'


def plant(workspace: Path, path: str) -> Path:
    target = workspace / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(GOOD)
    return target


async def run(
    workspace: Path, turns: list[Any], *, answer: str | None, delegate: bool = False
) -> tuple[list[ev.AgentEvent], list[ev.PermissionRequired]]:
    """Run the script under auto_approve; ``answer``: the person's decision at a permission
    prompt (``None``: nobody is there to answer)."""
    agent = Agent(
        model=ScriptedModel(turns),
        tools=file_tools(workspace),
        auto_approve=True,
        workspace=workspace,
        delegate=delegate,
    )
    seen: list[ev.AgentEvent] = []
    prompts: list[ev.PermissionRequired] = []
    agent.on("*", seen.append)
    if answer is not None:

        def decide(event: ev.PermissionRequired) -> None:
            prompts.append(event)
            agent.resolve_permission(event.call_id, answer)  # type: ignore[arg-type]

        agent.on("permission_required", decide)
    await agent.run("go")
    return seen, prompts


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def results(seen: list[ev.AgentEvent], name: str) -> list[ev.ToolResult]:
    return [e for e in seen if isinstance(e, ev.ToolResult) and e.name == name]


# -- the one rule ---------------------------------------------------------------------------------


def test_what_is_a_control_file(workspace: Path) -> None:
    nested = ["sub/AGENTS.md", "sub/.mcp.json", "sub/skills/x/SKILL.md"]  # a notebook's folder in it
    for path in [*CONTROL, ".ipyagent", ".claude/skills/x/SKILL.md", "skills/x/sub/SKILL.md", *nested]:
        assert control_kind(workspace / path, workspace) is not None, path
    for path in ["notes.md", "agents.md", "mcp.json", "skills/readme.md", "data/SKILL.md"]:
        assert control_kind(workspace / path, workspace) is None, path
    assert control_kind(workspace.parent / ".mcp.json", workspace) is None  # not this workspace's


def test_a_link_to_a_control_file_is_the_control_file(workspace: Path) -> None:
    plant(workspace, "AGENTS.md")
    (workspace / "notes.md").symlink_to("AGENTS.md")
    assert control_kind(workspace / "notes.md", workspace) is not None


# -- the file tools, under auto-approve ------------------------------------------------------------


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("path", sorted(CONTROL))
async def test_a_write_to_a_control_file_is_asked_even_under_auto_approve(
    workspace: Path, route: str, path: str
) -> None:
    target = plant(workspace, path)
    _, prompts = await run(workspace, [ROUTES[route](path), "done"], answer="deny")
    (prompt,) = prompts
    assert path in prompt.warning and CONTROL[path] in prompt.warning
    assert "even under auto-approve" in prompt.warning
    assert target.read_text() == GOOD
    _seen, prompts = await run(workspace, [ROUTES[route](path), "done"], answer="allow")
    assert len(prompts) == 1
    assert "EVIL" in target.read_text()


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("path", sorted(CONTROL))
async def test_a_write_to_a_control_file_is_refused_when_nobody_can_answer(
    workspace: Path, route: str, path: str
) -> None:
    target = plant(workspace, path)
    seen, _ = await run(workspace, [ROUTES[route](path), "done"], answer=None)
    (result,) = results(seen, route)
    assert result.is_error
    assert "control file" in result.content and CONTROL[path] in result.content
    assert "nobody can answer" in result.content
    assert target.read_text() == GOOD


async def test_a_denial_tells_the_model_it_was_a_control_file(workspace: Path) -> None:
    seen, _ = await run(workspace, [ROUTES["write_file"](".mcp.json"), "done"], answer="deny")
    (result,) = results(seen, "write_file")
    assert result.is_error and "control file" in result.content and "will start" in result.content


async def test_creating_a_control_file_is_asked_too(workspace: Path) -> None:
    seen, _ = await run(workspace, [ROUTES["write_file"](".mcp.json"), "done"], answer=None)
    assert results(seen, "write_file")[0].is_error
    assert not (workspace / ".mcp.json").exists()


async def test_always_allowing_the_tool_does_not_cover_control_files(workspace: Path) -> None:
    plant(workspace, "AGENTS.md")
    turns = [ROUTES["write_file"]("notes.md"), ROUTES["write_file"]("AGENTS.md"), "done"]
    _seen, prompts = await run(workspace, turns, answer="always")
    assert [p.arguments["path"] for p in prompts] == ["AGENTS.md"]


async def test_ordinary_files_are_not_asked_about_under_auto_approve(workspace: Path) -> None:
    _seen, prompts = await run(workspace, [ROUTES["write_file"]("notes.md"), "done"], answer="deny")
    assert prompts == []
    assert (workspace / "notes.md").read_text() == "EVIL"


# -- a sub-agent's tools ---------------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["allow", None])
async def test_a_sub_agent_s_write_to_a_control_file_is_asked_or_refused(
    workspace: Path, answer: str | None
) -> None:
    turns = [
        [tool_call("delegate", {"task": "Write it.", "tools": ["write_file"]})],
        [ROUTES["write_file"](".mcp.json")],
        "done",
        "ok",
    ]
    seen, prompts = await run(workspace, turns, answer=answer, delegate=True)
    (result,) = results(seen, "write_file")
    if answer is None:
        assert result.is_error and "nobody can answer" in result.content
        assert not (workspace / ".mcp.json").exists()
    else:
        (prompt,) = prompts
        assert len(prompt.via) == 1 and "will start" in prompt.warning
        assert (workspace / ".mcp.json").read_text() == "EVIL"


# -- the shell ------------------------------------------------------------------------------------

STATE = sandbox.available()
needs_sandbox = pytest.mark.skipif(
    not (STATE and STATE.process_limit), reason=f"no OS sandbox for commands on this machine: {STATE}"
)


@needs_sandbox
@pytest.mark.parametrize("existing", [False, True])
async def test_a_shell_command_cannot_create_or_change_a_control_file(
    workspace: Path, existing: bool
) -> None:
    if existing:
        for path in CONTROL:
            plant(workspace, path)
    command = (
        "echo EVIL > .mcp.json; echo EVIL > AGENTS.md; mkdir -p .ipyagent skills/x; "
        "echo EVIL > .ipyagent/config.toml; echo EVIL > skills/x/SKILL.md; "
        "mv AGENTS.md gone.md; rm -rf .ipyagent; echo fine > out.txt; mkdir -p data; echo ok > data/f"
    )
    agent = Agent(
        model=ScriptedModel([tool_call("shell", {"command": command}), "done"]),
        tools=shell_tools(workspace),
        auto_approve=True,
        workspace=workspace,
    )
    result = await agent.run("go")
    block = result.messages[2].tool_results[0]
    if existing:
        for path in CONTROL:
            assert (workspace / path).read_text() == GOOD, path
    else:
        assert names(workspace) == ["data", "out.txt"]
    assert (workspace / "out.txt").read_text() == "fine\n"  # the rest of the workspace is writable
    assert (workspace / "data" / "f").read_text() == "ok\n"
    assert "control file" in block.content and "write_file" in block.content


def _write_mcp(text: str) -> str:
    Path(".mcp.json").write_text(text)
    return "wrote"


@needs_sandbox
async def test_a_sandboxed_tool_cannot_write_a_control_file(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workspace)  # a sandboxed tool's workspace is the current folder
    agent = Agent(
        model=ScriptedModel([tool_call("_write_mcp", {"text": "EVIL"}), "done"]),
        tools=[tool(_write_mcp, sandboxed=True)],
        auto_approve=True,
        workspace=workspace,
    )
    result = await agent.run("go")
    block = result.messages[2].tool_results[0]
    assert block.is_error and "Read-only file system" in block.content
    assert names(workspace) == []


@needs_sandbox
def test_in_a_kernel_a_yes_run_s_shell_cannot_plant_control_files(kernel: Kernel, jupyter_env: Path) -> None:
    """The issue's repro, run 1: ``%%agent -y --tools shell``, the command writes .mcp.json,
    AGENTS.md and .ipyagent/config.toml. None of them exists after; the model is told why."""
    command = (
        "echo EVIL > .mcp.json; echo EVIL > AGENTS.md; "
        "mkdir -p .ipyagent && echo EVIL > .ipyagent/config.toml; echo ok > out.txt"
    )
    kernel.run(
        "%load_ext ipyagent\nfrom ipyagent.testing import ScriptedModel, tool_call\n"
        f"m = ScriptedModel([[tool_call('shell', {{'command': {command!r}}})], 'Done.'])"
    )
    reply, outputs = kernel.run("%%agent -y -m m --tools shell -o r\nPlant them.")
    assert reply["status"] == "ok", text_of(outputs)
    _, outputs = kernel.run("print(r.messages[2].tool_results[0].content)")
    said = text_of(outputs)
    assert said.count("Read-only file system") == 3 and "control files are read-only" in said
    for name in (".mcp.json", "AGENTS.md", ".ipyagent"):
        assert not (jupyter_env / name).exists(), name
    assert (jupyter_env / "out.txt").read_text() == "ok\n"
