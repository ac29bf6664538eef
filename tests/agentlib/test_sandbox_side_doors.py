"""The sandbox's side doors, each tried and closed: Unix sockets of the host, a project root that
sys.path names, hard links to files outside the workspace, and many files each under the
per-file cap."""

from __future__ import annotations

import marshal
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipyagent import Agent
from ipyagent.agentlib import sandbox
from ipyagent.agentlib.sandbox import _confine
from ipyagent.agentlib.sandbox._policy import build_spec, read_paths
from ipyagent.agentlib.tools import tool
from ipyagent.kernel.tools.shell import shell_tools
from ipyagent.testing import ScriptedModel, tool_call

STATE = sandbox.available()
needs_sandbox = pytest.mark.skipif(
    not (STATE and STATE.process_limit), reason=f"no OS sandbox for commands on this machine: {STATE}"
)
PY = sys.executable


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder.resolve()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder.resolve()


async def run_tool(function: object, arguments: dict[str, object]) -> tuple[str, bool]:
    """One call of ``function`` made a sandboxed tool, by a scripted model: what the model reads."""
    agent = Agent(
        model=ScriptedModel([tool_call("work", arguments), "done"]),
        tools=[tool(function, name="work", sandboxed=True)],  # type: ignore[call-overload]
        auto_approve=True,
    )
    result = await agent.run("go")
    block = result.messages[2].tool_results[0]
    return block.content, block.is_error


async def run_shell(workspace: Path, command: str) -> str:
    """``command`` through the ``shell`` tool, as the model calls it: what the model reads."""
    agent = Agent(
        model=ScriptedModel([tool_call("shell", {"command": command}), "done"]),
        tools=shell_tools(workspace),
        auto_approve=True,
        workspace=workspace,
    )
    result = await agent.run("go")
    return result.messages[2].tool_results[0].content


# -- Unix sockets ---------------------------------------------------------------------------------

#: Where host services keep their sockets (the session bus, Docker, X11, ssh-agent, gpg-agent).
SOCKET_FOLDERS = ("/tmp", "/run", "/var/run", "/var/tmp", "/dev/shm")


class Listeners:
    """Listening pathname Unix sockets, one per folder; :meth:`reached` says which were
    connected to (a connection waits in the backlog until accepted, so nothing races)."""

    def __init__(self) -> None:
        self.sockets: dict[str, socket.socket] = {}
        self.folders: list[str] = []

    def listen(self, folder: str) -> str:
        # Short names: a socket's path holds at most 107 bytes, and pytest's folders are long.
        made = tempfile.mkdtemp(prefix="s", dir=folder)
        self.folders.append(made)
        path = os.path.join(made, "s")
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(path)
        os.chmod(made, 0o755)
        os.chmod(path, 0o777)  # any user may connect: only the sandbox stops it
        listener.listen()
        listener.setblocking(False)
        self.sockets[path] = listener
        return os.path.relpath(path) if folder == "." else path

    def reached(self) -> list[str]:
        out = []
        for path, listener in self.sockets.items():
            try:
                conn, _ = listener.accept()
            except BlockingIOError:
                continue
            conn.close()
            out.append(path)
        return out

    def close(self) -> None:
        for path, listener in self.sockets.items():
            listener.close()
            os.unlink(path)
        for folder in self.folders:
            os.rmdir(folder)


@pytest.fixture
def host_sockets(outside: Path) -> Iterator[Listeners]:
    """A listening socket in each of SOCKET_FOLDERS this user may write, and one in a folder of
    no special name outside the workspace."""
    listeners = Listeners()
    try:
        for folder in SOCKET_FOLDERS:
            if os.access(folder, os.W_OK | os.X_OK):
                listeners.listen(folder)
        listeners.listen(str(outside))
        yield listeners
    finally:
        listeners.close()


CONNECT = """
import socket, sys
for path in sys.argv[1:]:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        s.sendall(b"leaked")
        print("connected", path)
    except OSError as exc:
        print("refused", path, exc.errno)
"""


@needs_sandbox
async def test_a_shell_command_reaches_no_unix_socket_of_the_host(
    workspace: Path, host_sockets: Listeners
) -> None:
    (workspace / "connect.py").write_text(CONNECT)
    paths = list(host_sockets.sockets)
    assert len(paths) >= 2
    text = await run_shell(workspace, f"{PY} connect.py {' '.join(paths)}")
    assert "connected" not in text, text
    assert text.count("refused") == len(paths), text
    assert host_sockets.reached() == []
    # The same script outside the sandbox does connect: the listeners were there to be reached.
    assert unconfined(workspace / "connect.py", paths).count("connected") == len(paths)
    assert sorted(host_sockets.reached()) == sorted(paths)


def unconfined(script: Path, args: list[str]) -> str:
    return subprocess.run([PY, script, *args], capture_output=True, text=True, check=True).stdout


@needs_sandbox
async def test_a_sandboxed_tool_reaches_no_unix_socket_of_the_host(
    workspace: Path, host_sockets: Listeners, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workspace)
    paths = list(host_sockets.sockets)

    def send_out() -> str:
        said = []
        for path in paths:
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(path)
                    s.sendall(b"a kernel variable")
                said.append(f"connected {path}")
            except OSError as exc:
                said.append(f"refused {path} {exc.errno}")
        return "\n".join(said)

    content, is_error = await run_tool(send_out, {})
    assert not is_error, content
    assert "connected" not in content and content.count("refused") == len(paths), content
    assert host_sockets.reached() == []


@needs_sandbox
async def test_no_unix_socket_is_made_even_in_the_workspace_but_socketpair_works(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promised in docs/sandbox.md: ``socket(AF_UNIX)`` is refused everywhere (a listener in the
    workspace too); ``socketpair`` (pipes between the sandbox's own processes, asyncio) works."""
    listeners = Listeners()
    monkeypatch.chdir(workspace)
    inside = listeners.listen(".")  # relative: the sandbox runs in the workspace
    try:
        probe = (
            "import socket, asyncio\n"
            "a, b = socket.socketpair(); a.sendall(b'x'); print('pair', b.recv(1))\n"
            "asyncio.run(asyncio.sleep(0)); print('asyncio ok')\n"
            "for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):\n"
            "    try:\n"
            "        socket.socket(socket.AF_UNIX, kind); print('made')\n"
            "    except OSError as exc:\n"
            "        print('refused', exc.errno)\n"
        )
        (workspace / "probe.py").write_text(probe)
        (workspace / "connect.py").write_text(CONNECT)
        result = await sandbox.run(f"{PY} probe.py; {PY} connect.py {inside}", cwd=workspace)
        assert result.stdout.splitlines() == [
            "pair b'x'",
            "asyncio ok",
            "refused 13",
            "refused 13",
            f"refused {inside} 13",
        ], result
        assert listeners.reached() == []
    finally:
        listeners.close()


FAMILIES = """
import socket
for name, family, kind in [
    ("vsock", 40, socket.SOCK_STREAM),  # to the hypervisor and other VMs: not in any namespace
    ("packet", 17, socket.SOCK_RAW),
    ("xdp", 44, socket.SOCK_RAW),
    ("inet", 2, socket.SOCK_STREAM),
    ("inet6", 10, socket.SOCK_STREAM),
    ("netlink", 16, socket.SOCK_RAW),
]:
    try:
        socket.socket(family, kind).close()
        print(name, "made")
    except OSError as exc:
        print(name, "refused", exc.errno)
"""


@needs_sandbox
@pytest.mark.parametrize("network", [False, True])
async def test_only_network_sockets_are_made(workspace: Path, network: bool) -> None:
    """Sockets are made only of the families a network namespace holds (IP, and netlink to
    configure it); a vsock socket, which no namespace confines, is refused. Nothing connects."""
    limits = sandbox.Limits(network=network)
    result = await sandbox.run([PY, "-c", FAMILIES], cwd=workspace, limits=limits)
    assert result.stdout.splitlines() == [
        "vsock refused 97",
        "packet refused 97",
        "xdp refused 97",
        "inet made",
        "inet6 made",
        "netlink made",
    ], result


@needs_sandbox
async def test_io_uring_cannot_go_round_the_socket_rule(workspace: Path) -> None:
    """io_uring makes sockets without the socket() system call: it is refused."""
    probe = (
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.syscall(425, 4, bytes(120)), ctypes.get_errno())"  # io_uring_setup
    )
    result = await sandbox.run([PY, "-c", probe], cwd=workspace)
    assert result.stdout.split() == ["-1", "1"], result  # EPERM


# -- reads: the interpreter's own library folders, not a project root on sys.path ------------------


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An editable install's root on sys.path: a package beside a .env and a git config."""
    root = tmp_path / "project"
    (root / "mypkg").mkdir(parents=True)
    (root / "mypkg" / "__init__.py").write_text("VALUE = 42\n")
    (root / ".env").write_text("OPENAI_API_KEY=sk-from-the-project\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text('[remote "origin"]\n\turl = https://user:token@example.com/x\n')
    monkeypatch.syspath_prepend(str(root))
    return root.resolve()


def test_reads_grant_a_project_root_on_sys_path_only_its_packages(project: Path) -> None:
    allowed = read_paths(home="/nonexistent-home", python_paths=[str(project)])
    assert str(project) not in allowed
    assert str(project / "mypkg") in allowed
    assert not [p for p in allowed if p.startswith(f"{project}/.")]


@needs_sandbox
async def test_a_sandboxed_tool_cannot_read_a_project_root_on_sys_path(
    workspace: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workspace)

    def look() -> str:
        import importlib

        said = []
        for name in (".env", ".git/config"):
            try:
                said.append((project / name).read_text())
            except OSError as exc:
                said.append(f"refused {name} {exc.errno}")
        sys.modules.pop("mypkg", None)
        importlib.invalidate_caches()  # the finder lists the folder again, as a new process does
        said.append(f"mypkg {importlib.import_module('mypkg').VALUE}")
        # The standard library and site-packages stay readable: read their files, not only the
        # modules the fork already holds.
        import json

        import pydantic

        said.append(f"json {len(Path(json.__file__).read_text()) > 0}")
        said.append(f"pydantic {len(Path(pydantic.__file__).read_text()) > 0}")
        return "\n".join(said)

    content, is_error = await run_tool(look, {})
    assert not is_error, content
    assert content.splitlines() == [
        "refused .env 13",
        "refused .git/config 13",
        "mypkg 42",
        "json True",
        "pydantic True",
    ]


@needs_sandbox
async def test_a_shell_command_imports_the_standard_library_and_site_packages(
    workspace: Path, project: Path
) -> None:
    # The project's package imports in a new process too (an editable install's .pth puts its
    # root on sys.path), whose finder lists the root before it looks for the package.
    editable = f'import sys; sys.path.insert(0, "{project}"); import mypkg; print(mypkg.VALUE)'
    command = (
        f"{PY} -c 'import json, pydantic, email.mime.text; print(\"imported\")'; "
        f"{PY} -c '{editable}'; cat {project}/.env"
    )
    result = await sandbox.run(command, cwd=workspace)
    assert result.stdout == "imported\n42\n", result
    assert "sk-from-the-project" not in result.stdout and "Permission denied" in result.stderr


# -- hard links ------------------------------------------------------------------------------------


@pytest.fixture
def linked(workspace: Path, outside: Path) -> Path:
    """A file outside the workspace, hard-linked into it (as something outside could plant it)."""
    target = outside / "settings.txt"
    target.write_text("original\n")
    os.link(target, workspace / "settings.txt")
    return target


@needs_sandbox
async def test_a_shell_command_cannot_write_through_a_hard_link(workspace: Path, linked: Path) -> None:
    command = (
        "cat settings.txt; echo evil > settings.txt; echo more >> settings.txt; "
        "truncate -s 0 settings.txt; chmod 777 settings.txt; echo done"
    )
    result = await sandbox.run(command, cwd=workspace)
    assert result.stdout == "original\ndone\n", result
    assert "Read-only file system" in result.stderr
    assert unchanged(linked)


def unchanged(linked: Path) -> bool:
    return linked.read_text() == "original\n" and linked.stat().st_mode & 0o777 != 0o777


@needs_sandbox
async def test_a_sandboxed_tool_cannot_write_through_a_hard_link(
    workspace: Path, linked: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workspace)

    def overwrite() -> str:
        with open("settings.txt", "r+") as handle:
            handle.write("evil")
        return "written"

    content, is_error = await run_tool(overwrite, {})
    assert is_error and "Read-only file system" in content, content
    assert unchanged(linked)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
@needs_sandbox
async def test_a_hard_link_in_a_folder_the_sandbox_cannot_list_is_not_written_either(
    workspace: Path, outside: Path
) -> None:
    """A folder another user owns, that may be entered and written but not listed (0o703): the
    walk cannot see the link in it, so the whole folder is read-only."""
    target = outside / "settings.txt"
    target.write_text("original\n")
    hidden = workspace / "hidden"
    hidden.mkdir()
    os.link(target, hidden / "settings.txt")
    os.chown(hidden, 65534, 65534)
    hidden.chmod(0o703)
    result = await sandbox.run("echo evil > hidden/settings.txt; ls hidden; echo done", cwd=workspace)
    assert result.stdout == "done\n", result
    assert "Read-only file system" in result.stderr
    assert not_evil(target)


def not_evil(target: Path) -> bool:
    return target.read_text() == "original\n"


@needs_sandbox
async def test_files_with_one_link_stay_writable(workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "b.txt").write_text("b\n")
    result = await sandbox.run("echo x >> a.txt && echo y >> sub/b.txt && cat a.txt sub/b.txt", cwd=workspace)
    assert result.stdout == "a\nx\nb\ny\n", result


# -- the total written per call ----------------------------------------------------------------------

FILL = """
import os, sys
how, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
folder = os.environ["TMPDIR"] if how == "tmp" else "."
for i in range(count):
    fd = os.open(os.path.join(folder, f"fill-{i}"), os.O_WRONLY | os.O_CREAT, 0o644)
    if how in ("write", "tmp"):
        os.write(fd, b"x" * size)
    else:
        os.posix_fallocate(fd, 0, size)
    os.close(fd)
print("finished")
"""


def written(workspace: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in workspace.glob("fill-*"))


@needs_sandbox
@pytest.mark.parametrize("how", ["write", "fallocate"])
async def test_a_command_is_killed_past_the_total_written_per_call(workspace: Path, how: str) -> None:
    (workspace / "fill.py").write_text(FILL)
    # 64 files of 4 MiB, each far under the per-file cap; 256 MiB in all, the cap 16 MiB.
    limits = sandbox.Limits(write_total=16 << 20, timeout=120)
    result = await sandbox.run([PY, "fill.py", how, "64", str(4 << 20)], cwd=workspace, limits=limits)
    assert result.reason == "signal" and result.signal == "SIGXFSZ", result
    assert "finished" not in result.stdout
    assert written(workspace) < 128 << 20


@needs_sandbox
async def test_the_private_temporary_folder_counts_even_on_a_tmpfs(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where /tmp is a tmpfs (memory; the kernel's I/O accounting does not see it), the call's
    temporary folder still counts towards its total."""
    if not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable tmpfs at /dev/shm here")
    monkeypatch.setattr(tempfile, "tempdir", "/dev/shm")
    (workspace / "fill.py").write_text(FILL)
    limits = sandbox.Limits(write_total=16 << 20, timeout=120)
    result = await sandbox.run([PY, "fill.py", "tmp", "64", str(4 << 20)], cwd=workspace, limits=limits)
    assert "finished" not in result.stdout, result
    assert result.signal == "SIGXFSZ" or "No space left on device" in result.stderr, result
    assert not [p for p in os.listdir("/dev/shm") if p.startswith("ipyagent-sandbox-")]


@needs_sandbox
async def test_dev_shm_is_private_so_multiprocessing_works(workspace: Path) -> None:
    """POSIX semaphores live in /dev/shm: a private tmpfs there lets multiprocessing run, and
    nothing written there reaches the machine's /dev/shm."""
    probe = (
        "import multiprocessing as m, os\n"
        "print(m.get_context('fork').Pool(2).map(abs, [-1, -2]))\n"
        "open('/dev/shm/ipyagent-from-the-sandbox', 'w').write('x'); print(os.listdir('/dev/shm'))\n"
    )
    result = await sandbox.run([PY, "-c", probe], cwd=workspace)
    assert result.stdout.splitlines() == ["[1, 2]", "['ipyagent-from-the-sandbox']"], result
    assert "ipyagent-from-the-sandbox" not in os.listdir("/dev/shm")


@needs_sandbox
def test_a_sandboxed_function_is_killed_past_the_total_written_per_call(workspace: Path) -> None:
    def fill() -> str:
        for i in range(64):
            (workspace / f"fill-{i}").write_bytes(b"x" * (4 << 20))
        return "finished"

    limits = sandbox.Limits(write_total=16 << 20, timeout=120)
    with pytest.raises(sandbox.SandboxError, match="SIGXFSZ"):
        sandbox.call(fill, cwd=workspace, limits=limits)
    assert written(workspace) < 128 << 20


@needs_sandbox
async def test_writes_under_the_total_pass(workspace: Path) -> None:
    (workspace / "fill.py").write_text(FILL)
    limits = sandbox.Limits(write_total=64 << 20)
    result = await sandbox.run([PY, "fill.py", "write", "4", str(1 << 20)], cwd=workspace, limits=limits)
    assert result.ok and result.stdout == "finished\n", result


def test_an_architecture_without_a_filter_is_refused_not_run_open() -> None:
    with pytest.raises(_confine.ConfineError, match="no seccomp filter for this architecture"):
        _confine.seccomp_program("sparc64")
    assert len(_confine.seccomp_program("x86_64")) % 8 == 0


@needs_sandbox
def test_the_total_holds_where_the_sandbox_gets_no_proc_of_its_own(workspace: Path, tmp_path: Path) -> None:
    """Where /proc cannot be mounted (masked in many containers), the write counter picks the
    sandbox's processes out of the machine's by their PID namespace."""
    (workspace / "fill.py").write_text(FILL)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    spec = build_spec(str(workspace), str(tmp), sandbox.Limits(write_total=16 << 20, timeout=120))
    spec["read"] = [p for p in spec["read"] if p != "/proc"]
    spec["argv"] = [PY, "fill.py", "write", "64", str(4 << 20)]
    spec["env"] = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "TMPDIR": str(tmp)}
    launcher = [PY, "-E", "-s", "-S", _confine.__file__, marshal.dumps(spec).hex()]
    done = subprocess.run(launcher, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == -signal.SIGXFSZ, done
    assert "finished" not in done.stdout
    assert written(workspace) < 128 << 20
