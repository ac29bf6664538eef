"""The workspace file tools, driven through a real Agent so a refusal reaches the model as an
error result, exactly as users meet it."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from ipyagent import Agent
from ipyagent.agentlib.messages import ToolResultBlock
from ipyagent.kernel.tools.files import file_tools
from ipyagent.testing import ScriptedModel, tool_call


async def call(
    workspace: Path, name: str, arguments: dict[str, Any], *, auto_approve: bool = True
) -> ToolResultBlock:
    """One call of one file tool, made by a scripted model; the result the model reads."""
    agent = Agent(
        model=ScriptedModel([tool_call(name, arguments), "done"]),
        tools=file_tools(workspace),
        auto_approve=auto_approve,
        workspace=workspace,
    )
    result = await agent.run("go")
    return result.messages[2].tool_results[0]


def text(path: Path) -> str:
    return path.read_text()


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("import os\n\ndef main():\n    return 42\n")
    (root / "notes.txt").write_text("alpha\nbeta\ngamma\ndelta\n")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("password = hunter2\n")
    return secret


# -- confinement ---------------------------------------------------------------------------------


def escapes(workspace: Path, outside: Path) -> dict[str, str]:
    """Three ways out: ``..``, an absolute path elsewhere, and a symlink that points out."""
    os.symlink(outside, workspace / "link.txt")
    os.symlink(outside.parent, workspace / "linkdir", target_is_directory=True)
    return {
        "dotdot": "../secret.txt",
        "absolute": str(outside),
        "symlink": "link.txt",
        "symlinked folder": "linkdir/secret.txt",
    }


@pytest.mark.parametrize("way", ["dotdot", "absolute", "symlink", "symlinked folder"])
async def test_reading_outside_the_workspace_is_refused(workspace: Path, outside: Path, way: str) -> None:
    path = escapes(workspace, outside)[way]
    block = await call(workspace, "read_file", {"path": path})
    assert block.is_error
    assert "is outside the workspace" in block.content
    assert "hunter2" not in block.content


@pytest.mark.parametrize("way", ["dotdot", "absolute", "symlink", "symlinked folder"])
async def test_writing_outside_the_workspace_is_refused(workspace: Path, outside: Path, way: str) -> None:
    path = escapes(workspace, outside)[way]
    block = await call(workspace, "write_file", {"path": path, "content": "pwned"})
    assert block.is_error
    assert "is outside the workspace" in block.content
    assert text(outside) == "password = hunter2\n"
    block = await call(workspace, "edit_file", {"path": path, "old": "hunter2", "new": "x"})
    assert block.is_error
    assert "is outside the workspace" in block.content
    assert text(outside) == "password = hunter2\n"


@pytest.mark.parametrize("name", ["list_files", "search_files"])
async def test_listing_and_searching_outside_the_workspace_are_refused(
    workspace: Path, outside: Path, name: str
) -> None:
    arguments = {"path": ".."} if name == "list_files" else {"pattern": "hunter", "path": ".."}
    block = await call(workspace, name, arguments)
    assert block.is_error
    assert "is outside the workspace" in block.content


async def test_searching_does_not_follow_a_symlink_out_of_the_workspace(
    workspace: Path, outside: Path
) -> None:
    escapes(workspace, outside)
    block = await call(workspace, "search_files", {"pattern": "hunter2"})
    assert "hunter2" not in block.content


async def test_an_absolute_path_inside_the_workspace_is_fine(workspace: Path) -> None:
    block = await call(workspace, "read_file", {"path": str(workspace / "notes.txt")})
    assert not block.is_error
    assert "alpha" in block.content


# -- reading -------------------------------------------------------------------------------------


async def test_read_file_numbers_lines_and_honours_a_range(workspace: Path) -> None:
    block = await call(workspace, "read_file", {"path": "notes.txt"})
    assert block.content.splitlines() == ["     1  alpha", "     2  beta", "     3  gamma", "     4  delta"]
    block = await call(workspace, "read_file", {"path": "notes.txt", "start_line": 2, "end_line": 3})
    assert block.content.splitlines() == ["     2  beta", "     3  gamma"]


async def test_a_range_past_the_end_says_how_long_the_file_is(workspace: Path) -> None:
    block = await call(workspace, "read_file", {"path": "notes.txt", "start_line": 10})
    assert not block.is_error
    assert "the file has 4 lines" in block.content


async def test_binary_files_are_refused(workspace: Path) -> None:
    (workspace / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64))
    block = await call(workspace, "read_file", {"path": "plot.png"})
    assert block.is_error
    assert "binary file" in block.content


async def test_list_files_filters_by_pattern_and_skips_tool_folders(workspace: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config.txt").write_text("x")
    block = await call(workspace, "list_files", {"pattern": "*.py", "recursive": True})
    assert block.content.splitlines() == ["src/app.py  (37 bytes)"]
    block = await call(workspace, "list_files", {})
    assert "src/" in block.content.splitlines()
    assert ".git/" not in block.content


# -- searching -----------------------------------------------------------------------------------


async def test_search_by_regex_with_a_glob_skips_git_and_venv(workspace: Path) -> None:
    for folder in (".git", ".venv/lib"):
        (workspace / folder).mkdir(parents=True)
        (workspace / folder / "hidden.py").write_text("def main():\n")
    (workspace / "notes.md").write_text("def main(): in prose\n")
    block = await call(workspace, "search_files", {"pattern": r"^def \w+\(", "glob": "*.py"})
    assert block.content == "src/app.py:3: def main():"


async def test_search_reports_no_matches_plainly(workspace: Path) -> None:
    block = await call(workspace, "search_files", {"pattern": "nowhere to be found"})
    assert not block.is_error
    assert block.content == "(no matches)"


async def test_an_invalid_regex_is_a_clear_error(workspace: Path) -> None:
    block = await call(workspace, "search_files", {"pattern": "def (main"})
    assert block.is_error
    assert "invalid regular expression 'def (main'" in block.content
    assert "missing )" in block.content


# -- writing -------------------------------------------------------------------------------------


async def test_write_creates_a_file_and_its_folders(workspace: Path) -> None:
    block = await call(workspace, "write_file", {"path": "out/deep/report.md", "content": "# Report\n"})
    assert not block.is_error
    assert block.content == "Created out/deep/report.md (9 characters)."
    assert (workspace / "out" / "deep" / "report.md").read_text() == "# Report\n"


async def test_write_overwrites_atomically_leaving_no_temporary_files(workspace: Path) -> None:
    block = await call(workspace, "write_file", {"path": "notes.txt", "content": "replaced\r\n"})
    assert block.content == "Overwrote notes.txt (10 characters)."
    assert (workspace / "notes.txt").read_bytes() == b"replaced\r\n"  # newlines written as given
    assert names(workspace) == ["notes.txt", "src"]


async def test_overwriting_keeps_the_files_permission_bits(workspace: Path) -> None:
    script = workspace / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o750)
    await call(workspace, "write_file", {"path": "run.sh", "content": "echo new\n"})
    await call(workspace, "edit_file", {"path": "run.sh", "old": "new", "new": "newer"})
    assert script.read_text() == "echo newer\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750


async def test_a_created_file_gets_the_usual_permissions(workspace: Path) -> None:
    reference = workspace / "made_by_hand.txt"
    reference.write_text("x")  # what open() gives under this process's umask
    await call(workspace, "write_file", {"path": "made_by_agent.txt", "content": "x"})
    created = workspace / "made_by_agent.txt"
    assert stat.S_IMODE(created.stat().st_mode) == stat.S_IMODE(reference.stat().st_mode)


# -- editing -------------------------------------------------------------------------------------


async def test_edit_replaces_exact_text(workspace: Path) -> None:
    block = await call(workspace, "edit_file", {"path": "src/app.py", "old": "return 42", "new": "return 7"})
    assert block.content == "Replaced 1 occurrence(s) in src/app.py."
    assert (workspace / "src" / "app.py").read_text() == "import os\n\ndef main():\n    return 7\n"


async def test_edit_replaces_every_occurrence_when_the_count_is_expected(workspace: Path) -> None:
    (workspace / "t.txt").write_text("a-a-a")
    block = await call(workspace, "edit_file", {"path": "t.txt", "old": "a", "new": "b", "expected_count": 3})
    assert not block.is_error
    assert (workspace / "t.txt").read_text() == "b-b-b"


@pytest.mark.parametrize(("old", "expected_count", "found"), [("a", 1, 3), ("zzz", 1, 0), ("", 1, 0)])
async def test_edit_is_refused_and_the_file_unchanged_when_the_count_differs(
    workspace: Path, old: str, expected_count: int, found: int
) -> None:
    (workspace / "t.txt").write_text("a-a-a")
    arguments = {"path": "t.txt", "old": old, "new": "b", "expected_count": expected_count}
    block = await call(workspace, "edit_file", arguments)
    assert block.is_error
    assert f"found {found} occurrence(s) of the old text in t.txt, expected {expected_count}" in block.content
    assert "nothing was changed" in block.content
    assert (workspace / "t.txt").read_bytes() == b"a-a-a"


async def test_editing_a_missing_file_is_an_error_result(workspace: Path) -> None:
    block = await call(workspace, "edit_file", {"path": "nope.txt", "old": "a", "new": "b"})
    assert block.is_error
    assert "nope.txt" in block.content


# -- permissions ---------------------------------------------------------------------------------


def test_reads_are_read_only_and_writes_are_mutating(tmp_path: Path) -> None:
    flags = {t.name: t.read_only for t in file_tools(tmp_path)}
    assert flags == {
        "list_files": True,
        "read_file": True,
        "search_files": True,
        "write_file": False,
        "edit_file": False,
    }


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("write_file", {"path": "new.txt", "content": "x"}),
        ("edit_file", {"path": "notes.txt", "old": "alpha", "new": "omega"}),
    ],
)
async def test_a_headless_run_denies_writes(workspace: Path, name: str, arguments: dict[str, Any]) -> None:
    before = names(workspace)
    block = await call(workspace, name, arguments, auto_approve=False)
    assert block.is_error
    assert "needs the user's permission" in block.content
    assert names(workspace) == before
    assert (workspace / "notes.txt").read_text().startswith("alpha\n")


async def test_a_headless_run_still_reads(workspace: Path) -> None:
    block = await call(workspace, "read_file", {"path": "notes.txt"}, auto_approve=False)
    assert not block.is_error
    assert "alpha" in block.content
