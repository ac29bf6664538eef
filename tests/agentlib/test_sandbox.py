"""The OS sandbox: each way out is tried and fails, the workspace stays intact, and where the
sandbox is off nothing runs at all."""

from __future__ import annotations

import marshal
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipyagent import Agent
from ipyagent.agentlib import sandbox
from ipyagent.agentlib.errors import UserError
from ipyagent.agentlib.sandbox import _confine
from ipyagent.agentlib.sandbox._policy import build_spec, read_paths
from ipyagent.agentlib.tools import RunContext, tool
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
    (folder / "keep.txt").write_text("precious\n")
    return folder.resolve()  # as the sandbox reports it (pwd)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder holding a secret (never the real one's contents)."""
    folder = tmp_path / "home"
    (folder / ".ssh").mkdir(parents=True)
    (folder / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (folder / "notes.txt").write_text("personal\n")
    monkeypatch.setenv("HOME", str(folder))
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


def intact(workspace: Path) -> bool:
    return (workspace / "keep.txt").read_text() == "precious\n"


async def sh(command: str, workspace: Path, **limits: object) -> sandbox.SandboxResult:
    return await sandbox.run(command, cwd=workspace, limits=sandbox.Limits(**limits))  # type: ignore[arg-type]


def leftovers(marker: str) -> list[int]:
    """Processes still running whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path("/proc", entry, "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


@needs_sandbox
async def test_a_command_runs_in_the_workspace_and_its_output_returns(workspace: Path) -> None:
    result = await sh("echo hello; pwd; echo made > new.txt; cat keep.txt", workspace)
    assert result.ok, result
    assert result.stdout.splitlines() == ["hello", str(workspace), "precious"]
    assert (workspace / "new.txt").read_text() == "made\n"


@needs_sandbox
async def test_writing_outside_the_workspace_fails(workspace: Path, outside: Path) -> None:
    (workspace / "link").symlink_to(outside)  # a way out that starts inside
    result = await sh(
        f"echo x > {outside}/direct.txt; echo x > link/through-link.txt; mkdir {outside}/dir; "
        f"mv keep.txt {outside}/moved.txt; cp keep.txt {outside}/copied.txt; echo done",
        workspace,
    )
    assert result.stdout == "done\n"
    assert "Permission denied" in result.stderr
    assert os.listdir(outside) == []
    assert intact(workspace)


@needs_sandbox
async def test_reading_a_file_under_the_home_folder_fails(workspace: Path, home: Path) -> None:
    result = await sh(f"cat {home}/notes.txt {home}/.ssh/id_ed25519; ls {home}", workspace)
    assert result.exit_code != 0
    assert "personal" not in result.stdout and "PRIVATE" not in result.stdout
    assert result.stderr.count("Permission denied") == 3
    assert intact(workspace)


@needs_sandbox
async def test_secrets_of_the_machine_and_of_the_kernel_stay_unreadable(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-the-sandbox")
    kernel = os.getpid()
    command = f"env; cat /proc/{kernel}/environ /proc/{kernel}/cmdline; cat /etc/shadow; ls /tmp"
    result = await sh(command, workspace)
    assert "sk-test" not in result.stdout and "OPENAI_API_KEY" not in result.stdout
    # The kernel's environment and command line: its process is not even visible.
    assert f"/proc/{kernel}/environ: No such file or directory" in result.stderr
    assert f"/proc/{kernel}/cmdline: No such file or directory" in result.stderr
    assert "/etc/shadow: Permission denied" in result.stderr
    assert "'/tmp': Permission denied" in result.stderr


#: A test server's port, the connections it accepted, and an event set on the first one.
Server = tuple[int, list[object], threading.Event]


@pytest.fixture
def server() -> Iterator[Server]:
    """A TCP server on 127.0.0.1 that records every connection it accepts."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted: list[object] = []
    arrived = threading.Event()  # set on the first connection accepted

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(conn)
            arrived.set()
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], accepted, arrived
    listener.close()
    thread.join(5)


@needs_sandbox
async def test_a_network_connection_fails(workspace: Path, server: Server) -> None:
    port, accepted, _ = server
    probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')"
    result = await sh(f'{PY} -c "{probe}"', workspace)
    assert result.exit_code != 0
    assert "connected" not in result.stdout
    # Landlock's TCP rule (ABI 4+) says EACCES; the empty network namespace alone, ENETUNREACH.
    assert "PermissionError" in result.stderr or "Network is unreachable" in result.stderr, result.stderr
    assert accepted == []
    # The same probe outside the sandbox does connect: the server was there to be reached.
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


@needs_sandbox
async def test_a_fork_bomb_is_bounded(workspace: Path) -> None:
    marker = "fork-bomb-marker"
    bomb = (
        "import os, time\n"
        "made = 0\n"
        "try:\n"
        "    while made < 5000:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60); os._exit(0)\n"
        "        made += 1\n"
        "except OSError as exc:\n"
        '    print("stopped", made, exc.errno)\n'
    )
    result = await sh(f"{PY} -c '{bomb}' {marker}", workspace, max_procs=20, timeout=120)
    assert result.reason == "exited", result
    word, made, errno = result.stdout.split()
    assert word == "stopped" and errno == "11"  # EAGAIN: no more processes
    # A user is held at max_procs; root, whom RLIMIT_NPROC never holds, at the PID namespace's
    # pid_max, which the kernel keeps at 301 or more.
    assert int(made) < (20 if os.geteuid() else 301)
    assert leftovers(marker) == []  # the first process ended: the kernel killed the rest
    assert intact(workspace)


@needs_sandbox
async def test_the_memory_limit_holds(workspace: Path) -> None:
    result = await sh(f"{PY} -c 'bytearray(2 << 30)'", workspace, memory=512 << 20)
    assert result.exit_code == 1
    assert "MemoryError" in result.stderr
    assert intact(workspace)


@needs_sandbox
async def test_running_past_the_timeout_is_killed_with_everything_it_started(workspace: Path) -> None:
    marker = "timeout-marker-sleep"
    result = await sh(f"(exec -a {marker} sleep 300) & echo started; sleep 300", workspace, timeout=1)
    assert result.reason == "timeout"
    assert result.stdout == "started\n"
    assert leftovers(marker) == []
    assert intact(workspace)


@needs_sandbox
async def test_output_is_bounded(workspace: Path) -> None:
    result = await sh("head -c 100000 /dev/zero | tr '\\0' x", workspace, output=1000)
    assert result.ok
    assert result.stdout == "x" * 1000
    assert result.truncated


@needs_sandbox
async def test_the_home_folder_is_never_the_workspace(home: Path, tmp_path: Path) -> None:
    for folder in (home, tmp_path):  # the home folder, and a folder that holds it
        with pytest.raises(sandbox.SandboxError, match="home folder") as caught:
            await sh("touch ran.txt", folder)
        assert caught.value.code == "sandbox_home_workspace"
        with pytest.raises(sandbox.SandboxError, match="home folder"):
            sandbox.call(double, (1,), cwd=folder)
    assert not (home / "ran.txt").exists() and not (tmp_path / "ran.txt").exists()


def test_reads_allow_the_python_under_home_but_never_home_itself(tmp_path: Path) -> None:
    home = tmp_path / "home"
    venv = home / ".venv"
    venv.mkdir(parents=True)
    allowed = read_paths(home=str(home), python_paths=[], library=[str(home), str(venv), "/", str(tmp_path)])
    assert str(venv.resolve()) in allowed
    assert str(home.resolve()) not in allowed
    assert "/" not in allowed and str(tmp_path.resolve()) not in allowed  # they hold the home folder
    assert "/etc/shadow" not in allowed and "/etc/passwd" in allowed


# -- a Python function in a forked, confined child -------------------------------------------------


def double(x: int) -> int:
    return 2 * x


@needs_sandbox
def test_a_function_runs_confined_and_its_value_returns(workspace: Path) -> None:
    assert sandbox.call(double, (21,), cwd=workspace) == 42


@needs_sandbox
def test_a_function_cannot_write_outside_and_its_error_returns(workspace: Path, outside: Path) -> None:
    def escape() -> None:
        (outside / "escaped.txt").write_text("x")

    with pytest.raises(PermissionError):
        sandbox.call(escape, cwd=workspace)
    assert os.listdir(outside) == []
    assert intact(workspace)


@needs_sandbox
def test_a_function_cannot_connect(workspace: Path, server: Server) -> None:
    port, accepted, _ = server

    def connect() -> None:
        socket.create_connection(("127.0.0.1", port), timeout=5)

    with pytest.raises(OSError, match=r"Permission denied|Network is unreachable"):
        sandbox.call(connect, cwd=workspace)
    assert accepted == []


@needs_sandbox
def test_a_function_cannot_use_a_connection_the_kernel_opened_before(workspace: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        kernel_side = socket.create_connection(listener.getsockname(), timeout=5)
        server_side, _ = listener.accept()

    def leak() -> None:
        kernel_side.sendall(b"leaked ")

    with pytest.raises(OSError, match="Socket operation on non-socket"):
        sandbox.call(leak, cwd=workspace)
    kernel_side.sendall(b"mine")  # the kernel's own descriptor is untouched
    kernel_side.close()
    with server_side:
        received = b"".join(iter(lambda: server_side.recv(100), b""))
    assert received == b"mine"


@needs_sandbox
def test_a_function_past_its_timeout_is_killed(workspace: Path) -> None:
    def forever() -> None:
        threading.Event().wait()

    with pytest.raises(sandbox.SandboxTimeout, match="time limit of 1 s"):
        sandbox.call(forever, cwd=workspace, limits=sandbox.Limits(timeout=1))


@needs_sandbox
def test_what_a_function_changes_stays_in_the_child(workspace: Path) -> None:
    seen: list[int] = []
    sandbox.call(seen.append, (1,), cwd=workspace)
    assert seen == []


# -- @tool(sandboxed=True), through an agent -------------------------------------------------------


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


@needs_sandbox
async def test_a_sandboxed_tool_writes_in_the_current_folder_only(
    workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workspace)

    def save(name: str, text: str) -> str:
        Path(name).write_text(text)
        return f"saved {name}"

    assert await run_tool(save, {"name": "out.txt", "text": "hi"}) == ("saved out.txt", False)
    assert (workspace / "out.txt").read_text() == "hi"
    content, is_error = await run_tool(save, {"name": str(outside / "x.txt"), "text": "hi"})
    assert is_error and "PermissionError" in content
    assert os.listdir(outside) == []


@needs_sandbox
async def test_a_sandboxed_tool_may_be_given_the_network(
    workspace: Path, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    port, accepted, _ = server
    monkeypatch.chdir(workspace)

    def fetch() -> str:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return "reached"

    agent = Agent(
        model=ScriptedModel([tool_call("fetch", {}), "done"]),
        tools=[tool(fetch, sandboxed=sandbox.Limits(network=True))],
        auto_approve=True,
    )
    result = await agent.run("go")
    assert result.messages[2].tool_results[0].content == "reached"
    assert server[2].wait(10) and len(accepted) == 1


def test_a_sandboxed_tool_cannot_ask_for_the_run_context() -> None:
    def needs_context(ctx: RunContext) -> str:
        return ""

    with pytest.raises(UserError, match="sandboxed"):
        tool(needs_context, sandboxed=True)


@pytest.fixture
def no_process_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine as root on Linux before 6.14: confined, but its processes cannot be limited."""
    state = sandbox.Availability(
        STATE.mechanism, "(root on Linux 6.1)", STATE.landlock_abi, process_limit=False
    )
    monkeypatch.setattr(sandbox, "_probed", state)


@needs_sandbox
async def test_without_a_process_limit_only_calls_that_start_none_run(
    workspace: Path, no_process_limit: None
) -> None:
    with pytest.raises(sandbox.SandboxUnavailable, match="cannot limit its processes"):
        await sh("touch ran.txt", workspace)
    with pytest.raises(sandbox.SandboxUnavailable, match="cannot limit its processes"):
        sandbox.call(double, (1,), cwd=workspace)
    assert not (workspace / "ran.txt").exists()
    assert sandbox.call(double, (21,), cwd=workspace, limits=sandbox.Limits(max_procs=None)) == 42


# -- refusal ----------------------------------------------------------------------------------------


async def test_with_the_sandbox_off_nothing_runs(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IPYAGENT_SANDBOX", "off")
    state = sandbox.available()
    assert not state and state.mechanism is None
    assert "IPYAGENT_SANDBOX" in str(state)
    with pytest.raises(sandbox.SandboxUnavailable, match="never run unconfined"):
        await sh("touch ran.txt", workspace)
    ran: list[int] = []
    with pytest.raises(sandbox.SandboxUnavailable):
        sandbox.call(ran.append, (1,), cwd=workspace)
    assert not (workspace / "ran.txt").exists()
    assert ran == []


async def test_with_the_sandbox_off_a_sandboxed_tool_is_refused(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IPYAGENT_SANDBOX", "off")
    monkeypatch.chdir(workspace)

    def save() -> str:
        Path("ran.txt").write_text("x")
        return "saved"

    content, is_error = await run_tool(save, {})
    assert is_error
    assert "Not run" in content and "IPYAGENT_SANDBOX" in content and "never run unconfined" in content
    assert not (workspace / "ran.txt").exists()


# -- as a user ----------------------------------------------------------------------------------------

AS_USER_BOMB = (
    "import os, socket, time\n"
    "try:\n"
    "    open('../outside/escaped.txt', 'w')\n"
    "    print('wrote outside')\n"
    "except OSError as exc:\n"
    "    print('write refused', exc.errno)\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', 9), timeout=5)\n"
    "except OSError as exc:\n"
    "    print('connect refused', exc.errno)\n"
    "made = 0\n"
    "try:\n"
    "    while made < 5000:\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(60); os._exit(0)\n"
    "        made += 1\n"
    "except OSError as exc:\n"
    "    print('stopped', made, exc.errno)\n"
)


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists("/usr/bin/python3"),
    reason="becoming another user needs root, setpriv and the system's python3",
)
@needs_sandbox
def test_as_a_user_the_same_confinement_holds_and_processes_stop_at_max_procs() -> None:
    """Root's CI runs the rest; this runs the launcher as ``nobody``, where RLIMIT_NPROC (not the
    PID namespace's pid_max) is what stops a fork bomb. The launcher is standard library only, so
    it is copied to where ``nobody`` can read it and run by the system's Python."""
    nobody = pwd.getpwnam("nobody")
    folder = Path(tempfile.mkdtemp(prefix="ipyagent-as-user-"))
    try:
        folder.chmod(0o755)
        launcher = folder / "confine.py"
        shutil.copy(_confine.__file__, launcher)
        workspace, outside = folder / "workspace", folder / "outside"
        workspace.mkdir()
        outside.mkdir(mode=0o777)
        outside.chmod(0o777)  # the file system would let nobody write here: only the sandbox stops it
        os.chown(workspace, nobody.pw_uid, nobody.pw_gid)
        spec = build_spec(str(workspace), str(workspace), sandbox.Limits(max_procs=10, timeout=60))
        spec["argv"] = ["/usr/bin/python3", "-c", AS_USER_BOMB]
        spec["env"] = {"PATH": "/usr/bin:/bin", "HOME": str(workspace)}
        become = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
        done = subprocess.run(
            [*become, "/usr/bin/python3", "-E", "-s", "-S", str(launcher), marshal.dumps(spec).hex()],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        lines = done.stdout.splitlines()
        # EACCES from Landlock's TCP rule (ABI 4+), or ENETUNREACH from the empty network namespace.
        assert lines[0] == "write refused 13", done
        assert lines[1] in ("connect refused 13", "connect refused 101"), done
        word, made, errno = lines[2].split()
        assert word == "stopped" and errno == "11" and int(made) < 10
        assert os.listdir(outside) == []
    finally:
        shutil.rmtree(folder)
