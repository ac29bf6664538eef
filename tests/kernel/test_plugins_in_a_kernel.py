"""``%%agent --plugins`` and ``%agent memory`` / ``%agent summaries`` in a real kernel."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Kernel, text_of

SETUP = """
%load_ext ipyagent
from ipyagent.testing import ScriptedModel, tool_call
"""

NOTEBOOK = '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'


def test_the_memory_plugin_files_notes_the_user_lists_reads_and_forgets(jupyter_env: Path) -> None:
    notebook = jupyter_env / "analysis.ipynb"
    notebook.write_text(NOTEBOOK)
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(notebook)})
    try:
        remember = "tool_call('remember', {'title': 'Units', 'text': 'Distances are in metres.'})"
        kernel.run(SETUP + f"m = ScriptedModel([{remember}, 'Filed.', 'Metres, as noted.'])")
        reply, outputs = kernel.run("%%agent -m m -y --plugins memory\nRemember: distances are in metres.")
        assert reply["status"] == "ok", text_of(outputs)
        assert (jupyter_env / ".ipyagent" / "memory" / "units.md").exists()
        # Off unless named: a run without --plugins is offered no memory tools and no index.
        kernel.run("%%agent -m m\nAnd now?")
        names = "[[t.name for t in r.tools if t.name in ('remember', 'recall')] for r in m.requests]"
        _, outputs = kernel.run(f"print({names}, 'Distances are in metres.' in m.requests[2].system)")
        assert text_of(outputs).strip() == "[['remember', 'recall'], ['remember', 'recall'], []] False"

        _, outputs = kernel.run("%agent memory")
        listing = text_of(outputs)
        assert "1 note(s) in" in listing and "- Units: Distances are in metres." in listing
        _, outputs = kernel.run("%agent memory show units")
        assert text_of(outputs).strip() == "# Units\n\nDistances are in metres."
        _, outputs = kernel.run("%agent memory forget Units")
        assert "Deleted the note 'Units'" in text_of(outputs)
        assert not (jupyter_env / ".ipyagent" / "memory" / "units.md").exists()
        reply, outputs = kernel.run("%agent memory forget Units")
        assert reply["status"] == "error" and "There is no note 'Units'" in text_of(outputs)
    finally:
        kernel.close()


def test_summaries_reach_a_new_conversation_and_the_user_clears_them(jupyter_env: Path) -> None:
    notebook = jupyter_env / "analysis.ipynb"
    notebook.write_text(NOTEBOOK)
    kernel = Kernel(jupyter_env, env={"JPY_SESSION_NAME": str(notebook)})
    try:
        kernel.run(
            SETUP + "m = ScriptedModel(['42 rows.', 'Summary: counted 42 rows in sales.csv.\\nAdvice: none.',"
            " 'Hello again.', 'Summary: greeted.'])"
        )
        kernel.run("%config AgentMagics.plugins = ['summaries']")
        reply, outputs = kernel.run("%%agent -m m\nHow many rows?")
        assert reply["status"] == "ok", text_of(outputs)
        stored = jupyter_env / "analysis.summaries.jsonl"
        assert json.loads(stored.read_text())["summary"] == "counted 42 rows in sales.csv."
        kernel.run("%%agent -m m --new\nHi.")
        _, outputs = kernel.run("print('counted 42 rows in sales.csv.' in m.requests[2].system)")
        assert text_of(outputs).strip() == "True"
        _, outputs = kernel.run("%agent summaries")
        assert "2 summary(ies) in" in text_of(outputs) and "counted 42 rows" in text_of(outputs)
        _, outputs = kernel.run("%agent summaries clear")
        assert "Deleted 2 summary(ies)" in text_of(outputs) and not stored.exists()
    finally:
        kernel.close()


def test_an_unknown_plugin_is_refused_with_what_exists(kernel: Kernel) -> None:
    kernel.run(SETUP + "m = ScriptedModel(['hi'])")
    reply, outputs = kernel.run("%%agent -m m --plugins diary\nhello")
    assert reply["status"] == "error"
    assert "Unknown plugin 'diary'" in text_of(outputs) and "memory, summaries" in text_of(outputs)


def test_while_a_cassette_records_the_plugins_stay_out_and_say_so(jupyter_env: Path) -> None:
    where = {"IPYAGENT_CASSETTE": str(jupyter_env / "c.cassette.jsonl")}
    kernel = Kernel(jupyter_env, env={**where, "IPYAGENT_REPLAY": "record"})
    try:
        kernel.run(SETUP + "m = ScriptedModel(['hi', 'Summary: said hi.'])")
        reply, outputs = kernel.run("%%agent -m m --plugins memory,summaries\nhello")
        assert reply["status"] == "ok", text_of(outputs)
        assert "plugins memory, summaries are off while a cassette records or replays" in text_of(outputs)
        _, outputs = kernel.run(
            "print(len(m.requests), [t.name for t in m.requests[0].tools if t.name == 'recall'])"
        )
        assert text_of(outputs).strip() == "1 []"
    finally:
        kernel.close()
