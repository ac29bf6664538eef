"""What the file tools must never do, whatever the model asks or the workspace holds: freeze the
kernel on a regular expression, block on a named pipe, hold a large file in memory, write the
agent's own files, hand over secrets unasked, follow a folder swapped for a link, or fail a whole
search on one odd entry. Real files in a temporary folder, driven through a real Agent."""

from __future__ import annotations

import errno
import os
import shutil
import tracemalloc
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import Kernel, text_of

from ipyagent import Agent
from ipyagent.agentlib.messages import ToolResultBlock
from ipyagent.kernel.magics import protected_files
from ipyagent.kernel.tools import files, kernel_tools
from ipyagent.kernel.tools.files import file_tools
from ipyagent.testing import ScriptedModel, tool_call


async def call(
    workspace: Path,
    name: str,
    arguments: dict[str, Any],
    *,
    protected: Mapping[Path, str] | None = None,
    search_seconds: float | None = None,
    tool_timeout: float = 120.0,
    answer: str | None = None,
) -> ToolResultBlock:
    """One call of one file tool; ``answer``: what the user says if the tool asks something."""
    agent = Agent(
        model=ScriptedModel([tool_call(name, arguments), "done"]),
        tools=file_tools(workspace, protected=protected, search_seconds=search_seconds),
        auto_approve=True,
        tool_timeout=tool_timeout,
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
    (root / "notes.txt").write_text("alpha\nbeta\n")
    return root


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def search_workers() -> list[int]:
    """Search processes this test process started that are still alive (Linux's /proc)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = next((line.split()[1] for line in status.splitlines() if line.startswith("PPid:")), "")
        if ppid == str(os.getpid()) and b"_search.py" in cmdline and "State:\tZ" not in status:
            alive.append(int(entry.name))
    return alive


# -- a regular expression cannot freeze the kernel -------------------------------------------------

CATASTROPHIC = r"(a+)+$"  # nested quantifiers: exponential backtracking on "aaaa…b"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="looks for the worker in /proc")
async def test_a_catastrophic_pattern_stops_at_the_time_limit_keeping_earlier_matches(
    workspace: Path,
) -> None:
    (workspace / "early.txt").write_text("aaaa\n")
    (workspace / "slow.txt").write_text("a" * 40 + "b\n")  # about 2**40 steps for `re`
    block = await call(workspace, "search_files", {"pattern": CATASTROPHIC}, search_seconds=1)
    assert not block.is_error
    assert block.content.splitlines()[0] == "early.txt:1: aaaa"
    assert "the search stopped at its time limit of 1 s" in block.content
    assert search_workers() == []  # killed, not left running
    block = await call(
        workspace, "search_files", {"pattern": CATASTROPHIC, "glob": "slow.txt"}, search_seconds=1
    )
    assert block.is_error
    assert "time limit of 1 s with no match found" in block.content
    assert "simplify the pattern" in block.content
    block = await call(workspace, "read_file", {"path": "notes.txt"})  # the kernel goes on
    assert "alpha" in block.content


async def test_a_search_cancelled_by_the_tool_timeout_kills_its_worker(workspace: Path) -> None:
    (workspace / "slow.txt").write_text("a" * 40 + "b\n")
    block = await call(workspace, "search_files", {"pattern": CATASTROPHIC}, tool_timeout=0.5)
    assert block.is_error
    assert "timed out" in block.content
    assert search_workers() == []


# -- named pipes and other files that are not regular ---------------------------------------------


def unblock_readers(fifo: Path) -> None:
    """Wake any thread blocked opening ``fifo`` for reading (it then reads end-of-file)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # ENXIO: nobody is waiting
            raise


async def test_a_named_pipe_is_refused_at_once_and_does_not_stop_other_files(workspace: Path) -> None:
    fifo = workspace / "pipe"
    os.mkfifo(fifo)
    try:
        block = await call(workspace, "read_file", {"path": "pipe"}, tool_timeout=2)
        assert block.is_error
        assert "'pipe' is not a regular file (a named pipe)" in block.content
        block = await call(workspace, "search_files", {"pattern": "alpha"}, tool_timeout=2)
        assert block.content == "notes.txt:1: alpha"
        block = await call(workspace, "edit_file", {"path": "pipe", "old": "a", "new": "b"}, tool_timeout=2)
        assert "not a regular file" in block.content
        block = await call(workspace, "write_file", {"path": "pipe", "content": "x"}, tool_timeout=2)
        assert "is a named pipe; only regular files are written" in block.content
        block = await call(workspace, "list_files", {})
        assert "pipe  (a named pipe; not readable by the file tools)" in block.content
    finally:
        unblock_readers(fifo)


# -- bounded reading ------------------------------------------------------------------------------


async def test_reading_a_few_lines_of_a_large_file_holds_little_memory(workspace: Path) -> None:
    (workspace / "big.log").write_text(("x" * 99 + "\n") * 400_000)  # 40 MB
    tracemalloc.start()
    try:
        block = await call(workspace, "read_file", {"path": "big.log", "start_line": 2, "end_line": 3})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert block.content == f"     2  {'x' * 99}\n     3  {'x' * 99}"
    assert peak < 8_000_000


async def test_a_long_read_says_how_many_lines_there_are_and_a_huge_line_is_cut(workspace: Path) -> None:
    (workspace / "many.txt").write_text("".join(f"line {n}\n" for n in range(1, 20_001)))
    block = await call(workspace, "read_file", {"path": "many.txt"})
    last = block.content.splitlines()[-1]
    assert last.startswith("… (stopped at line ") and " of 20000; ask for start_line=" in last
    (workspace / "min.js").write_text("y" * 100_000 + "\nnext\n")
    block = await call(workspace, "read_file", {"path": "min.js"})
    first, second = block.content.splitlines()
    assert first.endswith("… (line cut at 20,000 bytes)") and len(first) < 20_100
    assert second == "     2  next"


# -- the agent's own files are off limits ---------------------------------------------------------


@pytest.mark.parametrize("name", ["write_file", "edit_file"])
@pytest.mark.parametrize("way", ["path", "symlink", "hard link"])
async def test_protected_files_are_never_written(workspace: Path, name: str, way: str) -> None:
    session = workspace / "analysis.agent.jsonl"
    session.write_text('{"turn": 1}\n')
    if way == "symlink":
        (workspace / "alias").symlink_to(session)
    elif way == "hard link":
        os.link(session, workspace / "alias")
    path = "analysis.agent.jsonl" if way == "path" else "alias"
    protected = {session: "the file this conversation is saved in"}
    arguments = (
        {"path": path, "content": "{}"} if name == "write_file" else {"path": path, "old": "1", "new": "2"}
    )
    block = await call(workspace, name, arguments, protected=protected)
    assert block.is_error
    assert "is off limits to the file tools: it is the file this conversation is saved in" in block.content
    assert "Nothing was written" in block.content
    assert session.read_text() == '{"turn": 1}\n'
    assert not (workspace / "alias").exists() or (workspace / "alias").read_text() == '{"turn": 1}\n'
    block = await call(workspace, "read_file", {"path": path}, protected=protected)
    assert not block.is_error  # reading it is fine


def test_the_kernel_protects_its_sessions_its_cassette_and_a_headless_notebook(tmp_path: Path) -> None:
    notebook = tmp_path / "analysis.ipynb"
    sessions = [tmp_path / "analysis.agent.jsonl", tmp_path / "analysis.eda.agent.jsonl"]
    cassette = tmp_path / "analysis.cassette.jsonl"
    found = protected_files(sessions=sessions, cassette=cassette, notebook=notebook, headless=True)
    assert set(found) == {*sessions, cassette, notebook}
    assert "conversation" in found[sessions[0]] and "cassette" in found[cassette]
    assert "headless" in found[notebook]
    interactive = protected_files(sessions=sessions[:1], cassette=None, notebook=notebook, headless=False)
    assert set(interactive) == {sessions[0]}


async def test_kernel_tools_pass_the_protected_files_to_the_file_tools(tmp_path: Path) -> None:
    notebook = tmp_path / "analysis.ipynb"
    notebook.write_text("{}")
    tools = kernel_tools(
        ["files"],
        shell=None,
        main=None,  # type: ignore[arg-type]
        workspace=tmp_path,
        notebook=notebook,
        protected=protected_files(sessions=[], cassette=None, notebook=notebook, headless=True),
    )
    agent = Agent(
        model=ScriptedModel([tool_call("write_file", {"path": "analysis.ipynb", "content": "x"}), "ok"]),
        tools=tools,
        auto_approve=True,
    )
    result = await agent.run("go")
    assert "off limits" in result.messages[2].tool_results[0].content
    assert notebook.read_text() == "{}"


# -- secrets --------------------------------------------------------------------------------------

SECRET_FILES = [
    ".env",
    ".env.local",
    "id_rsa",
    "id_ed25519.pub",
    "server.pem",
    "tls.key",
    ".netrc",
    ".pgpass",
    ".git-credentials",
    ".aws/credentials",
    ".ssh/config",
    "credentials.json",
]


@pytest.mark.parametrize("name", SECRET_FILES)
async def test_reading_a_secrets_file_asks_and_is_refused_when_nobody_answers(
    workspace: Path, name: str
) -> None:
    secret = workspace / name
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("TOKEN=sk-live-123\n")
    block = await call(workspace, "read_file", {"path": name})
    assert block.is_error
    assert "holds secrets by convention, so reading it needs the user's consent" in block.content
    assert "sk-live-123" not in block.content


async def test_the_user_decides_whether_a_secrets_file_is_read(workspace: Path) -> None:
    (workspace / ".env").write_text("TOKEN=sk-live-123\n")
    block = await call(workspace, "read_file", {"path": ".env"}, answer="Allow once")
    assert block.content == "     1  TOKEN=sk-live-123"
    block = await call(workspace, "read_file", {"path": ".env"}, answer="Deny")
    assert block.is_error
    assert "The user declined to let you read '.env'" in block.content


async def test_search_skips_secrets_files_and_says_how_many(workspace: Path) -> None:
    for name in (".env", "deploy/id_rsa", ".env.example"):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text("TOKEN=sk-live-123\n")
    block = await call(workspace, "search_files", {"pattern": "sk-live"})
    assert block.content.splitlines() == [
        ".env.example:1: TOKEN=sk-live-123",  # an example file holds no secret
        "… (skipped 2 file(s) that hold secrets by convention, such as .env or private keys; "
        "read_file asks the user before reading one)",
    ]


# -- a folder swapped for a link between the check and the write ---------------------------------


@pytest.fixture
def swap_after_check(workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``ws/sub`` is a real folder when the path is checked, and a link to a folder outside the
    workspace right after: the window a concurrent process could use."""
    (workspace / "sub").mkdir()
    (workspace / "sub" / "f.txt").write_text("inside\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "f.txt").write_text("outside secret\n")
    check = files.resolve_inside

    def check_then_swap(root: Path, path: str) -> Path:
        target = check(root, path)
        if not (workspace / "sub").is_symlink():
            (workspace / "sub").rename(workspace / "sub-was")
            (workspace / "sub").symlink_to(elsewhere, target_is_directory=True)
        return target

    monkeypatch.setattr(files, "resolve_inside", check_then_swap)
    return elsewhere


async def test_a_write_does_not_follow_a_folder_swapped_after_the_check(
    workspace: Path, swap_after_check: Path
) -> None:
    block = await call(workspace, "write_file", {"path": "sub/new.txt", "content": "pwned"})
    assert block.is_error
    assert "sub changed while it was being opened" in block.content
    assert names(swap_after_check) == ["f.txt"]


async def test_an_edit_or_read_does_not_follow_a_folder_swapped_after_the_check(
    workspace: Path, swap_after_check: Path
) -> None:
    block = await call(workspace, "edit_file", {"path": "sub/f.txt", "old": "secret", "new": "pwned"})
    assert "changed while it was being opened" in block.content
    assert (swap_after_check / "f.txt").read_text() == "outside secret\n"
    (workspace / "sub").unlink()
    (workspace / "sub-was").rename(workspace / "sub")
    block = await call(workspace, "read_file", {"path": "sub/f.txt"})
    assert "changed while it was being opened" in block.content
    assert "outside secret" not in block.content


# -- one odd entry does not fail a whole search ---------------------------------------------------


async def test_a_dangling_link_is_skipped_by_search_and_named_by_list(workspace: Path) -> None:
    (workspace / "dangling.txt").symlink_to(workspace / "gone.txt")
    block = await call(workspace, "search_files", {"pattern": "alpha"})
    assert block.content == "notes.txt:1: alpha"
    block = await call(workspace, "list_files", {})
    assert "dangling.txt  (broken link)" in block.content


@pytest.fixture
def deep_tree(workspace: Path) -> Iterator[Path]:
    """``ws/d/d/…/d`` 1,100 levels down, deeper than Python's recursion limit. Taken apart
    afterwards one level at a time: pytest's own clean-up (``shutil.rmtree``) recurses."""
    yield workspace
    while (workspace / "d" / "d").is_dir():
        os.rename(workspace / "d" / "d", workspace / "d-next")
        shutil.rmtree(workspace / "d")
        os.rename(workspace / "d-next", workspace / "d")


def make_deep(workspace: Path) -> None:
    fd = os.open(workspace, os.O_RDONLY)
    for _ in range(1100):  # deeper than Python's recursion limit
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    note = os.open("needle.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(note, b"needle\n")
    os.close(note)
    os.close(fd)


async def test_a_very_deep_tree_is_walked_without_recursion_errors(deep_tree: Path) -> None:
    workspace = deep_tree
    make_deep(workspace)
    (workspace / "d" / "near.txt").write_text("needle near\n")
    block = await call(workspace, "search_files", {"pattern": "needle"})
    assert not block.is_error
    assert block.content.splitlines() == [
        "d/near.txt:1: needle near",
        "… (folders more than 64 levels down were not searched)",
    ]
    block = await call(workspace, "list_files", {"recursive": True, "pattern": "*.txt"})
    assert not block.is_error
    assert "d/near.txt" in block.content
    assert "folders more than 64 levels down are not listed" in block.content
    block = await call(workspace, "read_file", {"path": "d/" * 1100 + "needle.txt"})
    assert block.content == "     1  needle"


# -- in a real kernel ----------------------------------------------------------------------------


def test_in_a_kernel_a_search_stops_in_time_and_the_session_file_is_off_limits(kernel: Kernel) -> None:
    kernel.run(
        "%load_ext ipyagent\n"
        "from pathlib import Path\n"
        "from ipyagent.testing import ScriptedModel, tool_call\n"
        "Path('slow.txt').write_text('a' * 40 + 'b\\n')\n"
        "import ipyagent.kernel.tools.files as file_tools_module\n"
        "file_tools_module.SEARCH_SECONDS = 2\n"
        "m = ScriptedModel([[tool_call('search_files', {'pattern': '(a+)+$'}), "
        "tool_call('write_file', {'path': 'ipyagent.agent.jsonl', 'content': '{}'})], 'done'])"
    )
    reply, outputs = kernel.run("%%agent -y -m m --tools files\nsearch", timeout=120)
    assert reply["status"] == "ok", reply
    _, outputs = kernel.run(
        "for block in m.requests[1].messages[-1].tool_results: print(block.content.splitlines()[0])\n"
        "print('done' in Path('ipyagent.agent.jsonl').read_text())"
    )
    search, write, kept = text_of(outputs).strip().splitlines()
    assert "The search stopped at its time limit of 2 s with no match found" in search
    assert "'ipyagent.agent.jsonl' is off limits to the file tools: it is the file a conversation" in write
    assert kept == "True"


def test_concurrent_edits_of_one_file_are_all_kept(workspace: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    target = workspace / "lines.txt"
    target.write_text("".join(f"line {i}\n" for i in range(30)))
    edit = {t.name: t.function for t in file_tools(workspace)}["edit_file"]

    def change(i: int) -> Any:
        return edit(path="lines.txt", old=f"line {i}\n", new=f"LINE {i}\n")

    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(change, range(30)))
    assert all("Replaced 1" in str(r) for r in replies), replies
    assert target.read_text() == "".join(f"LINE {i}\n" for i in range(30))
