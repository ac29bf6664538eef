"""The system prompt: deterministic, tools sorted, project context (AGENTS.md, skills) read safely."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sys
import threading
from pathlib import Path

import pytest

from ipyagent import Agent, tool
from ipyagent.agentlib.model import ToolSpec
from ipyagent.agentlib.project_context import load_project_context, parse_frontmatter
from ipyagent.agentlib.system_prompt import build_system_prompt
from ipyagent.testing import ScriptedModel, tool_call

DAY = dt.date(2025, 3, 14)
needs_symlinks = pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")


def spec(name: str, description: str) -> ToolSpec:
    return ToolSpec(name=name, description=description, parameters={"type": "object", "properties": {}})


def skill(root: Path, folder: str, frontmatter: str, body: str = "Do the thing.") -> Path:
    path = root / ".agents" / "skills" / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(f"---\n{frontmatter}\n---\n{body}\n")
    return path


def test_the_prompt_is_deterministic_and_lists_tools_sorted(tmp_path: Path) -> None:
    tools = [spec("zeta", "Last one.\n\nMore detail."), spec("alpha", "First one.")]
    one = build_system_prompt(tools, today=DAY, workspace=tmp_path)
    two = build_system_prompt(list(reversed(tools)), today=DAY, workspace=tmp_path)
    assert one == two
    assert "2025-03-14" in one and str(tmp_path) in one
    assert one.index("- alpha: First one.") < one.index("- zeta: Last one.")
    assert "More detail." not in one  # a tool's guidance is its first paragraph
    identity = one.index("You are ipyagent")
    assert identity < one.index("2025-03-14") < one.index(str(tmp_path)) < one.index("# Tools")
    assert "# Tools" not in build_system_prompt([], today=DAY)


def test_agents_md_comes_after_the_tools_as_lower_priority_context(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Use polars, not pandas.\n")
    project = load_project_context(tmp_path)
    prompt = build_system_prompt([spec("run", "Run code.")], today=DAY, workspace=tmp_path, project=project)
    assert "Use polars, not pandas." in prompt
    assert prompt.index("# Tools") < prompt.index("# Project context") < prompt.index("Use polars")
    assert "ranks below the instructions above" in prompt


def test_a_large_agents_md_is_cut_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("rule\n" * 20_000)
    project = load_project_context(tmp_path, max_file_bytes=1_000)
    assert project.agents_md is not None
    assert len(project.agents_md) < 1_200
    assert "[truncated: the first 1,000 of 100,000 bytes of AGENTS.md are shown]" in project.agents_md


@needs_symlinks
def test_symlinks_out_of_the_workspace_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secrets.md").write_text("TOP SECRET")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.symlink(outside / "secrets.md", workspace / "AGENTS.md")
    skills = workspace / "skills"
    skills.mkdir()
    sneaky = outside / "sneaky"
    sneaky.mkdir()
    (sneaky / "SKILL.md").write_text("---\nname: sneaky\ndescription: Leaks.\n---\nTOP SECRET\n")
    os.symlink(sneaky, skills / "sneaky")
    project = load_project_context(workspace)
    assert project.agents_md is None and project.skills == ()
    assert any("AGENTS.md was not read" in n for n in project.notes)
    assert "TOP SECRET" not in build_system_prompt([], project=project)
    # A symlink that stays inside the workspace is fine.
    (workspace / "docs.md").write_text("inside")
    (workspace / "AGENTS.md").unlink()
    os.symlink(workspace / "docs.md", workspace / "AGENTS.md")
    assert load_project_context(workspace).agents_md == "inside"


def test_frontmatter_parsing() -> None:
    meta, body = parse_frontmatter(
        '---\nname: "plots"\ndescription: >\n  Make figures\n  in house style.\n'
        "# a comment\nversion: 2\n---\nBody\n"
    )
    assert meta == {"name": "plots", "description": "Make figures in house style.", "version": "2"}
    assert body == "Body"
    assert parse_frontmatter("no fence\n---\n") == ({}, "no fence\n---\n")
    assert parse_frontmatter("---\nname: x\nnever closed") == ({}, "---\nname: x\nnever closed")


def test_the_skill_catalog_is_listed_and_broken_skills_are_skipped_with_a_note(tmp_path: Path) -> None:
    skill(tmp_path, "plots", "name: plots\ndescription: House style for figures.")
    skill(tmp_path, "nodesc", "name: nodesc")
    skill(tmp_path, "cleaning", "description: How we clean data.")  # the name defaults to the folder
    project = load_project_context(tmp_path)
    assert [(s.name, s.description) for s in project.skills] == [
        ("cleaning", "How we clean data."),
        ("plots", "House style for figures."),
    ]
    assert any("nodesc" in n and "no description" in n for n in project.notes)
    prompt = build_system_prompt([], project=project)
    assert "- plots: House style for figures." in prompt and "load_skill" in prompt


def test_the_total_cap_limits_the_catalog(tmp_path: Path) -> None:
    for i in range(30):
        skill(tmp_path, f"s{i:02}", f"name: s{i:02}\ndescription: {'word ' * 40}")
    project = load_project_context(tmp_path, max_total_bytes=2_000)
    assert 0 < len(project.skills) < 30
    assert any("more skill(s) not listed" in n for n in project.notes)


async def test_the_agent_offers_load_skill_and_it_returns_the_body(tmp_path: Path) -> None:
    folder = skill(tmp_path, "plots", "name: plots\ndescription: House style for figures.", "Use viridis.")
    (folder / "style.mplstyle").write_text("axes.grid: True\n")
    model = ScriptedModel(
        [[tool_call("load_skill", {"name": "plots"}), tool_call("load_skill", {"name": "nope"})], "ok"]
    )
    agent = Agent(model=model, workspace=tmp_path)
    result = await agent.run("make a plot")
    assert result.status == "completed"
    assert [t.name for t in model.requests[0].tools] == ["load_skill"]
    assert "- plots: House style for figures." in model.requests[0].system
    loaded, missing = result.messages[2].tool_results
    assert "Use viridis." in loaded.content and "name: plots" not in loaded.content
    assert ".agents/skills/plots/style.mplstyle" in loaded.content
    assert missing.is_error and "Available skills: plots" in missing.content


async def test_without_skills_there_is_no_load_skill_tool(tmp_path: Path) -> None:
    model = ScriptedModel(["ok"])
    await Agent(model=model, workspace=tmp_path).run("hi")
    assert list(model.requests[0].tools) == []
    assert "# Project context" not in model.requests[0].system
    assert f"Workspace: {tmp_path}" in model.requests[0].system


async def test_a_users_own_load_skill_tool_wins(tmp_path: Path) -> None:
    skill(tmp_path, "plots", "name: plots\ndescription: Figures.")

    @tool(name="load_skill", read_only=True)
    def mine(name: str) -> str:
        """My own loader."""
        return f"mine: {name}"

    model = ScriptedModel([tool_call("load_skill", {"name": "plots"}), "ok"])
    result = await Agent(model=model, tools=[mine], workspace=tmp_path).run("go")
    assert [t.description for t in model.requests[0].tools] == ["My own loader."]
    assert result.messages[2].tool_results[0].content == "mine: plots"


async def test_system_overrides_everything(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("project rules")
    skill(tmp_path, "plots", "name: plots\ndescription: Figures.")
    model = ScriptedModel(["ok"])
    await Agent(model=model, system="Just this.", workspace=tmp_path).run("hi")
    assert model.requests[0].system == "Just this."
    assert list(model.requests[0].tools) == []


async def test_agents_md_is_read_afresh_each_run(tmp_path: Path) -> None:
    model = ScriptedModel(["one", "two"])
    agent = Agent(model=model, workspace=tmp_path)
    await agent.run("a")
    (tmp_path / "AGENTS.md").write_text("new rule")
    await agent.run("b")
    assert "new rule" not in model.requests[0].system
    assert "new rule" in model.requests[1].system


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_agents_md_swapped_for_a_named_pipe_after_the_check_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agents_md = tmp_path / "AGENTS.md"
    agents_md.write_text("rules")
    is_file = Path.is_file

    def check_then_swap(self: Path) -> bool:
        found = is_file(self)
        if self.name == "AGENTS.md" and found:  # the window between the check and the open
            self.unlink()
            os.mkfifo(self)
        return found

    monkeypatch.setattr(Path, "is_file", check_then_swap)
    loaded: list[object] = []
    reader = threading.Thread(target=lambda: loaded.append(load_project_context(tmp_path)), daemon=True)
    reader.start()
    reader.join(10)
    try:
        assert loaded, "loading the project context blocked on a named pipe"
    finally:
        with contextlib.suppress(OSError):  # wake a reader blocked in open(), if any
            os.close(os.open(agents_md, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
