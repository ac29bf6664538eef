"""%%agent --tools ...,delegate in a real kernel: a sub-agent does part of the work, with the
kernel's tools, saved beside the notebook, and no more allowed than its parent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Kernel, text_of

SETUP = """
%load_ext ipyagent
from ipyagent.testing import ScriptedModel, text, tool_call
"""


def test_a_cell_delegates_and_the_child_s_conversation_sits_beside_the_notebook(jupyter_env: Path) -> None:
    notebook = jupyter_env / "analysis.ipynb"
    notebook.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(notebook)})
    try:
        kernel.run(
            SETUP
            + "sales = [3, 5]\n"
            + "m = ScriptedModel([\n"
            + "    [tool_call('delegate', {'task': 'Describe `sales`.', 'tools': ['describe_variable']})],\n"
            + "    [tool_call('describe_variable', {'name': 'sales'})],\n"
            + "    'sales is a list of 2 ints.',\n"
            + "    'The sub-agent says: a list of 2 ints.',\n"
            + "])"
        )
        reply, outputs = kernel.run("%%agent -m m --tools python,delegate\nWhat is sales?")
        assert reply["status"] == "ok", reply
        shown = text_of(outputs)
        assert '→ delegate(task="Describe `sales`.", tools=["describe_variable"]) ✓' in shown
        assert '\n  → describe_variable(name="sales") ✓' in shown
        assert "The sub-agent says: a list of 2 ints." in shown
        _, outputs = kernel.run(
            "print(sorted(t.name for t in m.requests[0].tools))\n"
            "print(sorted(t.name for t in m.requests[1].tools))\n"
            "print(m.requests[3].messages[-1].tool_results[0].content)"
        )
        lines = text_of(outputs).strip().splitlines()
        assert "delegate" in lines[0] and "run_python" in lines[0]
        assert lines[1] == "['describe_variable']"
        assert lines[2] == "sales is a list of 2 ints."

        child = jupyter_env / "analysis.agent.delegate-1.jsonl"
        header = json.loads(child.read_text().splitlines()[0])
        assert header["parent"]["file"] == "analysis.agent.jsonl"
        assert header["notebook"] == str(notebook)
        records = [
            json.loads(line) for line in (jupyter_env / "analysis.agent.jsonl").read_text().splitlines()
        ]
        assert [r["file"] for r in records if r["type"] == "subagent"] == [child.name]
        # A sub-agent's file is not a conversation of the notebook's own.
        _, outputs = kernel.run("%agent session list")
        assert "delegate-1" not in text_of(outputs)
        # Without the widget, each finished block is an output: the card's sums its sub-agent up.
        kernel.run("%config AgentMagics.widgets = False\n" + "m = ScriptedModel(m.turns[:4])")
        reply, outputs = kernel.run("%%agent -m m --tools python,delegate --new\nWhat is sales?")
        assert reply["status"] == "ok", reply
        card = [o for o in outputs if "→ delegate(" in o.get("data", {}).get("text/plain", "")]
        assert [o["data"]["text/plain"] for o in card] == [
            '→ delegate(task="Describe `sales`.", tools=["describe_variable"]) ✓\n'
            '  → describe_variable(name="sales") ✓'
        ]
        assert (jupyter_env / "analysis.agent.delegate-2.jsonl").exists()
        kernel.run("%config AgentMagics.widgets = True")
        # The kernel's settings for sub-agents: one more level, fewer turns.
        kernel.run(
            "%config AgentMagics.delegate_depth = 2\n%config AgentMagics.delegate_max_turns = 1\n"
            "m3 = ScriptedModel([[tool_call('delegate', {'task': 'loop', "
            "'tools': ['list_variables', 'delegate']})], [tool_call('list_variables')], 'never', 'ok'])"
        )
        kernel.run("%%agent -m m3 --tools python,delegate\nloop")
        _, outputs = kernel.run(
            "print(sorted(t.name for t in m3.requests[1].tools))\n"
            "print(m3.requests[2].messages[-1].tool_results[0].content[:45])"
        )
        assert text_of(outputs).strip().splitlines() == [
            "['delegate', 'list_variables']",
            "The sub-agent stopped before it finished: Sto",
        ]
        # Without `delegate` in --tools, nothing is delegated.
        kernel.run("m2 = ScriptedModel(['plain'])")
        kernel.run("%%agent -m m2 --tools python\nhello")
        _, outputs = kernel.run("print('delegate' in [t.name for t in m2.requests[0].tools])")
        assert text_of(outputs).strip() == "False"
    finally:
        kernel.close()


def test_a_sub_agent_asks_like_its_parent_headless_denied_and_with_yes_allowed(kernel: Kernel) -> None:
    turns = (
        "[tool_call('delegate', {'task': 'Set x.', 'tools': ['run_python']})],"
        " [tool_call('run_python', {'code': 'x = 41 + 1'})], 'done', 'ok'"
    )
    kernel.run(SETUP + f"m = ScriptedModel([{turns}])")
    # No front end shows the cell: the child's permission prompt is denied, as its parent's would be.
    reply, outputs = kernel.run("%%agent -m m --tools python,delegate\nset x")
    assert reply["status"] == "ok", reply
    shown = text_of(outputs)
    assert "  → run_python(" in shown
    _, outputs = kernel.run("print('x' in dir(), m.requests[2].messages[-1].tool_results[0].content[:7])")
    assert text_of(outputs).strip() == "False Denied:"
    # With --yes the parent may change things, and so may its child: in the user's namespace.
    kernel.run(f"m = ScriptedModel([{turns}])")
    reply, _ = kernel.run("%%agent -y -m m --tools python,delegate\nset x")
    assert reply["status"] == "ok", reply
    _, outputs = kernel.run("print(x)")
    assert text_of(outputs).strip() == "42"
    # --read-only: the child is refused even with --yes.
    kernel.run("del x\n" + f"m = ScriptedModel([{turns}])")
    reply, _ = kernel.run("%%agent -y --read-only -m m --tools python,delegate\nset x")
    _, outputs = kernel.run(
        "print('x' in dir(), 'can_write=False' in m.requests[2].messages[-1].tool_results[0].content)"
    )
    assert text_of(outputs).strip() == "False True"


def test_a_terminal_shows_the_sub_agent_s_calls_indented(capsys: pytest.CaptureFixture[str]) -> None:
    from ipyagent import Agent, tool
    from ipyagent.kernel.render import TerminalRenderer
    from ipyagent.testing import ScriptedModel, text, tool_call

    @tool(read_only=True)
    def lookup(key: str) -> str:
        """Look a key up."""
        return key.upper()

    model = ScriptedModel(
        [
            [tool_call("delegate", {"task": "Look up a.", "tools": ["lookup"]})],
            [text("Child text."), tool_call("lookup", {"key": "a"})],
            "A",
            "Parent: A.",
        ]
    )
    agent = Agent(model=model, tools=[lookup], delegate=True)
    renderer = TerminalRenderer()
    agent.on("*", renderer.handle)
    agent.run_sync("go")
    assert capsys.readouterr().out == (
        '→ delegate(task="Look up a.", tools=["lookup"]) …\n'
        '  → lookup(key="a") ✓\n'
        '→ delegate(task="Look up a.", tools=["lookup"]) ✓\n'
        "Parent: A.\n"
    )


def test_a_delegating_cell_recorded_replays_in_a_kernel_with_no_model(jupyter_env: Path) -> None:
    notebook = jupyter_env / "analysis.ipynb"
    where = {"JPY_SESSION_NAME": str(notebook)}
    cell = "%%agent --tools python,delegate -o res\nWhat is sales?"
    summary = "print(res.status, repr(res.text), [r.content for m in res.messages for r in m.tool_results])"
    recorder = Kernel(jupyter_env, env={**where, "IPYAGENT_REPLAY": "record"})
    try:
        recorder.run(
            SETUP
            + "sales = [3, 5]\n"
            + "m = ScriptedModel([\n"
            + "    [tool_call('delegate', {'task': 'Describe `sales`.', 'tools': ['describe_variable']})],\n"
            + "    [tool_call('describe_variable', {'name': 'sales'})],\n"
            + "    'a list of 2 ints', 'sales is a list of 2 ints.'])\n"
            + "%agent model m"
        )
        reply, outputs = recorder.run(cell)
        assert reply["status"] == "ok", text_of(outputs)
        _, outputs = recorder.run(summary)
        recorded = text_of(outputs).strip()
        assert recorded == "completed 'sales is a list of 2 ints.' ['a list of 2 ints']"
    finally:
        recorder.close()
    player = Kernel(jupyter_env, env={**where, "IPYAGENT_REPLAY": "replay"})
    try:
        player.run("%load_ext ipyagent\nsales = [3, 5]")  # no model, no key: only the cassette
        reply, outputs = player.run(cell)
        assert reply["status"] == "ok", text_of(outputs)
        assert '  → describe_variable(name="sales") ✓' in text_of(outputs)
        _, outputs = player.run(summary)
        assert text_of(outputs).strip() == recorded
        _, outputs = player.run("%agent cassette")
        assert "(4 of 4 request(s) served)" in text_of(outputs)
    finally:
        player.close()


async def test_a_sub_agent_s_session_file_is_off_limits_to_the_file_tools(tmp_path: Path) -> None:
    from ipyagent import Agent
    from ipyagent.agentlib.sessions import Session, read_session
    from ipyagent.kernel.magics import WithSubagentFiles, protected_files
    from ipyagent.kernel.tools import kernel_tools
    from ipyagent.testing import ScriptedModel, tool_call

    parent_file = tmp_path / "a.agent.jsonl"
    session = Session.open(parent_file)
    found = protected_files(sessions=[parent_file], cassette=None, notebook=None, headless=False)
    protected = WithSubagentFiles(found, [session])
    assert set(protected) == {parent_file}  # no sub-agent yet
    tools = kernel_tools(
        ["files"],
        shell=None,
        main=None,  # type: ignore[arg-type]
        workspace=tmp_path,
        notebook=None,
        protected=protected,
    )
    overwrite = tool_call("write_file", {"path": "a.agent.delegate-1.jsonl", "content": "{}"})
    model = ScriptedModel(
        [[tool_call("delegate", {"task": "w", "tools": ["write_file"]})], [overwrite], "no", "ok"]
    )
    agent = Agent(model=model, tools=tools, delegate=True, session=session, auto_approve=True)
    refusals: list[str] = []
    agent.on("tool_result", lambda e: refusals.append(e.content) if e.via else None)
    await agent.run("go")
    agent.close()

    child = tmp_path / "a.agent.delegate-1.jsonl"
    assert child in set(protected)  # it appeared as the sub-agent started
    (refusal,) = refusals
    assert "off limits" in refusal and "a sub-agent of this kernel's conversation" in refusal
    assert [m.role for m in read_session(child).messages] == ["user", "assistant", "user", "assistant"]
